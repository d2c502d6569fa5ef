"""One refinement step over N canvases: batched (celeris_complete/batch_step.py) against one canvas at a
time (the engine's model, traced), per canvas, for the shipped model at a given quantization.

    .venv/bin/python scripts/measure_batch_step.py [--quant int8|none] [--rows 16] [--canvas 24] [--context 440]
"""

from __future__ import annotations

import argparse
import time

import torch

from celeris_complete.config import load_settings
from celeris_complete.engine import Engine
from celeris_complete.serve.batch_step import BatchStep, eager_model


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quant", default="int8")
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--canvas", type=int, default=24)
    ap.add_argument("--context", type=int, default=440)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    engine = Engine(load_settings(overrides={"quant": a.quant, "threads": 1}))
    model = eager_model(engine.model)
    batch = BatchStep(model, a.rows, engine.ids.mask)
    gen = torch.Generator().manual_seed(0)
    rows = []
    with torch.inference_mode():
        for _ in range(a.rows):
            _, kv = engine.model.encode_context(torch.randint(0, 8000, (1, a.context), generator=gen))
            slots = torch.randint(0, 8000, (1, a.canvas), generator=gen)
            slots[0, ::2] = engine.ids.mask
            rows.append((kv, slots))
            batch.add(kv)
        canvases = [s for _, s in rows]
        for _ in range(2):
            batch.step(canvases)
            for kv, s in rows:
                engine.model.span_step(s, kv)
        t0 = time.perf_counter()
        for _ in range(a.repeat):
            batch.step(canvases)
        batched = (time.perf_counter() - t0) / a.repeat / a.rows
        t0 = time.perf_counter()
        for _ in range(a.repeat):
            for kv, s in rows:
                engine.model.span_step(s, kv)
        alone = (time.perf_counter() - t0) / a.repeat / a.rows
    print(
        f"quant {a.quant}, {a.rows} canvases of {a.canvas} slots at contexts of {a.context} tokens, 1 thread: "
        f"batched {batched * 1e3:.2f} ms per canvas and step, one at a time ({type(engine.model).__name__}) "
        f"{alone * 1e3:.2f} ms (exact per row: {batch.exact})"
    )


if __name__ == "__main__":
    main()
