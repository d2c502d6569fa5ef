"""A copy of a model directory whose vocabulary is extended for more languages (training/vocab.py).

    .venv/bin/python scripts/extend_vocab.py models/default OUT_DIR --merges 2048 --languages all

The merges are learned on the named languages' corpus files (their allowlisted packages,
``training/sources.py``), training side only (the held-out files are the corpus's own split), up to
``--chars`` characters of each language, never a file of ``bench repo``'s packages. Given old tokens, the
copy gives every old token the logit the source gave it; go on training it on the multilingual corpus
with ``celeris-complete train --init-from OUT_DIR --packages --languages all ...``.

    .venv/bin/python scripts/extend_vocab.py models/default OUT_DIR --tokenizer EXTENDED/tokenizer.json

grows the model for a tokenizer extended before (the same copy, without the corpus: what
``scripts/device_train.sh`` does on the GPU machine, which reaches no registry, with the packed
corpus's tokenizer).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from celeris_complete.bench.repo_languages import bench_file_hashes
from celeris_complete.model.directory import MANIFEST, load_model_dir, save_model_dir
from celeris_complete.model.tokenizer import CodeTokenizer
from celeris_complete.training.corpus import sample_texts, validation_split
from celeris_complete.training.sources import SUFFIXES, language_files
from celeris_complete.training.vocab import extend_model, extend_tokenizer


def training_texts(language: str, chars: int) -> list[str]:
    """Whole training-side files of ``language`` in a seeded order, until they hold ``chars`` characters."""
    never = bench_file_hashes((language,))  # what bench repo evaluates on is never learned from
    files = [f for f in language_files(language, progress=print) if f.sha256 not in never]
    held = validation_split(files)
    return sample_texts([f for f in files if f.sha256 not in held], chars, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--merges", type=int, default=2048)
    ap.add_argument("--languages", default="all", help=f"comma-separated among {', '.join(SUFFIXES)}, or all")
    ap.add_argument("--chars", type=int, default=6_000_000, help="training characters per language, at most")
    ap.add_argument("--tokenizer", type=Path, help="an extended tokenizer to grow the model for (no merges learned)")
    a = ap.parse_args()
    languages = list(SUFFIXES) if a.languages == "all" else [x.strip() for x in a.languages.split(",")]
    src = load_model_dir(a.src)
    if a.tokenizer:
        tok, texts, languages = CodeTokenizer.load(a.tokenizer), [], []
    else:
        texts = [t for language in languages for t in training_texts(language, a.chars)]
        tok = extend_tokenizer(src.tokenizer, texts, a.merges)
    grown = extend_model(src.model, src.tokenizer, tok)
    meta = dict(src.meta)
    meta.pop("bpe_vocab_size", None)  # the new tokenizer's is written
    training = dict(meta.get("training", {}))
    training.pop("history", None)
    training["vocab_extended_from"] = {
        "path": str(src.path),
        "vocab_size": src.tokenizer.vocab_size,
        "merges": tok.bpe_vocab_size - src.tokenizer.bpe_vocab_size,
        "languages": languages,
        "chars": sum(map(len, texts)),
    }
    training["parameters"] = grown.num_parameters()
    meta["training"] = training
    save_model_dir(a.out, grown, tok, meta)
    if (src.path / MANIFEST).is_file():
        (a.out / MANIFEST).write_bytes((src.path / MANIFEST).read_bytes())
    print(f"{a.out}: {src.tokenizer.vocab_size} -> {tok.vocab_size} tokens, {grown.num_parameters():,} parameters")


if __name__ == "__main__":
    main()
