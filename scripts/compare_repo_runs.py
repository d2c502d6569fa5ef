"""Two `bench repo --output` runs on the same sites, compared site by site: exact match and edit
similarity of each, the difference, and a 95% paired bootstrap interval of the edit-similarity
difference (B minus A). For comparing models: run both with the same --seed and --sites.

    .venv/bin/python scripts/compare_repo_runs.py A.json B.json
"""

from __future__ import annotations

import json
import sys

from celeris_complete.bench.adapt import paired_interval


def sites(path: str) -> list[dict]:
    data = json.loads(open(path, encoding="utf-8").read())
    return [r for package in data["packages"].values() for r in package["results"]]


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    a, b = sites(sys.argv[1]), sites(sys.argv[2])
    if [(r["file"], r["line"], r["col"]) for r in a] != [(r["file"], r["line"], r["col"]) for r in b]:
        raise SystemExit("the runs are not on the same sites (same --seed, --sites and package versions?)")
    n = len(a)
    for name, rows in (("A", a), ("B", b)):
        exact = sum(r["exact"] for r in rows) / n
        similarity = sum(r["similarity"] for r in rows) / n
        print(f"{name}: {n} sites, exact {exact:.1%}, edit similarity {similarity:.4f}")
    only_a = sum(r["exact"] and not s["exact"] for r, s in zip(a, b))
    only_b = sum(s["exact"] and not r["exact"] for r, s in zip(a, b))
    lift = sum(s["similarity"] - r["similarity"] for r, s in zip(a, b)) / n
    low, high = paired_interval(a, b)
    print(f"exact only in A: {only_a}, only in B: {only_b}")
    print(f"edit similarity B - A: {lift:+.4f}, 95% paired bootstrap interval [{low:+.4f}, {high:+.4f}]")


if __name__ == "__main__":
    main()
