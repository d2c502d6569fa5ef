"""Which `bench repo` answers were exact because their draft was right: every site's draft computed
again offline (the same document and workspace as the benchmark's server had: the package without its
files under test), counted by kind, draft source, draft right or wrong, answer exact or not.

    .venv/bin/python scripts/drafts_vs_exact.py results/drafts_repo/seed1-after.json
"""

from __future__ import annotations

import json
import sys
from collections import Counter

from celeris_complete.bench_repo import PACKAGES, fetch_package, python_files
from celeris_complete.drafts import LineTable, find_drafts


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    data = json.loads(open(sys.argv[1], encoding="utf-8").read())
    counts: Counter[tuple] = Counter()
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
            found = find_drafts(prefix, suffix, table, r["file"], 1)
            right = bool(found) and found[0].text == r["expected"]
            source = found[0].source if found else "no draft"
            verdict = "draft right" if right else "draft wrong"
            counts[(r["kind"], source, verdict, "exact" if r["exact"] else "not")] += 1
    for key, n in sorted(counts.items()):
        print(" / ".join(key), n)


if __name__ == "__main__":
    main()
