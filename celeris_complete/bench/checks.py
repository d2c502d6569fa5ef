"""The answer checks themselves: how often they blame a right line, what they let through, what they cost.

``precision``: every sampled line of real Python files is given as the answer at its own place (the
cursor after its indentation, the rest of the file around it) and must not be blamed; the same line
broken (an unclosed bracket appended) must be, unless it lies inside a string (a docstring's line),
where any text is right, so the broken lines let through say how much a change to the checks gives
away.  ``verdict_times``: the check's share of real completions (``timings_ms["syntax"]``) per verdict,
on selftest's places typed four characters on, as keystrokes (no samples) and as invoked requests.
"""

from __future__ import annotations

import random
import statistics
import sysconfig
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from celeris_complete.bench.selftest import sample_cursors
from celeris_complete.checks.syntax import BLAMED, judge
from celeris_complete.checks.window import window
from celeris_complete.engine import Engine, InfillRequest

MAX_FILE_CHARS = 300_000  # larger files are skipped: the check only ever sees a window of one


def default_roots() -> list[Path]:
    """This Python's standard library (its tests are left out by ``python_sources``)."""
    return [Path(sysconfig.get_paths()["stdlib"])]


def python_sources(roots: Sequence[Path]) -> list[Path]:
    """The ``.py`` files under ``roots``, tests and installed packages left out, sorted."""
    return sorted(
        p for r in roots for p in Path(r).rglob("*.py") if "test" not in p.parts and "site-packages" not in p.parts
    )


def precision(roots: Sequence[Path], files: int = 300, lines: int = 15, seed: int = 0) -> dict:
    """Right lines blamed and broken lines let through, over ``lines`` sampled lines in each of ``files``
    files chosen by ``seed``; the time per judgement (window and verdict)."""
    rng = random.Random(seed)
    paths = python_sources(roots)
    rng.shuffle(paths)
    blamed: list[str] = []
    judged = let_through = 0
    seconds = 0.0
    for path in paths[:files]:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if len(text) > MAX_FILE_CHARS:
            continue
        rows = text.split("\n")
        starts = [0]
        for row in rows:
            starts.append(starts[-1] + len(row) + 1)
        for k in rng.sample(range(len(rows)), min(lines, len(rows))):
            line = rows[k]
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
            let_through += judge(win, line[indent:] + " (") != BLAMED
    return {
        "lines_judged": judged,
        "right_lines_blamed": len(blamed),
        "right_lines_blamed_share": round(len(blamed) / max(judged, 1), 4),
        "broken_lines_let_through": let_through,
        "broken_lines_let_through_share": round(let_through / max(judged, 1), 4),
        "ms_per_judgement": round(seconds / max(judged, 1) * 1e3, 3),
        "blamed": blamed,
    }


def verdict_times(engine: Engine, requests: int = 24) -> dict:
    """Per setting (keystrokes: no samples; invoked: samples allowed) and verdict: how many answers got
    it and the check's median and largest time in ms."""
    out = {}
    for label, samples in (("keystrokes", False), ("invoked", True)):
        spent: dict[str, list[float]] = defaultdict(list)
        for text, at, mode in sample_cursors(requests):
            line_end = text.find("\n", at)
            line_end = len(text) if line_end < 0 else line_end
            engine.cache.clear()
            for k in range(5):
                request = InfillRequest(
                    text[: min(line_end, at + k)], text[line_end:], mode=mode, language="python",
                    repair_samples=samples,
                )  # fmt: skip
                done = engine.complete(request)
                spent[done.syntax].append(done.timings_ms["syntax"])
        out[label] = {
            verdict: {"answers": len(ms), "median_ms": round(statistics.median(ms), 3), "max_ms": round(max(ms), 3)}
            for verdict, ms in sorted(spent.items())
        }
    return out


def render(result: dict) -> str:
    lines = []
    p = result.get("precision")
    if p:
        lines.append(
            f"lines judged {p['lines_judged']}: right lines blamed {p['right_lines_blamed']} "
            f"({p['right_lines_blamed_share']:.2%}), broken lines let through {p['broken_lines_let_through']} "
            f"({p['broken_lines_let_through_share']:.2%}), {p['ms_per_judgement']:.3f} ms per judgement"
        )
        lines += [f"  blamed: {b}" for b in p["blamed"]]
    for label, verdicts in result.get("verdict_times", {}).items():
        lines.append(f"{label}:")
        for verdict, f in verdicts.items():
            lines.append(
                f"  {verdict:10} answers {f['answers']:4}  median {f['median_ms']:7.3f} ms  max {f['max_ms']:7.3f} ms"
            )
    return "\n".join(lines)
