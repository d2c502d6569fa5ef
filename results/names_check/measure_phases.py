"""Engine.complete's phase timings (medians and means, ms) while typing into cli.py at 240 places.

    .venv/bin/python results/names_check/measure_phases.py
"""

import random
import statistics
from pathlib import Path

from celeris_complete.config import load_settings
from celeris_complete.engine import Engine, InfillRequest

engine = Engine(load_settings({"threads": 1}))
text = (Path(__file__).resolve().parents[2] / "celeris_complete" / "cli.py").read_text()
lines = text.split("\n")
phases: dict[str, list[float]] = {}
rng = random.Random(0)
for _ in range(40):
    n = rng.randrange(100, len(lines) - 10)
    line = lines[n]
    if len(line.strip()) < 10:
        continue
    offset = sum(len(ln) + 1 for ln in lines[:n])
    indent = len(line) - len(line.lstrip())
    for k in range(indent + 2, min(len(line), indent + 14), 2):
        done = engine.complete(InfillRequest(text[: offset + k], text[offset + len(line) :], language="cli.py"))
        for key in ("draft", "syntax", "total", "refine"):
            phases.setdefault(key, []).append(done.timings_ms[key])
print({k: (round(statistics.median(v), 3), round(statistics.mean(v), 3)) for k, v in phases.items()})
