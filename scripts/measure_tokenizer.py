"""Would a tokenizer trained on the packages corpus serve better than the shipped one (trained on the
standard library)? Characters per token on code neither was trained on: fewer tokens for the same text
mean more context in the prompt budget and fewer canvas slots per line.

    .venv/bin/python scripts/measure_tokenizer.py [--sample-mb 40] [--seed 0]

A new tokenizer (the shipped vocabulary size) is trained on a seeded random sample of the packages
corpus's training files (held-out files excluded, as `train --packages` splits them), then both are
measured on: the packages corpus's held-out files, HumanEval-Infilling's programs, and the Python files
of `bench repo`'s five evaluation packages (downloaded once into its cache).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import time
from pathlib import Path

from celeris_complete.bench import repo as bench_repo
from celeris_complete.bench.quality import DATA_DIR
from celeris_complete.model.directory import load_model_dir
from celeris_complete.model.tokenizer import CodeTokenizer
from celeris_complete.training import corpus as corpus_mod
from celeris_complete.training.packages import fetch_sources


def chars_per_token(tok: CodeTokenizer, texts: list[str]) -> float:
    chars = sum(len(t) for t in texts)
    tokens = sum(len(ids) for ids in tok.encode_batch(texts))
    return chars / max(1, tokens)


def humaneval_programs() -> list[str]:
    path = Path(DATA_DIR) / "HumanEval-SingleLineInfilling.jsonl.gz"
    seen, out = set(), []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            task = json.loads(line)
            key = task["task_id"].split("/")[2]
            if key not in seen:  # one whole program per problem
                seen.add(key)
                out.append(task["prompt"] + task["canonical_solution"] + task["suffix"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sample-mb", type=float, default=40.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    roots = corpus_mod.default_roots() + [s.root for s in fetch_sources()]
    files = corpus_mod.gather(roots, corpus_mod.DEFAULT_EXCLUDES)
    held = corpus_mod.validation_split(files)
    train = [f for f in files if f.sha256 not in held]
    val = [f.text for f in files if f.sha256 in held]
    random.Random(args.seed).shuffle(train)
    sample, size = [], 0
    for f in train:
        if size >= args.sample_mb * 1e6:
            break
        sample.append(f.text)
        size += len(f.text)
    shipped = load_model_dir("models/default").tokenizer
    t0 = time.perf_counter()
    new = CodeTokenizer.train(sample, vocab_size=shipped.vocab_size)
    trained_s = time.perf_counter() - t0

    evaluation = {
        "packages corpus, held-out files": val,
        "HumanEval-Infilling programs": humaneval_programs(),
    }
    for name, version in bench_repo.PACKAGES:
        root = bench_repo.fetch_package(name, version)
        evaluation[f"bench repo: {name} {version}"] = list(bench_repo.python_files(root).values())
    print(f"new tokenizer: {new.vocab_size} tokens, trained on {size / 1e6:.1f} MB "
          f"({len(sample)} files) in {trained_s:.0f} s\n")  # fmt: skip
    print("| text | MB | chars/token shipped | chars/token packages-trained | tokens saved |")
    print("|---|---|---|---|---|")
    for label, texts in evaluation.items():
        a, b = chars_per_token(shipped, texts), chars_per_token(new, texts)
        mb = sum(len(t) for t in texts) / 1e6
        print(f"| {label} | {mb:.2f} | {a:.3f} | {b:.3f} | {1 - a / b:.1%} |")


if __name__ == "__main__":
    main()
