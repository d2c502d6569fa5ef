"""Choose decoding defaults by HumanEval single-line pass@1 inside the latency budget.

A coordinate sweep: starting from the current settings, each knob in turn
(steps, threshold, canvas length, prefix context budget) is varied alone
around the best point so far, and the best point measured wins.  Every point is
a full ``bench quality`` run (pass@1 by execution, edit similarity, empty
rate) plus a separate latency run (``selftest``'s requests: keystrokes with
the context cached, and new places with nothing cached).  Inside the budget
means: keystroke p50 within ``keystroke_p50_ms`` (the engine's 25 ms target)
and keystroke and new-place p95 within ``budget_ms``.  Latency is measured
apart from the quality run so that executing candidate programs does not
disturb it.  Greedy decoding is deterministic, so ``reuse`` may supply the
quality figures of points measured before; latency is always measured anew.
"""

from __future__ import annotations

import math

from celeris_complete.bench.quality import evaluate, load_tasks
from celeris_complete.bench.selftest import run_selftest
from celeris_complete.engine import Engine

GRID: dict[str, list] = {
    "steps": [1, 2, 3, 4, 6, 8],
    "threshold": [0.7, 0.9, 1.0],
    "canvas_line": [16, 24, 32],
    "prefix_tokens": [192, 256, 320, 512],
}


QUALITY = ("pass@1", "pass@1_stderr", "passed", "passed_empty", "edit_similarity", "exact_match", "empty_rate", "tasks")


def measure(
    engine: Engine, point: dict, limit: int | None, workers: int, requests: int, known: dict | None = None
) -> dict:
    engine.use_settings(engine.settings.with_overrides(point, "bench tune"))
    if known is None:
        result = evaluate(engine, "single", limit, workers)
        n = result["tasks"]
        p = result["pass@1"]
        known = {
            "pass@1": p,
            "pass@1_stderr": round(math.sqrt(max(p * (1 - p), 1e-9) / max(1, n)), 4),
            "passed": sum(r["passed"] for r in result["results"]),
            "passed_empty": sum(r["passed"] and r["empty"] for r in result["results"]),
            "edit_similarity": result["edit_similarity"],
            "exact_match": result["exact_match"],
            "empty_rate": result["empty_rate"],
            "tasks": n,
        }
    speed = run_selftest(engine, engine.settings.budget_ms, requests=requests, keystrokes=2, long_requests=0)
    return {
        **point,
        **{k: known.get(k) for k in QUALITY},
        "keystroke_ms_p50": speed["keystroke_ms"]["p50"],
        "keystroke_ms_p95": speed["keystroke_ms"]["p95"],
        "new_place_ms_p50": speed["cache_miss_ms"]["p50"],
        "latency_ms_p95": max(speed["keystroke_ms"]["p95"], speed["cache_miss_ms"]["p95"]),
    }


def inside(row: dict, budget_ms: float, keystroke_p50_ms: float) -> bool:
    return row["latency_ms_p95"] <= budget_ms and row["keystroke_ms_p50"] <= keystroke_p50_ms


def better(a: dict, b: dict | None, budget_ms: float, keystroke_p50_ms: float = float("inf")) -> bool:
    """Whether ``a`` beats ``b``: inside the budget first, then pass@1, then edit similarity."""
    if b is None:
        return True
    inside_a, inside_b = inside(a, budget_ms, keystroke_p50_ms), inside(b, budget_ms, keystroke_p50_ms)
    if inside_a != inside_b:
        return inside_a
    return (a["passed"], a["edit_similarity"]) > (b["passed"], b["edit_similarity"])


def sweep(
    engine: Engine,
    limit: int | None = None,
    workers: int = 2,
    budget_ms: float | None = None,
    progress=print,
    requests: int = 16,
    keystroke_p50_ms: float = 25.0,
    reuse: list[dict] | None = None,
) -> dict:
    budget = budget_ms or engine.settings.budget_ms
    known = {tuple(r[k] for k in GRID): r for r in reuse or [] if r.get("tasks")}
    tasks = len(load_tasks("single", limit))
    base = {k: engine.settings.values[k] for k in GRID}
    seen: dict[tuple, dict] = {}

    def run(point: dict) -> dict:
        key = tuple(point[k] for k in GRID)
        if key not in seen:
            old = known.get(key)
            if old is not None and old["tasks"] != tasks:
                old = None  # measured on another subset
            seen[key] = measure(engine, point, limit, workers, requests, old)
            row = seen[key]
            progress(
                " ".join(f"{k}={point[k]}" for k in GRID)
                + f"  pass@1={row['pass@1']:.4f} ({row['passed']})  edit={row['edit_similarity']:.3f}"
                + f"  empty={row['empty_rate']:.3f}"
                + f"  keystroke p50/p95={row['keystroke_ms_p50']}/{row['keystroke_ms_p95']} ms"
                + f"  new place p50/p95={row['new_place_ms_p50']}/{row['latency_ms_p95']} ms"
            )
        return seen[key]

    start = run(base)
    current = dict(base)
    for knob, values in GRID.items():  # coordinate descent: each knob swept around the best point so far
        best = None
        for value in values:
            row = run({**current, knob: value})
            if better(row, best, budget, keystroke_p50_ms):
                best = row
        current[knob] = best[knob]
    run(current)
    winner = None
    for row in seen.values():  # the best point measured, wherever the sweep found it
        if better(row, winner, budget, keystroke_p50_ms):
            winner = row
    return {
        "budget_ms": budget,
        "keystroke_p50_ms": keystroke_p50_ms,
        "start": start,
        "chosen": {k: winner[k] for k in GRID},
        "inside_budget": inside(winner, budget, keystroke_p50_ms),
        "result": winner,
        "rows": list(seen.values()),
    }


def table(rows: list[dict]) -> str:
    head = (
        "| steps | threshold | canvas | prefix tokens | pass@1 (passed) | edit sim | empty "
        "| keystroke p50 / p95 ms | new place p50 / p95 ms |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['steps']} | {r['threshold']} | {r['canvas_line']} | {r['prefix_tokens']} | "
            f"{r['pass@1']:.4f} ({r['passed']}) | {r['edit_similarity']:.3f} | {r['empty_rate']:.3f} | "
            f"{r['keystroke_ms_p50']} / {r['keystroke_ms_p95']} | {r['new_place_ms_p50']} / {r['latency_ms_p95']} |"
        )
    return "\n".join(lines)
