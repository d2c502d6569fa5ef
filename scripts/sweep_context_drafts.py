"""The line-start ``context`` drafts alone, offline, at every line start of `bench repo` runs (their
sites, not their answers): how many drafts and how many exact for several ``MIN_CONTEXT`` thresholds
and search windows. Chooses the thresholds on sites other than the reported ones (seed 0).

    .venv/bin/python scripts/sweep_context_drafts.py results/drafts_repo/seed1-before.json \
        results/drafts_repo/seed2-line-end-only.json
"""

from __future__ import annotations

import json
import sys

from celeris_complete.bench.repo import PACKAGES, fetch_package, python_files
from celeris_complete.drafts import search as drafts


def line_starts(paths: list[str]) -> list[tuple[str, str, str, str]]:
    """(text above the cursor's line, text below it, the indentation, the expected line) per site."""
    out = []
    for path in paths:
        data = json.loads(open(path, encoding="utf-8").read())
        for name, package in data["packages"].items():
            files = python_files(fetch_package(name, dict(PACKAGES)[name]))
            for r in package["results"]:
                if r["kind"] == "indent":
                    lines = files[r["file"]].split("\n")
                    above, below = "\n".join(lines[: r["line"]]), "\n".join(lines[r["line"] + 1 :])
                    out.append((above, below, lines[r["line"]][: r["col"]], r["expected"]))
    return out


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    sites = line_starts(sys.argv[1:])
    for window in (8_000, 20_000):
        for threshold in (1.0, 1.2, 1.4):
            drafts.CONTEXT_WINDOW, drafts.MIN_CONTEXT = window, threshold
            found = [((drafts._between(a, b, indent) or [None])[0], expected) for a, b, indent, expected in sites]
            offered = [(d, e) for d, e in found if d is not None]
            exact = sum(d == e for d, e in offered)
            n = len(sites)
            print(f"window {window}, MIN_CONTEXT {threshold}: {len(offered)} drafts, {exact} exact ({n} line starts)")


if __name__ == "__main__":
    main()
