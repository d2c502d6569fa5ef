"""The workspace's lines indexed by how they start (``LineTable``), updated file by file from the
indexing thread; a draft (``Draft``) and earlier answers remembered per place (``PreviousCompletions``)."""

from __future__ import annotations

import threading
from array import array
from collections import Counter
from dataclasses import dataclass

import numpy as np

from celeris_complete.checks.languages import family_of

MAX_LINE = 200  # longer lines are data, not code to copy
BUCKET = 4  # lines are bucketed by their first BUCKET characters (stripped)
MAX_SCAN = 4000  # candidate lines looked at per request, at most
MAX_TABLE_LINES = 2_000_000  # lines held for the workspace: new files wait
FOLLOWING_PER_FILE = 64  # lines after the same line taken from one file, at most
PREVIOUS_PER_DOCUMENT = 4  # earlier answers remembered per document
PREVIOUS_DOCUMENTS = 32  # documents remembered
PLACE_CHARS = 256  # text before the cursor's line that must match for an earlier answer to be a draft there
PLACES_LOOKED = 8  # copies of a continuation looked at for that, the nearest to the cursor


@dataclass(frozen=True)
class Draft:
    text: str  # the rest of the line after the cursor
    source: str  # "typing-cache", "previous", "import", "syntax", "document", "workspace", "line-end" or "context"
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
    """Stripped source lines of workspace files, bucketed by their start; thread-safe.

    Kept as few Python objects as possible (a workspace holds millions of lines, and millions of small
    objects stay scattered over the allocator's arenas after their files are removed): a file's
    non-blank stripped lines are one string with their start offsets in an array, a bucket maps each
    file to an array of its line numbers, and every line's hash sits in one array for the whole table
    (with the file and line it belongs to), so a line's copies are found with one vectorized compare.
    The line after a line is the next one of its file."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: dict[str, tuple[str, array, int]] = {}  # source -> (lines joined by "\n", starts, first row)
        self._buckets: dict[str, dict[str, array]] = {}  # start -> source -> its line numbers there
        self._hashes = np.zeros(0, dtype=np.int64)  # row -> a line's hash (rows of removed files: owner -1)
        self._owner = np.zeros(0, dtype=np.int32)  # row -> its file's number in _sources, or -1
        self._sources: list[str | None] = []  # file number -> source
        self._numbers: dict[str, int] = {}  # source -> file number
        self._family: dict[str, str | None] = {}  # source -> its language's family (checks/languages.py)
        self._rows = 0  # rows in use (live and dead)
        self._total = 0  # live rows
        self._removed = 0  # files removed since the dicts were last copied

    def set_file(self, source: str, text: str) -> None:
        lines = [ln for ln in (raw.strip() for raw in text.splitlines()) if ln and len(ln) <= MAX_LINE]
        joined = "\n".join(lines)
        starts = array("I", [0])
        buckets: dict[str, array] = {}
        for i, line in enumerate(lines):
            starts.append(starts[-1] + len(line) + 1)
            numbers = buckets.get(line[:BUCKET])
            if numbers is None:
                buckets[line[:BUCKET]] = numbers = array("I")
            numbers.append(i)
        hashes = np.fromiter(map(hash, lines), dtype=np.int64, count=len(lines))
        family = family_of(source)
        with self._lock:
            self._remove_locked(source, replacing=True)
            if self._total + len(lines) > MAX_TABLE_LINES:
                return  # full: this file gives no drafts (the document itself still does)
            if self._rows + len(lines) > len(self._hashes):
                self._grow_locked(len(lines))
            number = self._numbers[source] = len(self._sources)
            self._sources.append(source)
            first = self._rows
            self._hashes[first : first + len(lines)] = hashes
            self._owner[first : first + len(lines)] = number
            self._rows += len(lines)
            self._total += len(lines)
            self._files[source] = (joined, starts, first)
            self._family[source] = family
            for k, numbers in buckets.items():
                self._buckets.setdefault(k, {})[source] = numbers

    def _grow_locked(self, more: int) -> None:
        """Room for ``more`` rows: dead rows dropped (files renumbered) and the arrays enlarged if need be."""
        live = [(source, held) for source, held in self._files.items()]
        size = max(1024, 2 * (self._total + more))
        hashes, owner = np.zeros(size, dtype=np.int64), np.zeros(size, dtype=np.int32)
        self._sources, self._numbers, row = [], {}, 0
        for number, (source, (joined, starts, first)) in enumerate(live):
            n = len(starts) - 1
            hashes[row : row + n] = self._hashes[first : first + n]
            owner[row : row + n] = number
            self._sources.append(source)
            self._numbers[source] = number
            self._files[source] = (joined, starts, row)
            row += n
        self._hashes, self._owner, self._rows = hashes, owner, row

    def remove(self, source: str) -> None:
        with self._lock:
            self._remove_locked(source)

    def _remove_locked(self, source: str, replacing: bool = False) -> None:
        held = self._files.pop(source, None)
        if held is None:
            return
        self._family.pop(source, None)
        joined, starts, first = held
        n = len(starts) - 1
        self._total -= n
        self._owner[first : first + n] = -1
        self._sources[self._numbers.pop(source)] = None
        for i in range(n):
            key = joined[starts[i] : min(starts[i] + BUCKET, starts[i + 1] - 1)]
            per = self._buckets.get(key)
            if per is not None and per.pop(source, None) is not None and not per:
                del self._buckets[key]
        if self._rows > 4 * max(self._total, 1024):  # mostly dead: the arrays shrink
            self._grow_locked(0)
        self._removed += not replacing  # a file replaced fills its buckets again
        if self._removed > len(self._files):
            # A dict keeps its largest size: once a large folder is gone, the buckets it shared with the
            # files that stay would hold its memory for good. Copied at their size (as often as files are
            # removed, so the copies cost what the removals did).
            self._files = dict(self._files)
            self._numbers = dict(self._numbers)
            self._family = dict(self._family)
            self._buckets = {key: dict(per) for key, per in self._buckets.items()}
            self._removed = 0

    def continuations(
        self, key: str, exclude: str | None, counts: Counter, places: dict | None = None, family: str | None = None
    ) -> None:
        """Add the continuations of lines starting with ``key`` (at least BUCKET characters); ``places``
        as ``_document_lines``'s; ``family``: only from files of that family (None: from any)."""
        n = len(key)
        with self._lock:
            budget = MAX_SCAN
            of = self._family
            for source, numbers in self._buckets.get(key[:BUCKET], {}).items():
                if source == exclude or (family is not None and of[source] != family):
                    continue
                joined, starts, _ = self._files[source]
                for i in numbers[:budget]:
                    a, b = starts[i], starts[i + 1] - 1
                    if b - a > n and joined.startswith(key, a, b):
                        counts[joined[a + n : b]] += 1
                        _note(places, joined[a + n : b], (joined, a, a))
                budget -= len(numbers)
                if budget <= 0:
                    return

    def following(
        self, line: str, exclude: str | None, counts: Counter, places: dict | None = None, family: str | None = None
    ) -> None:
        """Add the lines that follow ``line`` elsewhere (at most FOLLOWING_PER_FILE from a file); ``places``
        as ``_document_following``'s; ``family`` as ``continuations``'s."""
        h = hash(line)
        with self._lock:
            rows = np.flatnonzero(self._hashes[: self._rows] == h)
            owners = self._owner[rows].tolist()
            taken: Counter[int] = Counter()
            budget = MAX_SCAN
            for row, number in zip(rows.tolist(), owners):
                if number < 0 or taken[number] >= FOLLOWING_PER_FILE:
                    continue
                source = self._sources[number]
                if source == exclude or (family is not None and self._family[source] != family):
                    continue
                joined, starts, first = self._files[source]
                i = row - first
                a, b = starts[i], starts[i + 1] - 1
                if i + 2 < len(starts) and b - a == len(line) and joined.startswith(line, a, b):
                    counts[joined[b + 1 : starts[i + 2] - 1]] += 1
                    _note(places, joined[b + 1 : starts[i + 2] - 1], (joined, a, b + 1))
                    taken[number] += 1
                    budget -= 1
                    if budget <= 0:
                        return


def _note(places: dict | None, key: str, place: tuple[str, int, int], last: bool = False) -> None:
    """Keep where a copy of the continuation ``key`` is, for ``_ranked``: the first ``PLACES_LOOKED``
    copies found (``last``: the last ones, the nearest in a text above the cursor searched forward)."""
    if places is None:
        return
    spots = places.get(key)
    if spots is None:
        places[key] = [place]
    elif last:
        spots.append(place)
        if len(spots) > 2 * PLACES_LOOKED:
            del spots[:-PLACES_LOOKED]
    elif len(spots) < PLACES_LOOKED:
        spots.append(place)


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
