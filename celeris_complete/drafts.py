"""Drafts: what the repository suggests for the rest of the cursor's line, for the model to verify.

Much of what is typed already exists nearby: the same call with other arguments, the line that
follows the same line elsewhere.  A draft is the most common continuation, in the open document and
in the workspace, of lines that start as the cursor's line does (its text before the cursor, the
indentation aside); at a line's start, of the line that follows a line equal to the previous one.
The engine puts the draft into the canvas and keeps the part the model accepts (``diffusion.py``).

``LineTable`` indexes workspace files' lines by their first characters, updated file by file from
the indexing thread; the open document is scanned per request with one regular expression over the
text around the cursor, which is already in memory.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from dataclasses import dataclass

MIN_KEY = 2  # non-blank characters typed on the line before a draft is looked for
MAX_LINE = 200  # longer lines are data, not code to copy
BUCKET = 4  # lines are bucketed by their first BUCKET characters (stripped)
MAX_SCAN = 4000  # candidate lines looked at per request, at most
MAX_TABLE_LINES = 2_000_000  # lines held for the workspace (about 10 bytes a character): new files wait
DOCUMENT_WEIGHT = 2  # a line in the document counts as much as this many lines elsewhere


@dataclass(frozen=True)
class Draft:
    text: str  # the rest of the line after the cursor
    source: str  # "document" or "workspace"
    count: int  # its votes (document lines count DOCUMENT_WEIGHT)


def _continuations(lines, key: str, counts: Counter, limit: int) -> int:
    """Count the continuations of ``key`` among stripped ``lines``; returns how many were looked at."""
    n = 0
    for line in lines:
        n += 1
        if n > limit:
            break
        if line.startswith(key) and len(line) > len(key):
            counts[line[len(key) :]] += 1
    return n


class LineTable:
    """Stripped source lines of workspace files, bucketed by their start; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buckets: dict[str, dict[str, list[str]]] = {}  # start -> source -> lines
        self._after: dict[str, dict[str, list[str]]] = {}  # a line -> source -> the lines after it
        self._keys: dict[str, tuple[set[str], set[str]]] = {}  # source -> (bucket keys, after keys)
        self._count: dict[str, int] = {}  # source -> its lines held
        self._total = 0

    def set_file(self, source: str, text: str) -> None:
        lines = [ln.strip() for ln in text.splitlines()]
        lines = [ln if len(ln) <= MAX_LINE else "" for ln in lines]
        buckets: dict[str, list[str]] = {}
        after: dict[str, list[str]] = {}
        previous = ""
        for line in lines:
            if not line:
                continue
            buckets.setdefault(line[:BUCKET], []).append(line)
            if previous:
                after.setdefault(previous, []).append(line)
            previous = line
        n = sum(len(v) for v in buckets.values())
        with self._lock:
            self._remove_locked(source)
            if self._total + n > MAX_TABLE_LINES:
                return  # full: this file gives no drafts (the document itself still does)
            self._count[source] = n
            self._total += n
            for k, v in buckets.items():
                self._buckets.setdefault(k, {})[source] = v
            for k, v in after.items():
                self._after.setdefault(k, {})[source] = v
            self._keys[source] = (set(buckets), set(after))

    def remove(self, source: str) -> None:
        with self._lock:
            self._remove_locked(source)

    def _remove_locked(self, source: str) -> None:
        keys = self._keys.pop(source, None)
        if keys is None:
            return
        self._total -= self._count.pop(source, 0)
        for table, names in ((self._buckets, keys[0]), (self._after, keys[1])):
            for k in names:
                per = table.get(k)
                if per is not None:
                    per.pop(source, None)
                    if not per:
                        del table[k]

    def continuations(self, key: str, exclude: str | None, counts: Counter) -> None:
        """Add the continuations of lines starting with ``key`` (at least BUCKET characters)."""
        with self._lock:
            per = self._buckets.get(key[:BUCKET], {})
            budget = MAX_SCAN
            for source, lines in per.items():
                if source != exclude and budget > 0:
                    budget -= _continuations(lines, key, counts, budget)

    def following(self, line: str, exclude: str | None, counts: Counter) -> None:
        """Add the lines that follow ``line`` elsewhere."""
        with self._lock:
            budget = MAX_SCAN
            for source, lines in self._after.get(line, {}).items():
                if source != exclude and budget > 0:
                    counts.update(lines[:64])
                    budget -= min(64, len(lines))


def _document_lines(text: str, key: str, counts: Counter) -> None:
    pattern = re.compile(r"^[ \t]*" + re.escape(key) + r"([^\r\n]+)", re.M)
    for m in pattern.finditer(text):
        counts[m.group(1).rstrip()] += 1


def _document_following(text: str, line: str, counts: Counter) -> None:
    pattern = re.compile(r"^[ \t]*" + re.escape(line) + r"[ \t]*\r?\n[ \t]*([^\r\n]+)", re.M)
    for m in pattern.finditer(text):
        counts[m.group(1).rstrip()] += 1


def find_draft(
    prefix: str, suffix: str, table: LineTable | None = None, exclude: str | None = None
) -> Draft | None:
    """The most common continuation of the cursor's line in the document (``prefix``, ``suffix``, the
    cursor's own line left out; each line counts ``DOCUMENT_WEIGHT`` times) and the workspace; None
    when no line starts alike."""
    line_start = prefix.rfind("\n") + 1
    typed = prefix[line_start:].lstrip()
    before = prefix[: max(0, line_start - 1)]  # the document above the cursor's line
    below = suffix[suffix.find("\n") + 1 :] if "\n" in suffix else ""  # below it
    if len(typed) > MAX_LINE:
        return None
    if typed:
        if len(typed.strip()) < MIN_KEY:
            return None
        finders = (
            ("document", lambda c: (_document_lines(before, typed, c), _document_lines(below, typed, c))),
            ("workspace", lambda c: table.continuations(typed, exclude, c) if len(typed) >= BUCKET else None),
        )
    else:
        previous = before[before.rfind("\n") + 1 :].strip() if before else ""
        if not previous or len(previous) > MAX_LINE:
            return None
        finders = (
            ("document", lambda c: (_document_following(before, previous, c), _document_following(below, previous, c))),
            ("workspace", lambda c: table.following(previous, exclude, c)),
        )
    votes: Counter[str] = Counter()
    origin: dict[str, str] = {}
    for source, find in finders:
        if source == "workspace" and table is None:
            continue
        counts: Counter[str] = Counter()
        find(counts)
        counts.pop("", None)
        for text, n in counts.items():
            votes[text] += n * (DOCUMENT_WEIGHT if source == "document" else 1)
            origin.setdefault(text, source)
    if not votes:
        return None
    text, count = votes.most_common(1)[0]
    return Draft(text, origin[text], count)
