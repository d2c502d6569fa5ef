"""What the parsers' check (checks/grammar.py) costs per completion and how often it blames a right line.

For each language of `bench repo` but Python: sites as `bench repo` chooses them in its packages' files
(the rest of the line removed, the cursor after the indentation or mid-line), and per site the time to
build the window (bounds and the base parse) and to judge one answer (an incremental parse), the line's
own rest (which should pass) and a line of Python (`import errno`, which should not). Prints per language:
p50 / p95 / max in milliseconds, the windows that parse cleanly, the right lines blamed, the Python lines
let through.

    .venv/bin/python scripts/measure_grammar_check.py [--sites 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import time

from celeris_complete.bench.repo import choose_sites, site_context
from celeris_complete.bench.repo_languages import LANGUAGES, fetch_source, source_files
from celeris_complete.checks.grammar import grammar_window
from celeris_complete.checks.languages import resolve
from celeris_complete.checks.syntax import judge
from celeris_complete.checks.window import BLAMED


def percentiles(ms: list[float]) -> dict:
    ms = sorted(ms) or [0.0]
    return {"p50": round(ms[len(ms) // 2], 3), "p95": round(ms[int(len(ms) * 0.95)], 3), "max": round(ms[-1], 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sites", type=int, default=200, help="sites per language")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    report = {}
    for name, lang in LANGUAGES.items():
        if name == "python":
            continue
        files: dict[str, str] = {}
        for package in lang.packages:
            root = fetch_source(name, package.name, package.version)
            files.update({f"{package.name}/{path}": text for path, text in source_files(root, lang.suffixes).items()})
        sites = choose_sites(files, args.sites, max_files=len(files), seed=args.seed, max_share=1.0,
                             comments=lang.comments)  # fmt: skip
        language = resolve(lang.language_id)
        build, right, wrong = [], [], []
        clean = blamed = let_through = unjudged = 0
        for site in sites:
            prefix, suffix = site_context(files[site.file], site)
            t0 = time.perf_counter()
            win = grammar_window(prefix, suffix, language, site.file)
            t1 = time.perf_counter()
            if win is None:  # the parse took too long: not judged
                build.append((t1 - t0) * 1e3)
                unjudged += 1
                continue
            right_blamed = judge(win, site.expected) == BLAMED
            t2 = time.perf_counter()
            python_passed = judge(win, "import errno") != BLAMED
            t3 = time.perf_counter()
            build.append((t1 - t0) * 1e3)
            right.append((t2 - t1) * 1e3)
            wrong.append((t3 - t2) * 1e3)
            clean += win.clean
            blamed += right_blamed
            let_through += python_passed
        n = len(sites)
        report[name] = r = {
            "sites": n, "window_ms": percentiles(build), "judge_right_ms": percentiles(right),
            "judge_python_ms": percentiles(wrong), "clean_windows": round(clean / n, 3),
            "right_lines_blamed": round(blamed / n, 3), "unjudged": unjudged,
            "python_lines_let_through": round(let_through / n, 3),
        }  # fmt: skip
        window, judged = r["window_ms"], r["judge_right_ms"]
        print(f"{name:11} {n} sites: window p50/p95/max {window['p50']}/{window['p95']}/{window['max']} ms, "
              f"judge p50/p95 {judged['p50']}/{judged['p95']} ms; clean {r['clean_windows']:.1%}, "
              f"right lines blamed {r['right_lines_blamed']:.1%}, Python lines let through "
              f"{r['python_lines_let_through']:.1%}, not judged (parse over the limit) {unjudged}",
              flush=True)  # fmt: skip
    print(json.dumps(report))


if __name__ == "__main__":
    main()
