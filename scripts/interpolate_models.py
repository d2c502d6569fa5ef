"""A model whose weights lie between two models of one architecture and tokenizer (weight interpolation).

    .venv/bin/python scripts/interpolate_models.py BASE TUNED OUT --alpha 0.5

OUT's weights are (1 - alpha) * BASE + alpha * TUNED, tensor by tensor: alpha 0 is BASE, 1 is TUNED.
Meant for a continuation (TUNED, trained further from BASE on other code): a point between the two
often keeps what the base did well and most of what the continuation learned ("WiSE-FT", Wortsman
et al. 2022). Decoding defaults and the tokenizer come from BASE; the corpus manifest from TUNED (the
union of what both saw is BASE's corpus plus TUNED's, and TUNED's manifest lists the larger one).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from celeris_complete.model.directory import MANIFEST, TOKENIZER, load_model_dir, save_model_dir


def interpolate(base: dict[str, torch.Tensor], tuned: dict[str, torch.Tensor], alpha: float) -> dict:
    if set(base) != set(tuned):
        raise SystemExit(f"the models' tensors differ: {sorted(set(base) ^ set(tuned))[:3]}")
    out = {}
    for name, a in base.items():
        b = tuned[name]
        if a.shape != b.shape:
            raise SystemExit(f"{name}: shape {tuple(a.shape)} vs {tuple(b.shape)}")
        out[name] = torch.lerp(a.float(), b.float(), alpha)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("base", type=Path)
    ap.add_argument("tuned", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--alpha", type=float, required=True, help="0: BASE, 1: TUNED")
    a = ap.parse_args()
    if not 0.0 <= a.alpha <= 1.0:
        raise SystemExit("--alpha must lie in [0, 1]")
    base, tuned = load_model_dir(a.base), load_model_dir(a.tuned)
    if base.config != tuned.config:
        raise SystemExit(f"different architectures: {base.config} vs {tuned.config}")
    if (a.base / TOKENIZER).read_bytes() != (a.tuned / TOKENIZER).read_bytes():
        raise SystemExit("different tokenizers: weights of the two models mean different tokens")
    base.model.load_state_dict(interpolate(base.model.state_dict(), tuned.model.state_dict(), a.alpha))
    meta = {
        "training": {
            "interpolated": {"base": str(a.base), "tuned": str(a.tuned), "alpha": a.alpha},
            "parameters": base.model.num_parameters(),
        },
        "context_len": base.meta.get("context_len"),
        "decode": base.meta.get("decode"),
    }
    save_model_dir(a.out, base.model, base.tokenizer, meta)
    manifest = a.tuned / MANIFEST
    if manifest.is_file():
        (a.out / MANIFEST).write_bytes(manifest.read_bytes())
    print(json.dumps({"out": str(a.out), **meta["training"]["interpolated"]}))


if __name__ == "__main__":
    main()
