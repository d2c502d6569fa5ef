"""The selftest's keystrokes, each completed by two engines in turn, one with drafts and one without:
which requests the drafts make slower or faster, and why (refinement steps run, draft kept or not).

    .venv/bin/python scripts/measure_drafts_engine.py --requests 48 --out results/issue14/p95/engine_pairs.json

With --line-end-context both engines draft, one without the drafts from the end of the cursor's line
and from lines between alike lines (``drafts._tails`` and ``_between`` replaced by nothing while it
completes): what those cost and save.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from celeris_complete.bench.selftest import percentile, sample_cursors
from celeris_complete.config import load_settings
from celeris_complete.drafts import search as drafts
from celeris_complete.engine import Engine, InfillRequest


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--keystrokes", type=int, default=4)
    parser.add_argument("--model", default="models/default")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--line-end-context", action="store_true", help="on/off: line-end and context drafts, drafts on in both"
    )
    args = parser.parse_args()
    loose = args.line_end_context
    found = drafts._tails, drafts._between
    engines = {
        d: Engine(load_settings(overrides={"drafts": d or loose, "model": args.model})) for d in (True, False)
    }

    def complete(d: bool, *call, **options):
        drafts._tails, drafts._between = found if d or not loose else (lambda typed: [], lambda *args: [])
        return engines[d].complete(InfillRequest(*call, **options))

    cursors = sample_cursors(args.requests)
    for d in engines:
        for text, at, mode in cursors[:3]:
            complete(d, text[:at], text[at:], mode=mode)
    rows = []
    for n, (text, at, mode) in enumerate(cursors):
        line_end = text.find("\n", at)
        suffix = text[len(text) if line_end < 0 else line_end :]
        for d, engine in engines.items():
            engine.cache.clear()
            complete(d, text[:at], suffix, mode=mode)
        for k in range(1, args.keystrokes + 1):
            prefix = text[: min(len(text) if line_end < 0 else line_end, at + k)]
            row = {"place": n, "k": k, "mode": mode}
            order = (True, False) if (n + k) % 2 == 0 else (False, True)
            for d in order:
                done = complete(d, prefix, suffix, mode=mode)
                t = done.timings_ms
                row["on" if d else "off"] = {
                    "total": t["total"], "refine": t["refine"], "encode": t["context_encode"], "draft": t["draft"],
                    "steps": len(t["steps"]), "step_ms": t["steps"], "text": done.text, "offered": done.draft,
                }
            rows.append(row)
    on = [r["on"]["total"] for r in rows]
    off = [r["off"]["total"] for r in rows]
    print(f"keystrokes {len(rows)}: p50 on {percentile(on, 50):.2f} off {percentile(off, 50):.2f}; "
          f"p95 on {percentile(on, 95):.2f} off {percentile(off, 95):.2f}")
    def kept(r):
        offered = r["on"]["offered"]
        return None if not offered else ("whole" if offered["kept"] == offered["tokens"] else offered["kept"] > 0)

    groups = {
        "no draft offered": [r for r in rows if kept(r) is None],
        "draft kept whole": [r for r in rows if kept(r) == "whole"],
        "draft kept in part": [r for r in rows if kept(r) is True],
        "draft refused": [r for r in rows if kept(r) is False],
    }
    for name, group in groups.items():
        if not group:
            continue
        on, off = (statistics.fmean(r[side]["total"] for r in group) for side in ("on", "off"))
        s_on, s_off = (statistics.fmean(r[side]["steps"] for r in group) for side in ("on", "off"))
        same = sum(r["on"]["text"] == r["off"]["text"] for r in group)
        print(f"{name:>20}: n {len(group):3}  total on/off {on:6.2f} / {off:6.2f} ms  "
              f"steps {s_on:.2f} / {s_off:.2f}  same text {same}")  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps(rows))


if __name__ == "__main__":
    main()
