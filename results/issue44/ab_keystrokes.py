"""Keystroke and new-place latency of the engine on fixed places in six standard-library files (the
same places whatever the package holds), for a before/after comparison: run it alternately from two
checkouts, ``cd DIR && PYTHONPATH=DIR .venv/bin/python results/issue44/ab_keystrokes.py``."""

import random
import statistics
import sys
import sysconfig
from pathlib import Path

import celeris_complete  # which checkout runs (PYTHONPATH)
from celeris_complete.config import load_settings
from celeris_complete.engine import Engine, InfillRequest

FILES = ("argparse.py", "textwrap.py", "shlex.py", "csv.py", "glob.py", "json/decoder.py")


def p95(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.95)]


def main() -> None:
    print(celeris_complete.__file__, file=sys.stderr)
    engine = Engine(load_settings({}))
    root = Path(sysconfig.get_paths()["stdlib"])
    rng = random.Random(0)
    places = []
    for name in FILES:
        text = (root / name).read_text()
        lines = text.split("\n")
        for _ in range(8):
            i = rng.randrange(20, len(lines) - 20)
            if lines[i].strip():
                indent = len(lines[i]) - len(lines[i].lstrip())
                places.append((text, sum(len(x) + 1 for x in lines[:i]) + indent))
    keys, new = [], []
    for _round in range(2):
        for text, at in places:
            engine.cache.clear()
            line_end = text.find("\n", at)
            for k in range(5):  # a new place, then four keystrokes
                request = InfillRequest(
                    text[: min(line_end, at + k)], text[line_end:], language="python", repair_samples=False
                )
                (new if k == 0 else keys).append(engine.complete(request).timings_ms["total"])
    print(
        f"keystroke p50 {statistics.median(keys):.2f} ms, p95 {p95(keys):.2f}; new place p50 "
        f"{statistics.median(new):.2f}, p95 {p95(new):.2f} ({len(keys)} keystrokes)"
    )


if __name__ == "__main__":
    main()
