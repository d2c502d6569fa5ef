"""Drafts: what the repository suggests for the rest of the cursor's line, for the model to verify.

Much of what is typed already exists nearby: the same call with other arguments, the line that
follows the same line elsewhere.  A draft is the most common continuation, in the open document and
in the workspace, of lines that start as the cursor's line does (its text before the cursor, the
indentation aside); at a line's start, of the line that follows a line equal to the previous one.
Cheaper drafts go first: an answer the language server showed on the line (its typing cache) and
the engine's previous answer at this place (``PreviousCompletions``).  The engine puts the draft
into the canvas and keeps the part the model accepts (``verify.py``, ``diffusion.py``).

``LineTable`` indexes workspace files' lines by their first characters, updated file by file from
the indexing thread; the open document is scanned per request with one regular expression over the
text around the cursor, which is already in memory.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

MIN_KEY = 2  # non-blank characters typed on the line before a draft is looked for
MAX_LINE = 200  # longer lines are data, not code to copy
BUCKET = 4  # lines are bucketed by their first BUCKET characters (stripped)
MAX_SCAN = 4000  # candidate lines looked at per request, at most
MAX_TABLE_LINES = 2_000_000  # lines held for the workspace (about 10 bytes a character): new files wait
DOCUMENT_WEIGHT = 2  # a line in the document counts as much as this many lines elsewhere
PREVIOUS_PER_DOCUMENT = 4  # earlier answers remembered per document
PREVIOUS_DOCUMENTS = 32  # documents remembered
PLACE_CHARS = 256  # text before the cursor's line that must match for an earlier answer to be a draft there


@dataclass(frozen=True)
class Draft:
    text: str  # the rest of the line after the cursor
    source: str  # "typing-cache", "previous", "document" or "workspace"
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
    found = find_drafts(prefix, suffix, table, exclude, 1)
    return found[0] if found else None


def find_drafts(
    prefix: str,
    suffix: str,
    table: LineTable | None = None,
    exclude: str | None = None,
    limit: int = 1,
    first: Sequence[Draft] = (),
) -> list[Draft]:
    """Up to ``limit`` drafts, distinct: ``first`` (cheaper sources: the typing cache, the previous
    completion), then the most common continuations as ``find_draft`` counts them."""
    out: list[Draft] = []
    for d in first:
        if d.text and all(d.text != o.text for o in out):
            out.append(d)
    if len(out) >= limit:
        return out[:limit]
    for d in _voted(prefix, suffix, table, exclude, limit):
        if all(d.text != o.text for o in out):
            out.append(d)
    return out[:limit]


def _voted(prefix: str, suffix: str, table: LineTable | None, exclude: str | None, limit: int) -> list[Draft]:
    line_start = prefix.rfind("\n") + 1
    typed = prefix[line_start:].lstrip()
    before = prefix[: max(0, line_start - 1)]  # the document above the cursor's line
    below = suffix[suffix.find("\n") + 1 :] if "\n" in suffix else ""  # below it
    if len(typed) > MAX_LINE:
        return []
    if typed:
        if len(typed.strip()) < MIN_KEY:
            return []
        finders = (
            ("document", lambda c: (_document_lines(before, typed, c), _document_lines(below, typed, c))),
            ("workspace", lambda c: table.continuations(typed, exclude, c) if len(typed) >= BUCKET else None),
        )
    else:
        previous = before[before.rfind("\n") + 1 :].strip() if before else ""
        if not previous or len(previous) > MAX_LINE:
            return []
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
    return [Draft(text, origin[text], count) for text, count in votes.most_common(limit)]


def line_continuation(earlier_prefix: str, text: str, prefix: str) -> str | None:
    """What an earlier answer (``text`` at ``earlier_prefix``) says the rest of the cursor's line is,
    when its line starts as the cursor's does (the same line typed further, or typed back); else None."""
    line = earlier_prefix[earlier_prefix.rfind("\n") + 1 :] + text.split("\n", 1)[0]
    head = prefix[prefix.rfind("\n") + 1 :]
    if len(line) > len(head) and line.startswith(head) and head.strip():
        return line[len(head) :].rstrip()
    return None


class PreviousCompletions:
    """The engine's last answers per document, as drafts at the same place: the same text before the
    cursor's line (its last ``PLACE_CHARS``), the line typed further or back (``line_continuation``)."""

    def __init__(self, per_document: int = PREVIOUS_PER_DOCUMENT, documents: int = PREVIOUS_DOCUMENTS) -> None:
        self.per_document, self.documents = per_document, documents
        self._answers: dict[str | None, list[tuple[str, str, str]]] = {}  # key -> (place, line, text), newest first
        self._lock = threading.Lock()

    @staticmethod
    def _place(prefix: str) -> tuple[str, str]:
        start = prefix.rfind("\n") + 1
        return prefix[max(0, start - PLACE_CHARS) : start], prefix[start:]

    def record(self, key: str | None, prefix: str, text: str) -> None:
        if not text.strip():
            return
        place, line = self._place(prefix)
        if len(line) > MAX_LINE:
            return
        answer = (place, line, text.split("\n", 1)[0][:MAX_LINE])
        with self._lock:
            answers = self._answers.pop(key, [])
            self._answers[key] = answers  # the most recently used document last
            answers.insert(0, answer)
            del answers[self.per_document :]
            while len(self._answers) > self.documents:
                del self._answers[next(iter(self._answers))]

    def drafts(self, key: str | None, prefix: str) -> list[Draft]:
        """Earlier answers on this line; never one given at this very cursor (it would be the answer)."""
        place, line = self._place(prefix)
        with self._lock:
            answers = list(self._answers.get(key, ()))
        out = []
        for earlier_place, earlier_line, text in answers:
            if earlier_place == place and earlier_line != line:
                rest = line_continuation(earlier_line, text, line)
                if rest:
                    out.append(Draft(rest, "previous", 1))
        return out


def draft_tokens(encode, before: str, text: str) -> list[int]:
    """``text``'s tokens as they follow ``before`` (the cursor line's text ahead of the span) in the
    document.  Encoded alone, a leading blank is split off as indentation (" a" -> " ", "a"), which is
    not how the model saw such a line; so the line is encoded with it, and its own tokens dropped when
    they are unchanged (else the token at the boundary merged across it, and ``text`` goes alone)."""
    if before:
        head, ids = encode(before), encode(before + text)
        if ids[: len(head)] == head:
            return ids[len(head) :]
    return encode(text)
