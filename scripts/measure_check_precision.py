"""How often the compiler's and the names check blame a right answer: every sampled line of real
files, given as the answer at its own place (the cursor after its indentation, the rest of the file
around it), must not be blamed. Prints the lines sampled, those blamed (with where), and the time
per judgement. The other side: the same line broken (an unclosed bracket appended) must be blamed,
unless it lies inside a string (a docstring's line), where any text is right; the count of broken
lines let through says how much a change to the checks gives away.

    .venv/bin/python scripts/measure_check_precision.py [--files 300] [--lines 15] [ROOT ...]

ROOT: directories of Python files (default: the standard library, its tests left out).
"""

from __future__ import annotations

import argparse
import random
import sysconfig
import time
from pathlib import Path

from celeris_complete.checks.syntax import BLAMED, judge
from celeris_complete.checks.window import window


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("roots", nargs="*", type=Path)
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--lines", type=int, default=15)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    roots = args.roots or [Path(sysconfig.get_paths()["stdlib"])]
    rng = random.Random(args.seed)
    files = sorted(
        p for r in roots for p in r.rglob("*.py") if "test" not in p.parts and "site-packages" not in p.parts
    )
    rng.shuffle(files)
    blamed, judged, passed, seconds = [], 0, 0, 0.0
    for path in files[: args.files]:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if len(text) > 300_000:
            continue
        lines = text.split("\n")
        starts = [0]
        for ln in lines:
            starts.append(starts[-1] + len(ln) + 1)
        for k in rng.sample(range(len(lines)), min(args.lines, len(lines))):
            line = lines[k]
            if not line.strip() or line.strip().startswith("#"):
                continue
            indent = len(line) - len(line.lstrip())
            t0 = time.perf_counter()
            win = window(text[: starts[k] + indent], text[starts[k] + len(line) :])
            verdict = judge(win, line[indent:])
            seconds += time.perf_counter() - t0
            judged += 1
            if verdict == BLAMED:
                blamed.append(f"{path}:{k + 1}: {line.strip()[:80]}")
            passed += judge(win, line[indent:] + " (") != BLAMED
    print(
        f"lines judged {judged}, blamed {len(blamed)} ({len(blamed) / max(judged, 1):.2%}), "
        f"{seconds / max(judged, 1) * 1e3:.3f} ms per judgement (window and verdict); "
        f"broken lines not blamed {passed} ({passed / max(judged, 1):.2%})"
    )
    for b in blamed:
        print(b)


if __name__ == "__main__":
    main()
