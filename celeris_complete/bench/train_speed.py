"""Training throughput of the real training step on this machine, per configuration (tokens/s).

Each configuration (``eager`` or ``compile``, ``fp32`` or ``bf16`` autocast) trains a fresh model of
the given size on random token batches laid out as training lays them out (batch x context, a canvas
of 32), with the same loss, backward pass, clipping and optimizer step as ``celeris-complete train``;
the first steps (warm-up, compilation) are not timed.  ``busy`` single-threaded busy processes run
meanwhile (other work on the machine: a session's tests, an editor), to see what a background run gets
then.  ``tokens_per_s`` is from the median step, ``tokens_per_s_mean`` from the whole time (stalls
included).
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Sequence

import numpy as np
import torch

from celeris_complete.model.network import InfillModel, ModelConfig
from celeris_complete.model.tokenizer import CodeTokenizer
from celeris_complete.training.data import Batch
from celeris_complete.training.losses import _optimizer, losses
from celeris_complete.training.validation import make_masks

CANVAS = 32
WARM_STEPS = 3
CONFIGS = ("eager:fp32", "eager:bf16", "compile:fp32", "compile:bf16")


def _step_model(model: InfillModel, compiled: bool) -> torch.nn.Module:
    if not compiled:
        return model
    import torch._dynamo

    torch._dynamo.config.cache_size_limit = 64
    return torch.compile(model, dynamic=False)


def measure(cfg: ModelConfig, tok: CodeTokenizer, config: str, steps: int, batch: int, context: int) -> dict:
    """One configuration ``MODE:PRECISION``: the median step's time and the tokens per second."""
    mode, precision = config.split(":")
    torch.manual_seed(0)
    model = InfillModel(cfg)
    opt = _optimizer(model, 1e-3)
    step_model = _step_model(model, mode == "compile")
    amp = torch.bfloat16 if precision == "bf16" else None
    rng = np.random.default_rng(0)
    gen = torch.Generator().manual_seed(0)
    vocab = tok.bpe_vocab_size  # ordinary tokens; the masks and markers are the loss's to place
    times = []
    for i in range(WARM_STEPS + steps):
        b = Batch(
            rng.integers(0, vocab, (batch, context)),
            rng.integers(0, vocab, (batch, CANVAS)),
            rng.integers(1, CANVAS, batch),
        )
        t0 = time.perf_counter()
        t, masked = make_masks(gen, batch, CANVAS, "cpu")
        loss, _, _ = losses(step_model, b, t, masked, tok, "cpu", amp, 0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if i >= WARM_STEPS:
            times.append(time.perf_counter() - t0)
    per_step = float(np.median(times))
    tokens = batch * (context + CANVAS)
    return {
        "config": config,
        "params_M": round(model.num_parameters() / 1e6, 2),
        "step_s": round(per_step, 3),
        "tokens_per_s": round(tokens / per_step),
        "tokens_per_s_mean": round(tokens * len(times) / sum(times)),
        "threads": torch.get_num_threads(),
    }


def _busy() -> None:
    while True:
        pass


def run(
    tok: CodeTokenizer,
    configs: Sequence[str] = CONFIGS,
    d_model: int = 256,
    n_layers: int = 6,
    n_heads: int = 4,
    steps: int = 12,
    batch: int = 16,
    context: int = 384,
    busy: int = 0,
) -> list[dict]:
    cfg = ModelConfig(
        vocab_size=tok.vocab_size, d_model=d_model, n_layers=n_layers, n_heads=n_heads,
        max_positions=context + 128,
    )  # fmt: skip
    workers = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(busy)]
    for w in workers:
        w.start()
    try:
        return [{**measure(cfg, tok, c, steps, batch, context), "busy": busy} for c in configs]
    finally:
        for w in workers:
            w.terminate()
