"""Which `bench repo` answers were exact because their draft was right: every site's draft computed
again offline (the same document and workspace as the benchmark's server had: the package without its
files under test), counted by kind, draft source, draft right or wrong, answer exact or not; then
where the right line ranks among the first 20 drafts (the most a perfect choice among drafts could
find).

    .venv/bin/python scripts/drafts_vs_exact.py results/drafts_repo/seed1-after.json
"""

from __future__ import annotations

import json
import sys
from collections import Counter

from celeris_complete.bench.repo import PACKAGES, fetch_package, python_files
from celeris_complete.drafts.search import find_drafts
from celeris_complete.drafts.table import LineTable


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    data = json.loads(open(sys.argv[1], encoding="utf-8").read())
    counts: Counter[tuple] = Counter()
    ranks: Counter[tuple] = Counter()
    for name, package in data["packages"].items():
        files = python_files(fetch_package(name, dict(PACKAGES)[name]))
        table = LineTable()
        for path, text in files.items():
            if path not in package["files_under_test"]:
                table.set_file(path, text)
        for r in package["results"]:
            lines = files[r["file"]].split("\n")
            line = lines[r["line"]]
            prefix = "\n".join(lines[: r["line"]] + [line[: r["col"]]])
            suffix = "\n" + "\n".join(lines[r["line"] + 1 :])  # the site's line without its rest, as the bench
            found = find_drafts(prefix, suffix, table, r["file"], 20)
            texts = [d.text for d in found]
            rank = texts.index(r["expected"]) if r["expected"] in texts else None
            ranks[(r["kind"], "none of 20" if rank is None else str(rank + 1) if rank < 5 else "6-20")] += 1
            right = rank == 0
            source = found[0].source if found else "no draft"
            verdict = "draft right" if right else "draft wrong"
            counts[(r["kind"], source, verdict, "exact" if r["exact"] else "not")] += 1
    for key, n in sorted(counts.items()):
        print(" / ".join(key), n)
    print("\nthe right line's rank among the drafts:")
    for key, n in sorted(ranks.items()):
        print(" / ".join(key), n)


if __name__ == "__main__":
    main()
