"""Resident memory of the engine over many completions at varied places (context lengths vary).

Usage: .venv/bin/python scripts/measure_engine_memory.py QUANT [PLACES]   (QUANT: none, int8, bf16)
Prints the resident set size after loading and every 50 places (3 keystrokes each).
"""

import os
import sys
import time
from pathlib import Path

from celeris_complete.engine import InfillRequest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from celeris_complete.bench.selftest import sample_cursors  # noqa: E402
from celeris_complete.config import load_settings  # noqa: E402
from celeris_complete.engine.pipeline import Engine  # noqa: E402


def rss_mb() -> float:
    for line in open(f"/proc/{os.getpid()}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    quant = sys.argv[1] if len(sys.argv) > 1 else "auto"
    places = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    engine = Engine(load_settings({"quant": quant}, environ={}, user_file=Path("/nonexistent")))
    print(f"quant {engine.quant}: after load {rss_mb():.0f} MB", flush=True)
    started = time.time()
    for i, (text, at, mode) in enumerate(sample_cursors(places, seed=5), 1):
        for k in range(3):
            engine.complete(InfillRequest(text[: at + k], text[at:], mode=mode))
        if i % 50 == 0:
            print(f"{i} places, {3 * i} completions: {rss_mb():.0f} MB ({time.time() - started:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
