"""Where bench edits' propagation tasks are lost: the same tasks as `celeris-complete bench edits REPO...`
(100 per category, seed 0), each counted as exact, without a suggestion (after an edit that added or
removed lines, or no match), at a line a next hunk changes but with other text, overlapping a next hunk
with another extent, or at a line no next hunk touches.

    .venv/bin/python results/issue46/where_lost.py REPO...
"""

import collections
import sys
from pathlib import Path

from celeris_complete.bench import edits as bench
from celeris_complete.edits.history import EditHistory
from celeris_complete.edits.propagate import suggest


def where(task: bench.Task) -> str:
    h = task.edit
    history = EditHistory()
    history.change(task.parent, h.start, h.start + h.count, "".join(h.new), whole_lines=True)
    doc = bench.apply(task.parent, h)
    got = suggest(doc, history, h.start + max(len(h.new), 1) - 1)
    if got is None:
        edit, after = history.latest(doc)
        return "none: lines added or removed" if edit.before.count("\n") != after.count("\n") else "none: no match"
    if bench.run_task(task)["exact"]:
        return "exact"
    delta = len(h.new) - h.count
    for n in task.nexts:
        start = n.start + (delta if n.start >= h.start + h.count else 0)
        if start == got.first and n.count == got.last - got.first + 1:
            return "the next hunk's lines, other text"
        if start - 1 <= got.first <= start + max(n.count, 1) or got.first <= start <= got.last:
            return "overlapping a next hunk, other extent"
    return "a line no next hunk touches"


def main(repos: list[str]) -> None:
    counts: collections.Counter = collections.Counter()
    for repo in repos:
        for task in bench.sample(bench.mine(Path(repo)), 100, 0):
            if task.category in ("below", "above", "far"):
                counts[where(task)] += 1
    print(f"{sum(counts.values())} propagation tasks")
    for what, n in counts.most_common():
        print(f"{n:6d}  {what}")


if __name__ == "__main__":
    main(sys.argv[1:])
