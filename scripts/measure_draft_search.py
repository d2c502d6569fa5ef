"""The document search behind drafts: its time per call, and its answers against the regular expressions
it replaced (2026-12-02); then its time at line starts and at mid-line places, with and without the
drafts from lines between alike lines and from the line's end (``_between`` and ``_tails`` replaced by
nothing), with the token cache cleared before each call (cold) or not (warm), on cli.py and on 20
copies of it (1 MB), and in two worst cases. Usage: .venv/bin/python scripts/measure_draft_search.py"""

import random
import re
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from celeris_complete.drafts import search as drafts  # noqa: E402
from celeris_complete.drafts.snippets import SnippetIndex  # noqa: E402


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



found = drafts._tails, drafts._between
without = (lambda typed: [], lambda *args: [])


def timed(label: str, calls, cold: bool) -> None:
    times = []
    for prefix, suffix in calls:
        if cold:
            drafts._token_sets.clear()
        t = time.perf_counter()
        drafts.find_drafts(prefix, suffix, None, None, 1, ())
        times.append(time.perf_counter() - t)
    times.sort()
    print(
        f"{label}: mean {sum(times) / len(times) * 1e3:.2f} ms, p95 {times[int(0.95 * len(times))] * 1e3:.2f} ms, "
        f"max {times[-1] * 1e3:.2f} ms ({len(times)} calls)"
    )


def both(label: str, calls) -> None:
    runs = (("without", without, False), ("with, cold", found, True), ("with, warm", found, False))
    for name, functions, cold in runs:
        drafts._tails, drafts._between = functions
        timed(f"{label}, {name}", calls, cold)
    drafts._tails, drafts._between = found


for name, text in (("cli.py", doc), ("cli.py x20", doc * 20)):
    rng = random.Random(0)
    starts = rng.sample([m.end() for m in re.finditer(r"\n[ ]*(?=\S)", text)], 200)
    both(f"line starts in {name}", [(text[:c], text[text.find("\n", c) :]) for c in starts])
    mids = rng.sample([m.start() for m in re.finditer(r"(?<=[\w)\]]) *[(.=,\[]", text)], 200)
    both(f"mid-line in {name}", [(text[:c], text[text.find("\n", c) :]) for c in mids])
# Worst cases: a file of 60,000 short lines (line starts), and 120 kB of lines that each hold every
# end of the typed line, but only at their own ends (mid-line: every end searched, none gives a draft).
short = "".join(f"a{i % 7}\n" for i in range(30000))
both("line start among 60,000 short lines", [(short + "q = 1\n", "\nr = 2\n" + short)] * 5)
row = ",".join(f"a{i}" for i in range(45))  # 169 characters: the typed line stays under MAX_LINE
block = (row + "\n") * (120_000 // (len(row) + 1))
both("mid-line, 120 kB of lines that end as the typed line", [(block + "z " + row, "\n")] * 5)
