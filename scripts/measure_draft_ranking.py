"""How often the first draft is the line's rest, with continuations ranked by the lines around their
copies (``drafts._ranked``) or by votes alone (as before 2026-12-02), on `bench repo`'s sites (the same
packages, files under test and workspace as the benchmark, drafts only, no model): top-1, and how
often the right one is among the first 2, 3 and 5 drafts (what an invoked request can offer).
With ``--timing``: what the ranking costs a call of ``find_drafts``, at random places in cli.py and in
20 copies of it (1 MB), and at lines with thousands of continuations in those 20 copies.

    .venv/bin/python scripts/measure_draft_ranking.py --seeds 0,1,2,3,4,5,6,7
    .venv/bin/python scripts/measure_draft_ranking.py --timing
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from celeris_complete.bench.repo import PACKAGES, choose_sites, fetch_package, python_files  # noqa: E402
from celeris_complete.drafts import search as drafts  # noqa: E402


def by_votes(votes, *_args) -> list[str]:
    return [text for text, _ in votes.most_common()]


def places(text: str, n: int, at_start: bool, rng: random.Random) -> list[tuple[str, str]]:
    lines, out = text.split("\n"), []
    while len(out) < n:
        i = rng.randrange(len(lines))
        line = lines[i]
        if line.strip():
            indent = len(line) - len(line.lstrip())
            col = indent if at_start else rng.randrange(indent, len(line) + 1)
            out.append(("\n".join(lines[:i] + [line[:col]]), line[col:] + "\n" + "\n".join(lines[i + 1 :])))
    return out


def timing() -> None:
    root = Path(__file__).resolve().parent.parent / "celeris_complete"
    table = drafts.LineTable()
    for path in sorted(root.glob("*.py")):
        table.set_file(str(path), path.read_text(encoding="utf-8"))
    doc = (root / "cli.py").read_text(encoding="utf-8")
    big, rng = doc * 20, random.Random(0)
    middle = big.split("\n")[: len(big.split("\n")) // 2]
    cases = {
        "cli.py, line starts": places(doc, 200, True, rng),
        "cli.py, mid-line": places(doc, 200, False, rng),
        "cli.py x20, line starts": places(big, 100, True, rng),
        "cli.py x20, mid-line": places(big, 100, False, rng),
    }
    for key in ("typer.", "if ", "return "):  # thousands of lines start so in the 20 copies
        prefix = "\n".join(middle + ["    " + key])
        cases[f"cli.py x20, '{key}' typed"] = [(prefix, "\n" + big[len(prefix) - len(key) - 4 :])]
    ranked = drafts._ranked
    for name, calls in cases.items():
        figures = {}
        for label, rank in (("by votes", by_votes), ("ranked", ranked)) * 2:  # the second round is reported
            drafts._ranked = rank
            times = []
            for prefix, suffix in calls:
                t = time.perf_counter()
                drafts.find_drafts(prefix, suffix, table, "x", 1)
                times.append((time.perf_counter() - t) * 1e3)
            times.sort()
            p95 = times[int(len(times) * 0.95)]
            figures[label] = f"mean {sum(times) / len(times):.2f} ms, p95 {p95:.2f}, max {times[-1]:.2f}"
        drafts._ranked = ranked
        print(f"{name} ({len(calls)} calls): by votes {figures['by votes']}; ranked {figures['ranked']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2,3,4,5,6,7")
    parser.add_argument("--sites", type=int, default=100)
    parser.add_argument("--timing", action="store_true")
    args = parser.parse_args()
    if args.timing:
        timing()
        return
    ranked = drafts._ranked
    counts: Counter = Counter()
    for seed in (int(s) for s in args.seeds.split(",")):
        row: Counter = Counter()
        for name, version in PACKAGES:
            files = python_files(fetch_package(name, version))
            sites = choose_sites(files, args.sites, 4, f"{name}:{seed}")  # as bench repo chooses them
            under_test = {s.file for s in sites}
            table = drafts.LineTable()
            for path, text in files.items():
                if path not in under_test:
                    table.set_file(path, text)
            for s in sites:
                lines = files[s.file].split("\n")
                prefix = "\n".join(lines[: s.line] + [lines[s.line][: s.col]])
                suffix = "\n" + "\n".join(lines[s.line + 1 :])  # the line's rest removed, as bench repo does
                row["sites"] += 1
                for label, rank in (("votes", by_votes), ("ranked", ranked)):
                    drafts._ranked = rank
                    found = [d.text for d in drafts.find_drafts(prefix, suffix, table, s.file, 5)]
                    for k in (1, 2, 3, 5):
                        row[(label, k)] += s.expected in found[:k]
                    row[(label, 1, s.kind)] += s.expected in found[:1]
                drafts._ranked = ranked
        votes, ranked_right = row[("votes", 1)], row[("ranked", 1)]
        print(f"seed {seed}: {row['sites']} sites, first draft right: by votes {votes}, ranked {ranked_right}")
        counts.update(row)
    n = counts["sites"]
    print(f"\nall seeds, {n} sites: right draft among the first k")
    print("| ranking | k=1 | after indentation / mid-line (k=1) | k=2 | k=3 | k=5 |")
    print("|---|---|---|---|---|---|")
    for label in ("votes", "ranked"):
        kinds = " / ".join(str(counts[(label, 1, kind)]) for kind in ("indent", "mid"))
        ks = " | ".join(f"{counts[(label, k)]} ({counts[(label, k)] / n:.1%})" for k in (1, 2, 3, 5))
        first, rest = ks.split(" | ", 1)
        print(f"| {label} | {first} | {kinds} | {rest} |")


if __name__ == "__main__":
    main()
