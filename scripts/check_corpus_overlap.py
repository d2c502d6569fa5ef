"""Does the training corpus hold copies of the code `bench repo` evaluates on?

    .venv/bin/python scripts/check_corpus_overlap.py [--min-chars 30] [--show 0.2]

For each file of the five evaluation packages (as `bench repo` downloads them), the share of its
distinct lines of at least --min-chars characters (stripped) that also occur in the training corpus
(`train --packages`, with today's filters); files above --show are listed. Common idioms match
by chance; a copy shows as a large share.
"""

from __future__ import annotations

import argparse

from celeris_complete.bench.repo import PACKAGES, fetch_package, python_files
from celeris_complete.training import corpus as corpus_mod
from celeris_complete.training.packages import fetch_sources


def long_lines(text: str, min_chars: int) -> set[str]:
    return {s for s in (line.strip() for line in text.splitlines()) if len(s) >= min_chars}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-chars", type=int, default=30)
    ap.add_argument("--show", type=float, default=0.2)
    a = ap.parse_args()
    roots = corpus_mod.default_roots() + [s.root for s in fetch_sources()]
    seen: set[str] = set()
    for f in corpus_mod.gather(roots):
        seen |= long_lines(f.text, a.min_chars)
    for name, version in PACKAGES:
        files = python_files(fetch_package(name, version))
        total = shared = 0
        for path, text in files.items():
            lines = long_lines(text, a.min_chars)
            hit = len(lines & seen)
            total, shared = total + len(lines), shared + hit
            if lines and hit / len(lines) > a.show:
                print(f"  {name}/{path}: {hit}/{len(lines)} lines in the corpus")
        print(f"{name} {version}: {shared}/{total} long lines in the corpus ({shared / max(1, total):.1%})")


if __name__ == "__main__":
    main()
