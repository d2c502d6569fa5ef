"""Tune the shipped model's decoding defaults on its held-out validation split.

Decodes held-out spans through the whole engine (text in, text out) for a sweep of end-of-span
penalties at 4 steps, then of step counts at the best penalty; writes every row to
results/decoding_sweep.json. Usage: .venv/bin/python scripts/tune_decoding.py [SAMPLES]
"""

import json
import sys
import time
from pathlib import Path

from celeris_complete.bench.engine import validation_exact_match
from celeris_complete.config import load_settings
from celeris_complete.engine import Engine


def main() -> None:
    samples = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    base = load_settings(environ={}, user_file=Path("/nonexistent"))
    engine = Engine(base)
    rows = []

    def run(**overrides):
        engine.use_settings(base.with_overrides(overrides, "sweep"))
        t0 = time.perf_counter()
        row = {**overrides, **validation_exact_match(engine, samples)}
        row["seconds"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
        return row

    best = max(
        (run(steps=4, eos_penalty=p) for p in (0.0, 0.5, 1.0, 2.0, 3.0)),
        key=lambda r: (r["exact_match"], -r["empty_rate"]),
    )
    for steps in (1, 2, 8):
        run(steps=steps, eos_penalty=best["eos_penalty"])
    Path("results").mkdir(exist_ok=True)
    Path("results/decoding_sweep.json").write_text(json.dumps({"samples": samples, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
