"""Two runs of one benchmark on the same sites, compared site by site.

Reads the full JSON that ``bench repo --output`` or ``bench quality --output`` writes. Reports each
run's exact match and edit similarity (and pass@1 for HumanEval-Infilling), how many answers are the
same text, the sites right in one run only, and the mean edit-similarity difference (B minus A) with
a 95% paired bootstrap interval. For comparing models, or one model before and after a change to the
code: run both with the same ``--seed`` and ``--sites`` (or the same ``--set`` and ``--limit``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from celeris_complete.bench.adapt import paired_interval
from celeris_complete.errors import CelerisError


def load_run(path: Path) -> tuple[str, list[dict]]:
    """The benchmark a run file comes from (``repo`` or ``quality``) and its sites in order."""

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CelerisError(f"{path}: not a benchmark run ({exc})") from exc
    if isinstance(data, dict) and isinstance(data.get("packages"), dict):
        rows = [row for package in data["packages"].values() for row in package.get("results", [])]
        kind = "repo"
    elif isinstance(data, dict) and isinstance(data.get("results"), list):
        rows, kind = data["results"], "quality"
    else:
        raise CelerisError(f"{path}: neither a `bench repo` nor a `bench quality` --output file")
    if not rows:
        raise CelerisError(f"{path}: holds no per-site results (a summary only?)")
    return kind, rows


def site_key(row: Mapping, kind: str) -> tuple:
    return (row["file"], row["line"], row["col"]) if kind == "repo" else (row["task_id"],)


def answer_of(row: Mapping, kind: str) -> str:
    text = row.get("answer", row.get("got")) if kind == "repo" else row.get("completion")
    return text or ""


def compare(kind: str, a: Sequence[Mapping], b: Sequence[Mapping]) -> dict:
    """The site-by-site comparison of two runs of the same benchmark on the same sites."""

    if [site_key(r, kind) for r in a] != [site_key(r, kind) for r in b]:
        raise CelerisError(
            "the runs are not on the same sites (the same --seed and --sites, or --set and --limit, "
            "and the same package versions?)"
        )
    n = len(a)

    def figures(rows: Sequence[Mapping]) -> dict:
        out = {
            "exact_match": round(sum(bool(r["exact"]) for r in rows) / n, 4),
            "edit_similarity": round(sum(r["similarity"] for r in rows) / n, 4),
        }
        if kind == "quality":
            out["pass@1"] = round(sum(bool(r["passed"]) for r in rows) / n, 4)
        return out

    differ = [i for i, (r, s) in enumerate(zip(a, b)) if answer_of(r, kind) != answer_of(s, kind)]
    report = {
        "benchmark": kind,
        "sites": n,
        "a": figures(a),
        "b": figures(b),
        "identical_answers": n - len(differ),
        "first_differences": [
            {"site": list(site_key(a[i], kind)), "a": answer_of(a[i], kind), "b": answer_of(b[i], kind)}
            for i in differ[:5]
        ],
        "exact_only_a": sum(bool(r["exact"]) and not s["exact"] for r, s in zip(a, b)),
        "exact_only_b": sum(bool(s["exact"]) and not r["exact"] for r, s in zip(a, b)),
        "edit_similarity_lift": round(sum(s["similarity"] - r["similarity"] for r, s in zip(a, b)) / n, 4),
        "edit_similarity_lift_95": paired_interval(a, b),
    }
    if kind == "quality":
        report["passed_only_a"] = sum(bool(r["passed"]) and not s["passed"] for r, s in zip(a, b))
        report["passed_only_b"] = sum(bool(s["passed"]) and not r["passed"] for r, s in zip(a, b))
    return report


def compare_files(path_a: Path, path_b: Path) -> dict:
    kind_a, a = load_run(path_a)
    kind_b, b = load_run(path_b)
    if kind_a != kind_b:
        raise CelerisError(f"{path_a} is a `bench {kind_a}` run and {path_b} a `bench {kind_b}` run")
    return compare(kind_a, a, b)


def render(report: Mapping) -> str:
    lines = []
    for name in ("a", "b"):
        fig = report[name]
        passed = f", pass@1 {fig['pass@1']:.2%}" if "pass@1" in fig else ""
        lines.append(
            f"{name.upper()}: {report['sites']} sites, exact {fig['exact_match']:.1%}, "
            f"edit similarity {fig['edit_similarity']:.4f}{passed}"
        )
    lines.append(f"identical answers: {report['identical_answers']} of {report['sites']}")
    for diff in report["first_differences"]:
        lines.append(f"  differs at {diff['site']}: A {diff['a']!r}, B {diff['b']!r}")
    lines.append(f"exact only in A: {report['exact_only_a']}, only in B: {report['exact_only_b']}")
    if "passed_only_a" in report:
        lines.append(f"passed only in A: {report['passed_only_a']}, only in B: {report['passed_only_b']}")
    low, high = report["edit_similarity_lift_95"]
    lines.append(
        f"edit similarity B - A: {report['edit_similarity_lift']:+.4f}, "
        f"95% paired bootstrap interval [{low:+.4f}, {high:+.4f}]"
    )
    return "\n".join(lines)
