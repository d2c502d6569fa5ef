"""The latency/quality dial: held-out exact match and keystroke latency at each number of steps."""

from __future__ import annotations

from pathlib import Path

from celeris_complete.bench.engine import validation_exact_match
from celeris_complete.bench.selftest import one_token_per_step, run_selftest, sample_cursors
from celeris_complete.engine import Engine


def sweep(engine: Engine, steps_list: list[int], samples: int, requests: int) -> list[dict]:
    base = engine.settings
    rows = []
    cursors = sample_cursors(max(4, requests // 2), seed=7)
    for steps in steps_list:
        engine.use_settings(base.with_overrides({"steps": steps}, "dial"))
        quality = validation_exact_match(engine, samples)
        speed = run_selftest(engine, base.budget_ms, requests=requests, keystrokes=2, long_requests=0)
        equal = one_token_per_step(engine, cursors, steps)
        rows.append(
            {
                "steps": steps,
                "exact_match": quality["exact_match"],
                "empty_rate": quality["empty_rate"],
                "keystroke_p50_ms": speed["keystroke_ms"]["p50"],
                "keystroke_p95_ms": speed["keystroke_ms"]["p95"],
                "new_place_p50_ms": speed["cache_miss_ms"]["p50"],
                "speedup_vs_one_token_per_step": equal["speedup"],
                "equal_length_tokens": [equal["parallel_tokens"], equal["sequential_tokens"]],
            }
        )
    engine.use_settings(base)
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| steps | exact match | empty | keystroke p50 / p95 ms | new place p50 ms | speedup vs 1 token/step |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['steps']} | {r['exact_match']:.3f} | {r['empty_rate']:.3f} | "
            f"{r['keystroke_p50_ms']:.1f} / {r['keystroke_p95_ms']:.1f} | {r['new_place_p50_ms']:.1f} | "
            f"{r['speedup_vs_one_token_per_step']}x |"
        )
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [r["keystroke_p50_ms"] for r in rows]
    ys = [r["exact_match"] for r in rows]
    ax.plot(xs, ys, marker="o")
    for r, x, y in zip(rows, xs, ys):
        ax.annotate(f"{r['steps']} steps", (x, y), textcoords="offset points", xytext=(5, 5))
    ax.set_xlabel("keystroke latency p50 (ms)")
    ax.set_ylabel("held-out exact match")
    ax.set_title("celeris-complete: the steps dial")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
