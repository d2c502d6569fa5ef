"""Engine latency of model shapes before training any: random weights, the shipped model's tokenizer
and decoding settings, `celeris-complete selftest` on each (int8, this machine's threads).

    .venv/bin/python scripts/measure_shape_latency.py [384x8x6 512x8x8 384x6x6 320x8x5] [--requests 12]

Each shape is D_MODELxLAYERSxHEADS. The weights do not change the arithmetic of a refinement step, so
this is how a size is chosen against the latency targets (engine keystroke p50 <= 25 ms, new place
p95 <= 100 ms) before a GPU trains it. Positions as the GPU run's models have them (1,024 context
tokens).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from celeris_complete.model.directory import load_model_dir, save_model_dir  # noqa: E402
from celeris_complete.model.network import InfillModel, ModelConfig  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", nargs="*", default=["384x8x6", "512x8x8", "384x6x6", "320x8x5"])
    ap.add_argument("--requests", type=int, default=12)
    ap.add_argument("--positions", type=int, default=1024 + 64 + 64)
    a = ap.parse_args()
    shipped = REPO / "models" / "default"
    base = load_model_dir(shipped)
    config = json.loads((shipped / "config.json").read_text(encoding="utf-8"))
    meta = {k: config[k] for k in ("decode", "context_len") if k in config}
    cli = Path(sys.executable).with_name("celeris-complete")
    with tempfile.TemporaryDirectory() as tmp:
        for shape in a.shapes:
            d, layers, heads = (int(x) for x in shape.split("x"))
            shape_keys = {"d_model": d, "n_layers": layers, "n_heads": heads, "max_positions": a.positions}
            cfg = ModelConfig.from_dict({**base.config.to_dict(), **shape_keys})
            model = InfillModel(cfg)
            out = Path(tmp) / shape
            save_model_dir(out, model, base.tokenizer, meta)
            run = subprocess.run(
                [str(cli), "selftest", "--model", str(out), "--requests", str(a.requests), "--json"],
                capture_output=True,
                text=True,
            )
            if not run.stdout.strip():
                sys.exit(f"{shape}: selftest printed nothing: {run.stderr[-500:]}")
            got = json.loads(run.stdout)
            k, n = got["keystroke_ms"], got["cache_miss_ms"]
            print(
                f"{shape}: {model.num_parameters() / 1e6:.1f}M parameters, keystroke p50 / p95 {k['p50']} / "
                f"{k['p95']} ms, new place p50 / p95 {n['p50']} / {n['p95']} ms",
                flush=True,
            )


if __name__ == "__main__":
    main()
