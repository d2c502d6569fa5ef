"""Training throughput (tokens/s) of the real training step, per configuration.

    .venv/bin/python scripts/measure_train_speed.py [--steps 12] [--d-model 256 --n-layers 6 --n-heads 4]
        [--configs eager:fp32,eager:bf16,compile:fp32,compile:bf16] [--batch 16 --context 384]
        [--threads N] [--busy N]

Each configuration trains a fresh model of the given size on random token batches laid out as
training lays them out (batch x context, canvas 32), with the same loss, backward pass, clipping and
optimizer step as ``celeris-complete train``; the first steps (warm-up, compilation) are not timed.
``--busy N`` runs N single-threaded busy processes meanwhile (other work on the machine: a session's
tests, an editor), to see what a background run gets then; ``tokens_per_s`` is from the median step,
``tokens_per_s_mean`` from the whole time (stalls included).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time

import numpy as np
import torch

from celeris_complete.model.directory import load_model_dir
from celeris_complete.model.network import InfillModel, ModelConfig
from celeris_complete.training.data import Batch
from celeris_complete.training.losses import _optimizer, losses
from celeris_complete.training.validation import make_masks


def maybe_compile(model: InfillModel, enabled: bool) -> torch.nn.Module:
    if not enabled:
        return model
    import torch._dynamo

    torch._dynamo.config.cache_size_limit = 64
    return torch.compile(model, dynamic=False)


def measure(cfg: ModelConfig, tok, mode: str, precision: str, steps: int, batch: int, context: int) -> dict:
    torch.manual_seed(0)
    model = InfillModel(cfg)
    opt = _optimizer(model, 1e-3)
    step_model = maybe_compile(model, mode == "compile")
    amp = torch.bfloat16 if precision == "bf16" else None
    rng = np.random.default_rng(0)
    g = torch.Generator().manual_seed(0)
    canvas = 32
    warm = 3
    times = []
    for i in range(warm + steps):
        b = Batch(
            rng.integers(0, 8000, (batch, context)),
            rng.integers(0, 8000, (batch, canvas)),
            rng.integers(1, canvas, batch),
        )
        t0 = time.perf_counter()
        t, masked = make_masks(g, batch, canvas, "cpu")
        loss, _, _ = losses(step_model, b, t, masked, tok, "cpu", amp, 0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if i >= warm:
            times.append(time.perf_counter() - t0)
    per_step = float(np.median(times))
    return {
        "config": f"{mode}:{precision}",
        "params_M": round(model.num_parameters() / 1e6, 2),
        "step_s": round(per_step, 3),
        "tokens_per_s": round(batch * (context + canvas) / per_step),
        "tokens_per_s_mean": round(batch * (context + canvas) * len(times) / sum(times)),
        "threads": torch.get_num_threads(),
    }


def _busy() -> None:
    while True:
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--context", type=int, default=384)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--n-layers", type=int, default=6)
    ap.add_argument("--n-heads", type=int, default=4)
    ap.add_argument("--configs", default="eager:fp32,eager:bf16,compile:fp32,compile:bf16")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--busy", type=int, default=0, help="busy processes running meanwhile")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    busy = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(a.busy)]
    for p in busy:
        p.start()
    tok = load_model_dir("models/default").tokenizer
    cfg = ModelConfig(d_model=a.d_model, n_layers=a.n_layers, n_heads=a.n_heads, max_positions=a.context + 128)
    for c in a.configs.split(","):
        mode, precision = c.split(":")
        row = measure(cfg, tok, mode, precision, a.steps, a.batch, a.context)
        print(json.dumps({**row, "busy": a.busy}), flush=True)
    for p in busy:
        p.terminate()


if __name__ == "__main__":
    main()
