"""Where the language server's p95 goes with drafts on and off: the same typing, alternated, every
keystroke's latency with the server's own timings for it (``bench lsp``'s workload and trace).

    .venv/bin/python scripts/measure_drafts_latency.py --pairs 3 --seconds 30 --out results/issue14/p95
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from celeris_complete.bench import lsp as bench_lsp
from celeris_complete.bench.selftest import percentile


def summary(trace: list[dict]) -> dict:
    ms = [t["ms"] for t in trace]
    model = [t for t in trace if t["timings"] and t["timings"].get("source") == "model"]
    cut = percentile(ms, 95)
    slow = [t for t in trace if t["ms"] >= cut]
    slow_model = [t for t in slow if t in model]

    def mean(values):
        return round(statistics.fmean(values), 2) if values else None

    def engine(rows, key):
        return mean([t["timings"]["engine_ms"][key] for t in rows])

    out = {
        "keystrokes": len(trace),
        "p50": round(percentile(ms, 50), 2),
        "p95": round(cut, 2),
        "model_calls": len(model),
        "slowest_5pct": len(slow),
        "slowest_5pct_model_calls": len(slow_model),
    }
    for name, rows in (("all_model_calls", model), ("slowest_model_calls", slow_model)):
        out[name] = {
            "client_ms": mean([t["ms"] for t in rows]),
            "server_total_ms": mean([t["timings"]["total_ms"] for t in rows]),
            "engine_total_ms": engine(rows, "total"),
            "encode_ms": engine(rows, "context_encode"),
            "refine_ms": engine(rows, "refine"),
            "draft_ms": engine(rows, "draft"),
            "steps": mean([t["timings"]["steps"] for t in rows]),
            "with_draft": mean([bool(t["timings"].get("draft")) for t in rows]),
            "draft_kept_all": mean([
                bool(d) and d["kept"] == d["tokens"] for d in (t["timings"].get("draft") for t in rows)
            ]),
            "cache": {c: sum(t["timings"]["cache"] == c for t in rows) for c in ("hit", "partial", "miss")},
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--model", default="models/default")
    parser.add_argument("--out", type=Path, default=Path("results/issue14/p95"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for pair in range(args.pairs):
        for drafts in ((True, False) if pair % 2 == 0 else (False, True)):
            trace: list[dict] = []
            bench_lsp.run(args.model, args.seconds, init_options={"drafts": drafts}, trace=trace)
            (args.out / f"trace-{pair}-{'on' if drafts else 'off'}.json").write_text(json.dumps(trace))
            row = {"pair": pair, "drafts": drafts, **summary(trace)}
            results.append(row)
            print(json.dumps(row), flush=True)
    (args.out / "summary.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
