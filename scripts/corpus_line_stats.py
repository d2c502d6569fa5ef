"""How often lines of a few kinds occur in the standard library and in the packages corpus (per 1,000
non-blank lines), and the share of blank lines: is a habit of a continued model the corpus's?

    .venv/bin/python scripts/corpus_line_stats.py
"""

from __future__ import annotations

import collections

from celeris_complete.training import corpus as corpus_mod
from celeris_complete.training.packages import fetch_sources

KINDS = ("else:", "pass", "break", "continue", "return", "return True", "return False")


def stats(roots) -> dict:
    lines = blank = 0
    counts: collections.Counter[str] = collections.Counter()
    for f in corpus_mod.gather(roots, corpus_mod.DEFAULT_EXCLUDES):
        for line in f.text.split("\n"):
            lines += 1
            s = line.strip()
            if not s:
                blank += 1
            elif s in KINDS:
                counts[s] += 1
    nonblank = max(1, lines - blank)
    return {"blank_share": round(blank / max(1, lines), 4), **{k: round(counts[k] / nonblank * 1000, 2) for k in KINDS}}


def main() -> None:
    stdlib = corpus_mod.default_roots()
    print("standard library:", stats(stdlib))
    print("packages corpus (the standard library included):", stats(stdlib + [s.root for s in fetch_sources()]))


if __name__ == "__main__":
    main()
