"""A deeper copy of a model directory that answers exactly as the original (see celeris_complete/grow.py).

    .venv/bin/python scripts/grow_depth.py SRC_MODEL_DIR OUT_DIR --layers 8

Go on training it with `celeris-complete train --init-from OUT_DIR ...`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from celeris_complete.model.directory import MANIFEST, load_model_dir, save_model_dir
from celeris_complete.training.grow import grow_depth


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("src", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--layers", type=int, required=True)
    a = ap.parse_args()
    src = load_model_dir(a.src)
    grown = grow_depth(src.model, a.layers)
    meta = dict(src.meta)
    training = dict(meta.get("training", {}))
    training.pop("history", None)
    training["grown_from"] = {"path": str(src.path), "n_layers": src.config.n_layers}
    training["parameters"] = grown.num_parameters()
    meta["training"] = training
    save_model_dir(a.out, grown, src.tokenizer, meta)
    if (src.path / MANIFEST).is_file():
        (a.out / MANIFEST).write_bytes((src.path / MANIFEST).read_bytes())
    print(f"{a.out}: {src.config.n_layers} -> {a.layers} layers, {grown.num_parameters():,} parameters")


if __name__ == "__main__":
    main()
