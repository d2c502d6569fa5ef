"""Drafts alone, no model: how often a continuation found in the workspace is the line's rest, and what
finding them costs.

``right_drafts``: on `bench repo`'s sites (the same packages, files under test and workspace as that
benchmark: the files under test out of the line table, the rest of the site's line removed), how often
the line's rest is the first draft, and among the first 2, 3 and 5 (what an invoked request can offer),
after the indentation and mid-line.  ``search_times``: the time of a ``find_drafts`` call at line starts
and mid-line places of a document, and of the same document repeated twenty times (a large file with
thousands of continuations per line start).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from celeris_complete.bench.repo import choose_sites, site_context
from celeris_complete.bench.selftest import percentile
from celeris_complete.drafts.search import find_drafts
from celeris_complete.drafts.table import LineTable

TOP_K = (1, 2, 3, 5)


def right_drafts(files: Mapping[str, str], sites: int, seed: int | str, max_files: int = 4) -> Counter:
    """Counts for one package's files: ``sites``, ``(k,)`` and ``(k, kind)`` right among the first k."""
    chosen = choose_sites(files, sites, max_files, seed)  # as bench repo chooses them
    under_test = {s.file for s in chosen}
    table = LineTable()
    for path, text in files.items():
        if path not in under_test:
            table.set_file(path, text)
    counts: Counter = Counter()
    for s in chosen:
        prefix, suffix = site_context(files[s.file], s)
        found = [d.text for d in find_drafts(prefix, suffix, table, s.file, max(TOP_K))]
        counts["sites"] += 1
        counts[("sites", s.kind)] += 1
        for k in TOP_K:
            counts[(k,)] += s.expected in found[:k]
            counts[(k, s.kind)] += s.expected in found[:k]
    return counts


def run_right_drafts(
    packages: Iterable[tuple[str, str]],
    fetch: Callable[[str, str], Path],
    python_files: Callable[[Path], dict[str, str]],
    seeds: Iterable[int],
    sites: int = 100,
) -> dict:
    """Per seed and over all seeds: the share of sites whose line's rest is among the first k drafts."""
    files_of = {name: python_files(fetch(name, version)) for name, version in packages}
    total: Counter = Counter()
    per_seed = {}
    for seed in seeds:
        counts: Counter = Counter()
        for name, files in files_of.items():
            counts.update(right_drafts(files, sites, f"{name}:{seed}"))
        per_seed[seed] = shares(counts)
        total.update(counts)
    return {"seeds": per_seed, "overall": shares(total)}


def shares(counts: Counter) -> dict:
    n = counts["sites"]
    out = {"sites": n}
    for k in TOP_K:
        out[f"top{k}"] = counts[(k,)]
        out[f"top{k}_share"] = round(counts[(k,)] / max(n, 1), 4)
    for kind in ("indent", "mid"):
        out[f"top1_{kind}"] = f"{counts[(1, kind)]} of {counts[('sites', kind)]}"
    return out


def places(text: str, n: int, at_start: bool, rng: random.Random) -> list[tuple[str, str]]:
    """``n`` random cursor places in ``text`` on non-blank lines: after the indentation or anywhere."""
    lines, out = text.split("\n"), []
    while len(out) < n:
        i = rng.randrange(len(lines))
        line = lines[i]
        if line.strip():
            indent = len(line) - len(line.lstrip())
            col = indent if at_start else rng.randrange(indent, len(line) + 1)
            out.append(("\n".join(lines[:i] + [line[:col]]), line[col:] + "\n" + "\n".join(lines[i + 1 :])))
    return out


def search_times(document: str, workspace: Mapping[str, str], calls: int = 200, seed: int = 0) -> dict:
    """Milliseconds per ``find_drafts`` call (mean, p95, max) in ``document`` and in twenty copies of it,
    at line starts and mid-line, with ``workspace``'s files in the line table."""
    table = LineTable()
    for path, text in workspace.items():
        table.set_file(path, text)
    rng = random.Random(seed)
    big = document * 20
    cases = {
        "line starts": places(document, calls, True, rng),
        "mid-line": places(document, calls, False, rng),
        "20 copies, line starts": places(big, calls // 2, True, rng),
        "20 copies, mid-line": places(big, calls // 2, False, rng),
    }
    out = {}
    for name, where in cases.items():
        times = []
        for prefix, suffix in where:
            t0 = time.perf_counter()
            find_drafts(prefix, suffix, table, "the document", 1)
            times.append((time.perf_counter() - t0) * 1e3)
        out[name] = {
            "calls": len(times),
            "mean_ms": round(sum(times) / len(times), 3),
            "p95_ms": round(percentile(times, 95), 3),
            "max_ms": round(max(times), 3),
        }
    return out


def render(result: dict) -> str:
    lines = []
    right = result.get("right_drafts")
    if right:
        for seed, s in right["seeds"].items():
            lines.append(f"seed {seed}: {s['sites']} sites, first draft right {s['top1']} ({s['top1_share']:.1%})")
        o = right["overall"]
        ks = ", ".join(f"first {k}: {o[f'top{k}']} ({o[f'top{k}_share']:.1%})" for k in TOP_K)
        lines.append(f"all seeds, {o['sites']} sites, the line's rest among the drafts: {ks}")
        lines.append(f"  first draft right after the indentation {o['top1_indent']}, mid-line {o['top1_mid']}")
    for name, f in result.get("search_times", {}).items():
        lines.append(
            f"find_drafts, {name} ({f['calls']} calls): mean {f['mean_ms']:.2f} ms, p95 {f['p95_ms']:.2f}, "
            f"max {f['max_ms']:.2f}"
        )
    return "\n".join(lines)
