"""A model directory from a training run's checkpoint: a milestone of a run that goes on.

    .venv/bin/python scripts/export_checkpoint.py RUN_DIR OUT_DIR [--fp16] [--decode-from models/default]

RUN_DIR is a `celeris-complete train -o RUN_DIR` output (its .work holds the checkpoint, tokenizer and
manifest). The weights are written as they are in the checkpoint (fp32) or, with --fp16, halved for
committing (loading casts them back); decoding defaults come from --decode-from's config.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from celeris_complete.model.directory import CONFIG, MANIFEST, WEIGHTS, save_model_dir
from celeris_complete.model.network import InfillModel, ModelConfig
from celeris_complete.model.tokenizer import CodeTokenizer
from celeris_complete.training.checkpoint import checkpoint_meta


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--fp16", action="store_true")
    ap.add_argument("--decode-from", type=Path, default=Path("models/default"))
    a = ap.parse_args()
    work = a.run / ".work"
    ckpt = work / "checkpoint.safetensors"
    meta = checkpoint_meta(ckpt)
    run = meta["run"]
    model = InfillModel(ModelConfig.from_dict(run["model"]))
    model.load_state_dict({k[6:]: v for k, v in load_file(str(ckpt)).items() if k.startswith("model.")})
    decode = json.loads((a.decode_from / CONFIG).read_text())["decode"]
    training = {
        "milestone_of": str(a.run),
        "steps": meta["step"],
        "tokens_seen": meta["tokens"],
        "wall_seconds": round(meta["elapsed"], 1),
        "init_from": run.get("init_from"),
        "context_lens": run["context_lens"],
        "parameters": model.num_parameters(),
        "history": meta["history"],
    }
    save_model_dir(
        a.out,
        model,
        CodeTokenizer.load(work / "tokenizer.json"),
        {"training": training, "context_len": max(run["context_lens"]), "decode": decode},
    )
    (a.out / MANIFEST).write_bytes((work / MANIFEST).read_bytes())
    if a.fp16:
        path = a.out / WEIGHTS
        weights = {k: v.to(torch.float16).contiguous() for k, v in load_file(str(path)).items()}
        save_file(weights, str(path), metadata={"format": "celeris-infill-v1"})
    print(f"{a.out}: step {meta['step']}, {meta['tokens'] / 1e6:.1f}M tokens")


if __name__ == "__main__":
    main()
