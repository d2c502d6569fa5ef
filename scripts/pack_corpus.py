"""The training corpus, tokenized and packed small enough to travel to the lent GPU machine.

    .venv/bin/python scripts/pack_corpus.py RUN_DIR [--out corpus-pack] [--max-mb 28] [--xz-preset 6]

RUN_DIR is a `celeris-complete train --packages -o RUN_DIR` output whose .work holds the tokenized
corpus (train.bin, val.bin, tokenizer.json, corpus_manifest.json). The GPU machine reaches no package
registry, and the device tool carries at most 64 MiB (the working tree included), so the training
tokens go as evenly spaced 1M-token chunks of the whole stream (every source represented),
xz-compressed until the pack reaches --max-mb (the estimate is conservative: --max-mb 45 gave
58.7M of 101.4M tokens in 31 MB at preset 6, the default, and 52.4M in 33 MB at preset 1).
--phase 0.5 takes the chunks between those of phase 0, for a second run on tokens the first did not
see. The validation tokens go whole. `scripts/device_train.sh` unpacks the folder into the run's
.work, where `celeris-complete train` finds the data ready.
"""

from __future__ import annotations

import argparse
import json
import lzma
import shutil
from pathlib import Path

import numpy as np

CHUNK = 1 << 20  # tokens


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run", type=Path)
    ap.add_argument("--out", type=Path, default=Path("corpus-pack"))
    ap.add_argument("--max-mb", type=float, default=28.0)
    ap.add_argument(
        "--phase", type=float, default=0.0, help="shift the chunks by this fraction of their spacing (0.5: between)"
    )
    ap.add_argument("--xz-preset", type=int, default=6, choices=range(10))
    ap.add_argument("--file-id", type=int, default=None, help="FILE token id (default: from the tokenizer)")
    a = ap.parse_args()
    work = a.run / ".work"
    train = np.memmap(work / "train.bin", dtype=np.uint16, mode="r")
    val = np.fromfile(work / "val.bin", dtype=np.uint16)
    a.out.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "corpus_manifest.json"):
        shutil.copy(work / name, a.out / name)
    file_id = int(train[0]) if a.file_id is None else a.file_id  # the stream starts with a FILE token
    val_xz = lzma.compress(val.tobytes(), preset=a.xz_preset)
    budget = a.max_mb * 1e6 - len(val_xz) - (a.out / "corpus_manifest.json").stat().st_size
    n_chunks = len(train) // CHUNK
    # The compression ratio, from a sample: how many chunks fit the budget.
    sample = lzma.compress(np.asarray(train[:CHUNK]).tobytes(), preset=a.xz_preset)
    wanted = max(1, min(n_chunks, int(budget / len(sample) * 0.95)))
    spacing = (n_chunks - 1) * CHUNK / max(1, wanted - 1)
    starts = np.linspace(0, (n_chunks - 1) * CHUNK, wanted)
    starts = np.minimum(starts + a.phase * spacing, (n_chunks - 1) * CHUNK).astype(np.int64)
    sep = np.array([file_id], dtype=np.uint16)
    parts = [sep]
    for s in starts:
        parts += [np.asarray(train[s : s + CHUNK]), sep]
    picked = np.concatenate(parts)
    (a.out / "train.bin.xz").write_bytes(lzma.compress(picked.tobytes(), preset=a.xz_preset))
    (a.out / "val.bin.xz").write_bytes(val_xz)
    info = {"train_tokens": int(picked.size), "of": int(train.size), "chunks": int(wanted)}
    info |= {"val_tokens": int(val.size), "phase": a.phase}
    (a.out / "pack.json").write_text(json.dumps(info) + "\n")
    total = sum(p.stat().st_size for p in a.out.iterdir())
    print(f"{a.out}: {total / 1e6:.1f} MB, {info['train_tokens'] / 1e6:.1f}M of {info['of'] / 1e6:.1f}M train tokens")


if __name__ == "__main__":
    main()
