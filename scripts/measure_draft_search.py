"""The document search behind drafts: its time per call, and its answers against the regular expressions
it replaced (2026-12-02). Usage: .venv/bin/python scripts/measure_draft_search.py"""

import random
import re
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from celeris_complete import drafts  # noqa: E402
from celeris_complete.snippets import SnippetIndex  # noqa: E402


def regex_lines(text: str, key: str, counts: Counter) -> None:
    for m in re.finditer(r"^[ \t]*" + re.escape(key) + r"([^\r\n]+)", text, re.M):
        counts[m.group(1).rstrip()] += 1


def regex_following(text: str, line: str, counts: Counter) -> None:
    for m in re.finditer(r"^[ \t]*" + re.escape(line) + r"[ \t]*\r?\n[ \t]*([^\r\n]+)", text, re.M):
        counts[m.group(1).rstrip()] += 1


files = sorted((ROOT / "celeris_complete").glob("*.py"))
index = SnippetIndex()
for path in files:
    index.set_file(str(path), path.read_text())
doc = (ROOT / "celeris_complete" / "cli.py").read_text()
rng = random.Random(0)
places = sorted(rng.sample(range(len(doc)), 400))
t = time.perf_counter()
for c in places:
    drafts.find_drafts(doc[:c], doc[c:], index.lines, str(files[0]), 1, ())
print(f"find_drafts on cli.py: {(time.perf_counter() - t) / len(places) * 1e3:.3f} ms a call ({len(places)} places)")

rng = random.Random(1)
texts = [p.read_text() for p in files]
texts.append("a = 1\r\n  a = 2\r\nb\r  a = 3 \n\ta =\n a = \t\n if x:\n   \n if x:  \n\t y\n if x:\r\n z\r\n")
checked = differ = fewer = 0
for text in texts:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for _ in range(300):
        line = rng.choice(lines)
        for key in (line[: rng.randint(1, len(line))], line):
            for old, new in ((regex_lines, drafts._document_lines), (regex_following, drafts._document_following)):
                a, b = Counter(), Counter()
                old(text, key, a)
                new(text, key, b)
                a.pop("", None)
                checked += 1
                if a != b:
                    differ += 1
                    # Allowed: consecutive equal lines each vote for the line after them now.
                    fewer += old is regex_lines or any(b[k] < v for k, v in a.items())
print(f"{checked} searches compared: {differ} differ, {fewer} of them other than by extra votes")
