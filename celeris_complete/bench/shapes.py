"""Engine latency of model shapes before any is trained: random weights with a model's tokenizer and
decoding settings, ``celeris-complete selftest`` on each, in a process of its own (this machine's
threads, the configured quantization).

The weights do not change the arithmetic of a refinement step, so this is how a size is chosen
against the latency targets (engine keystroke p50 <= 25 ms, new place p95 <= 100 ms) before a GPU
trains it.  A shape is ``D_MODELxLAYERSxHEADS``; positions as the GPU run's models have them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from celeris_complete.errors import CelerisError
from celeris_complete.model.directory import load_model_dir, save_model_dir
from celeris_complete.model.network import InfillModel, ModelConfig

SHAPES = ("384x8x6", "512x8x8", "384x6x6", "320x8x5")
POSITIONS = 1024 + 64 + 64  # context, canvas and room, as the GPU run's models


def parse_shape(shape: str) -> tuple[int, int, int]:
    try:
        d_model, layers, heads = (int(x) for x in shape.lower().split("x"))
    except ValueError:
        raise CelerisError(f"{shape!r}: a shape is D_MODELxLAYERSxHEADS, for example 384x8x6") from None
    if min(d_model, layers, heads) < 1 or d_model % heads or (d_model // heads) % 2:
        raise CelerisError(f"{shape!r}: d_model must split into heads of an even size")
    return d_model, layers, heads


def run(base_dir: Path, shapes: Sequence[str] = SHAPES, requests: int = 12, positions: int = POSITIONS) -> list[dict]:
    """Per shape: parameters, keystroke and new-place p50 / p95 in ms from selftest."""
    parsed = [(s, *parse_shape(s)) for s in shapes]  # every shape checked before the first is measured
    base = load_model_dir(base_dir)
    config = json.loads((base_dir / "config.json").read_text(encoding="utf-8"))
    meta = {k: config[k] for k in ("decode", "context_len") if k in config}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for shape, d_model, layers, heads in parsed:
            keys = {"d_model": d_model, "n_layers": layers, "n_heads": heads, "max_positions": positions}
            model = InfillModel(ModelConfig.from_dict({**base.config.to_dict(), **keys}))
            out = Path(tmp) / shape
            save_model_dir(out, model, base.tokenizer, meta)
            command = [sys.executable, "-m", "celeris_complete.cli", "selftest", "--model", str(out)]
            command += ["--requests", str(requests), "--json"]
            done = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
            try:
                got = json.loads(done.stdout)
            except json.JSONDecodeError:
                raise CelerisError(f"{shape}: selftest printed no result: {done.stderr[-800:]}") from None
            k, n = got["keystroke_ms"], got["cache_miss_ms"]
            rows.append({
                "shape": shape, "params_M": round(model.num_parameters() / 1e6, 2),
                "keystroke_p50_ms": k["p50"], "keystroke_p95_ms": k["p95"],
                "new_place_p50_ms": n["p50"], "new_place_p95_ms": n["p95"], "verdict": got["verdict"],
            })  # fmt: skip
    return rows
