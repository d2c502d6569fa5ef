"""A run's checkpoint: the weights, the optimizer's moments, the random states and the run's state (meta),
written whole or not at all."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file


def save_checkpoint(path: Path, model, opt, meta: dict, np_rng, torch_rng: torch.Generator) -> None:
    tensors = {f"model.{k}": v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    names = {id(p): n for n, p in model.named_parameters()}
    for group in opt.param_groups:
        for p in group["params"]:
            st = opt.state.get(p)
            if st:
                tensors[f"opt.exp_avg.{names[id(p)]}"] = st["exp_avg"].cpu().contiguous()
                tensors[f"opt.exp_avg_sq.{names[id(p)]}"] = st["exp_avg_sq"].cpu().contiguous()
                meta.setdefault("opt_step", float(st["step"]))
    tensors["rng.torch"] = torch_rng.get_state()
    meta = {**meta, "np_rng": np_rng.bit_generator.state}
    tmp = Path(str(path) + ".tmp")
    save_file(tensors, str(tmp), metadata={"meta": json.dumps(meta)})
    tmp.replace(path)  # never a half-written checkpoint


def checkpoint_meta(path: Path) -> dict:
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        return json.loads(f.metadata()["meta"])


def load_checkpoint(path: Path, model, opt, np_rng, torch_rng: torch.Generator) -> dict:
    meta = checkpoint_meta(path)
    tensors = load_file(str(path))
    model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
    params = dict(model.named_parameters())
    for name, p in params.items():
        if f"opt.exp_avg.{name}" in tensors:
            opt.state[p] = {
                "step": torch.tensor(meta["opt_step"]),
                "exp_avg": tensors[f"opt.exp_avg.{name}"].to(p.device),
                "exp_avg_sq": tensors[f"opt.exp_avg_sq.{name}"].to(p.device),
            }
    torch_rng.set_state(tensors["rng.torch"])
    np_rng.bit_generator.state = meta["np_rng"]
    return meta
