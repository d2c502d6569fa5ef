"""Characters per token for each language the corpus holds, with the shipped tokenizer and with fresh ones.

Issue 45 asks for this measurement before the tokenizer for a multilingual model is chosen. For
each language (Python: the standard library; the others: their allowlisted packages in
``training/sources.py``, fetched as ``celeris-complete corpus --languages all`` fetches them), files are
gathered and split as training gathers and splits them (``corpus.gather``, ``validation_split``). The
figures come from the held-out files; the fresh tokenizers are trained on the training side only.

For each tokenizer and language it prints characters per token, tokens per non-blank line (p50, p90,
p99) and the share of non-blank lines longer than a line canvas (``canvas_line``, the shipped model's
recommended 24 slots; a line the canvas cannot hold is cut). Fresh tokenizers: one BPE trained on all
languages' training text (the same characters from each language), with as many tokens as the shipped
one, and with twice as many. Extended tokenizers: the shipped one with N merges appended, learned on the
other languages' training text (every shipped token keeps its id and bytes, so the model's embedding rows
carry over); for those, the share of Python's tokens that change.

    .venv/bin/python scripts/measure_tokenizer.py [--chars 3000000] [--output results/issue45/tokenizer.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from celeris_complete.bench.repo_languages import bench_file_hashes
from celeris_complete.model.directory import default_model_dir
from celeris_complete.model.tokenizer import CodeTokenizer
from celeris_complete.training.corpus import sample_texts, validation_split
from celeris_complete.training.sources import SUFFIXES, language_files
from celeris_complete.training.vocab import extend_tokenizer


def changed_share(old: CodeTokenizer, new: CodeTokenizer, texts: list[str]) -> float:
    """The share of ``old``'s tokens of ``texts`` that ``new`` does not cut the same (same start and end)."""
    changed = total = 0
    for a, b in zip(
        old.bpe.encode_batch(texts, add_special_tokens=False), new.bpe.encode_batch(texts, add_special_tokens=False)
    ):
        spans = set(b.offsets)
        total += len(a.offsets)
        changed += sum(span not in spans for span in a.offsets)
    return changed / total


def figures(tok: CodeTokenizer, texts: list[str], canvas_line: int) -> dict:
    chars = sum(len(t) for t in texts)
    tokens = sum(len(ids) for ids in tok.encode_batch(texts))
    lines = [line for t in texts for line in t.split("\n") if line.strip()]
    per_line = sorted(len(ids) for ids in tok.encode_batch([line.lstrip() for line in lines]))

    def q(p: float) -> int:
        return per_line[min(len(per_line) - 1, int(p * len(per_line)))]

    return {
        "chars": chars,
        "tokens": tokens,
        "chars_per_token": round(chars / tokens, 3),
        "tokens_per_line_p50_p90_p99": [q(0.5), q(0.9), q(0.99)],
        "mean_tokens_per_line": round(statistics.fmean(per_line), 2),
        "lines_over_canvas": round(sum(n > canvas_line for n in per_line) / len(per_line), 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chars", type=int, default=3_000_000, help="held-out characters measured per language, at most")
    ap.add_argument(
        "--train-chars", type=int, default=6_000_000, help="training characters per language for the fresh tokenizers"
    )
    ap.add_argument("--languages", default="python," + ",".join(SUFFIXES))
    ap.add_argument("--output", type=Path)
    args = ap.parse_args()

    model = default_model_dir()
    shipped = CodeTokenizer.load(model / "tokenizer.json")
    canvas_line = int(json.loads((model / "config.json").read_text(encoding="utf-8"))["decode"]["canvas_line"])
    held, train = {}, {}
    for language in args.languages.split(","):
        never = bench_file_hashes((language,)) if language != "python" else set()  # bench repo's: not measured
        files = [f for f in language_files(language) if f.sha256 not in never]
        out = validation_split(files)
        held[language] = sample_texts([f for f in files if f.sha256 in out], args.chars, 0)
        train[language] = sample_texts([f for f in files if f.sha256 not in out], args.train_chars, 1)
        print(f"{language}: {len(files)} files, {len(out)} held out; measuring {sum(map(len, held[language])):,} "
              f"characters, {sum(map(len, train[language])):,} to train fresh tokenizers", file=sys.stderr)  # fmt: skip

    tokenizers = {f"shipped ({shipped.vocab_size})": shipped}
    mixed = [t for texts in train.values() for t in texts]
    for size in (shipped.vocab_size, 2 * shipped.vocab_size):
        t0 = time.perf_counter()
        tokenizers[f"fresh, all languages ({size})"] = CodeTokenizer.train(mixed, size)
        print(f"trained a {size}-token BPE in {time.perf_counter() - t0:.0f} s", file=sys.stderr)

    others = [t for language, texts in train.items() if language != "python" for t in texts]
    python_changes = {}
    for n in (2048, 4096):
        t0 = time.perf_counter()
        grown = extend_tokenizer(shipped, others, n)
        name = f"shipped + {grown.vocab_size - shipped.vocab_size} merges ({grown.vocab_size})"
        tokenizers[name] = grown
        python_changes[name] = changed_share(shipped, tokenizers[name], held["python"]) if "python" in held else None
        print(f"extended by {n} merges in {time.perf_counter() - t0:.0f} s; Python tokens changed: "
              f"{python_changes[name]}", file=sys.stderr)  # fmt: skip

    result = {"canvas_line": canvas_line, "python_tokens_changed": python_changes, "tokenizers": {}}
    print(f"| tokenizer | language | chars/token | tokens per line p50 / p90 / p99 | lines over {canvas_line} tokens |")
    print("|---|---|---|---|---|")
    for name, tok in tokenizers.items():
        result["tokenizers"][name] = {}
        for language, texts in held.items():
            f = figures(tok, texts, canvas_line)
            result["tokenizers"][name][language] = f
            p = " / ".join(map(str, f["tokens_per_line_p50_p90_p99"]))
            print(f"| {name} | {language} | {f['chars_per_token']:.2f} | {p} | {100 * f['lines_over_canvas']:.1f}% |")
    if args.output:
        args.output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
