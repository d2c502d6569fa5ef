"""Drafts: what the repository suggests for the rest of the cursor's line, for the model to verify.

Much of what is typed already exists nearby: the same call with other arguments, the line that
follows the same line elsewhere.  A draft is a continuation, in the open document and in the
workspace, of lines that start as the cursor's line does (its text before the cursor, the indentation
aside); at a line's start, the line that follows a line equal to the previous one.  Of several, the
one whose copies sit among lines most like those around the cursor, with votes, near the cursor and
with names in use there, comes first (``_ranked``: a score whose weights were fitted on packages of
the training corpus).
When no line starts alike, the document near the cursor is searched further: mid-line, for the
longest end of the cursor's line (from a token on, at least ``MIN_TAIL`` non-blank characters) that
recurs with text after it on its line, within ``TAIL_WINDOW`` characters on either side (``second)``
after ``x = combine(first, `` where ``update(first, second)`` was written: a ``line-end`` draft); at a
line's start with nothing after the cursor, for the line at the cursor's indentation whose neighbours
look most like the cursor's (``_between``: a ``context`` draft).
Cheaper drafts go first: an answer the language server showed on the line (its typing cache) and
the engine's previous answer at this place (``PreviousCompletions``).  The engine puts the draft
into the canvas and keeps the part the model accepts (``verify.py``, ``diffusion.py``).

``LineTable`` indexes workspace files' lines by their first characters, updated file by file from
the indexing thread; the open document is scanned per request with one regular expression over the
text around the cursor, which is already in memory.
"""

from __future__ import annotations

import heapq
import math
import re
import threading
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MIN_KEY = 2  # non-blank characters typed on the line before a draft is looked for
MAX_LINE = 200  # longer lines are data, not code to copy
BUCKET = 4  # lines are bucketed by their first BUCKET characters (stripped)
MAX_SCAN = 4000  # candidate lines looked at per request, at most
MAX_TABLE_LINES = 2_000_000  # lines held for the workspace: new files wait
FOLLOWING_PER_FILE = 64  # lines after the same line taken from one file, at most
DOCUMENT_WEIGHT = 2  # a line in the document counts as much as this many lines elsewhere
PREVIOUS_PER_DOCUMENT = 4  # earlier answers remembered per document
PREVIOUS_DOCUMENTS = 32  # documents remembered
MIN_TAIL = 3  # non-blank characters of the line's end that must recur for a draft from it
TAIL_WINDOW = 50_000  # characters on either side of the cursor searched for the line's end
CONTEXT_WINDOW = 20_000  # characters on either side of the cursor searched for a line between alike lines
CONTEXT_LINES = 600  # and lines (a file of short lines would hold thousands in those characters)
MIN_CONTEXT = 1.0  # how alike (0-2) the lines around a line must be to those around the cursor to draft it
TOKEN_START = re.compile(r"\w+|[^\w\s]")  # where a line's end may begin
PLACE_CHARS = 256  # text before the cursor's line that must match for an earlier answer to be a draft there
RANKED = 32  # continuations ranked by the lines around their copies (the rest by votes)
PLACES_LOOKED = 8  # copies of a continuation looked at for that, the nearest to the cursor
FAR = 1 << 40  # how far another file is, in characters
NEIGHBOUR_REACH = 4096  # characters looked through for a copy's neighbouring line (past blank lines)
NONBLANK = re.compile(r"\S")
NAME = re.compile(r"[A-Za-z_]\w*")
NAMES_BEFORE, NAMES_AFTER = 4000, 1000  # characters above and below the cursor whose names count as in use
NEAR_CHARS = 2000  # a copy this far from the cursor in the document is half as near as one beside it
# A continuation's score among several, weights of: how alike the lines around its copies are to the
# cursor's (0-2), log(1 + votes), the nearness of its nearest copy in the document (0 in other files), the
# share of its names in use near the cursor, log(1 + its names), a copy under exactly the cursor's line
# above (0/1), a copy over exactly its line below (0/1).  Fitted on sites in packages of the training
# corpus and in its held-out files (scripts/fit_draft_ranking.py --heldout, results/draft_ranking/),
# never on the benchmarks'.
RANK_WEIGHTS = (2.1, 0.8, 0.6, 1.3, -0.7, 0.8, 0.7)


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
            self._buckets = {key: dict(per) for key, per in self._buckets.items()}
            self._removed = 0

    def continuations(self, key: str, exclude: str | None, counts: Counter, places: dict | None = None) -> None:
        """Add the continuations of lines starting with ``key`` (at least BUCKET characters); ``places``
        as ``_document_lines``'s."""
        n = len(key)
        with self._lock:
            budget = MAX_SCAN
            for source, numbers in self._buckets.get(key[:BUCKET], {}).items():
                if source == exclude:
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

    def following(self, line: str, exclude: str | None, counts: Counter, places: dict | None = None) -> None:
        """Add the lines that follow ``line`` elsewhere (at most FOLLOWING_PER_FILE from a file); ``places``
        as ``_document_following``'s."""
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
                if source == exclude:
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


def _indented_at(text: str, i: int) -> bool:
    """Only spaces and tabs between the start of ``i``'s line and ``i``."""
    start = text.rfind("\n", 0, i) + 1
    return not text[start:i].strip(" \t")


def _rest_of_line(text: str, i: int) -> str:
    end = len(text)
    for stop in ("\n", "\r"):
        found = text.find(stop, i, end)
        if found >= 0:
            end = found
    return text[i:end]


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


def _document_lines(text: str, key: str, counts: Counter, places: dict | None = None, last: bool = False) -> None:
    """Count what follows ``key`` on the lines that start with it (after their indentation);
    ``places`` receives, per continuation, where such lines are (``_note``)."""
    i = text.find(key)
    while i >= 0:
        if _indented_at(text, i):
            rest = _rest_of_line(text, i + len(key)).rstrip()
            if rest and len(rest) <= MAX_LINE:
                counts[rest] += 1
                _note(places, rest, (text, i, i), last)
        i = text.find(key, i + 1)


def _document_following(
    text: str, line: str, counts: Counter, places: dict | None = None, last: bool = False
) -> None:
    """Count the lines that follow the lines equal to ``line`` (indentation and trailing blanks aside);
    ``places`` receives, per such line, where it and the line before it are (``_note``)."""
    i = text.find(line)
    while i >= 0:
        if _indented_at(text, i):
            end = i + len(line)
            tail = _rest_of_line(text, end)
            end += len(tail)
            newline = 2 if text.startswith("\r\n", end) else 1 if text.startswith("\n", end) else 0
            if newline and not tail.strip(" \t"):
                rest = _rest_of_line(text, end + newline).strip(" \t").rstrip()
                if rest:
                    counts[rest] += 1
                    _note(places, rest, (text, i, end + newline), last)
        i = text.find(line, i + 1)


def _line_next_to(text: str, i: int, step: int) -> str:
    """The nearest non-blank line above (``step`` -1) or below (1) the line holding ``text[i]``, stripped;
    "" when there is none within ``NEIGHBOUR_REACH`` characters, or it is longer than ``MAX_LINE``."""
    if step < 0:
        end = text.rfind("\n", 0, i)
        if end < 0:
            return ""
        reach = max(0, end - NEIGHBOUR_REACH)
        chunk = text[reach:end].rstrip()
        start = chunk.rfind("\n") + 1
        if not chunk or (start == 0 and reach > 0) or len(chunk) - start > MAX_LINE:
            return ""
        return chunk[start:].strip()
    end = text.find("\n", i)
    found = NONBLANK.search(text, end, end + NEIGHBOUR_REACH) if end >= 0 else None
    if found is None:
        return ""
    at = found.start()
    stop = text.find("\n", at, at + MAX_LINE + 2)
    if stop < 0:
        if len(text) - at > MAX_LINE + 1:
            return ""
        stop = len(text)
    return text[text.rfind("\n", 0, at) + 1 : stop].strip()


def _tails(typed: str) -> list[str]:
    """The ends of ``typed`` that begin at a token, longest first, with at least MIN_TAIL non-blank
    characters (the whole line included: it may recur inside another line)."""
    out = []
    for m in TOKEN_START.finditer(typed):
        tail = typed[m.start() :]
        if len(tail) - tail.count(" ") - tail.count("\t") < MIN_TAIL:
            break
        out.append(tail)
    return out


def _document_tails(text: str, key: str, counts: Counter, limit: int) -> int:
    """Count what follows ``key`` on its line wherever it occurs (at most ``limit`` occurrences looked
    at; returns how many were)."""
    i, n = text.find(key), 0
    while i >= 0 and n < limit:
        rest = _rest_of_line(text, i + len(key)).rstrip()
        if rest and len(rest) <= MAX_LINE:
            counts[rest] += 1
        n += 1
        i = text.find(key, i + 1)
    return n


_token_sets: dict[str, frozenset[str]] = {}  # a line -> its tokens (lines recur from keystroke to keystroke)


def _tokens(line: str) -> frozenset[str]:
    if len(line) > MAX_LINE:  # data, not code: alike nothing (and never held)
        return frozenset()
    found = _token_sets.get(line)
    if found is None:
        if len(_token_sets) > 50_000:
            _token_sets.clear()
        found = _token_sets[line] = frozenset(TOKEN_START.findall(line))
    return found


def _likeness(a: frozenset[str], b: frozenset[str]) -> float:
    """The share of tokens two lines have in common (Jaccard): 1 for the same tokens, 0 for none alike."""
    common = len(a & b)
    return common / (len(a) + len(b) - common) if a or b else 0.0


def _between(before: str, below: str, indent: str, limit: int = 1) -> list[str]:
    """At a line's start: the lines of the document near the cursor (``CONTEXT_WINDOW``,
    ``CONTEXT_LINES``), at the cursor's indentation, whose neighbours look most like the cursor's (the
    non-blank lines above and below it, ``_likeness`` of each added; the two around the cursor are no
    candidates), at most ``limit``, the most alike first (of equals, the nearest to the cursor); only
    those that reach ``MIN_CONTEXT``."""
    if indent.strip(" \t"):
        return []
    above = before[-CONTEXT_WINDOW:].split("\n")[1 if len(before) > CONTEXT_WINDOW else 0 :][-CONTEXT_LINES:]
    under = below[:CONTEXT_WINDOW].split("\n")
    if len(below) > CONTEXT_WINDOW:
        under.pop()
    under = under[:CONTEXT_LINES]
    lines = [ln.rstrip() for ln in above + under if ln.strip()]
    stripped = [ln.lstrip() for ln in lines]
    gap = sum(1 for ln in above if ln.strip())  # the cursor's line goes before lines[gap]
    empty: frozenset[str] = frozenset()
    prev = _tokens(stripped[gap - 1]) if gap else empty
    nxt = _tokens(stripped[gap]) if gap < len(lines) else empty
    if not prev and not nxt:
        return []
    best: dict[str, tuple[float, float]] = {}  # a line -> its best (likeness, nearness)
    n = len(indent)
    for j, line in enumerate(lines):
        if j in (gap - 1, gap):  # the cursor's own neighbours: one of theirs is the other, alike by itself
            continue
        if len(line) <= n or not line.startswith(indent) or line[n] in " \t" or len(line) - n > MAX_LINE:
            continue
        score = _likeness(_tokens(stripped[j - 1]) if j else empty, prev)
        score += _likeness(_tokens(stripped[j + 1]) if j + 1 < len(lines) else empty, nxt)
        key = (score, -abs(j - gap + 0.5))  # of lines alike, the nearest to the cursor
        if score >= MIN_CONTEXT and key > best.get(line[n:], (-1.0, 0.0)):
            best[line[n:]] = key
    return sorted(best, key=best.__getitem__, reverse=True)[:limit]


def find_draft(
    prefix: str, suffix: str, table: LineTable | None = None, exclude: str | None = None
) -> Draft | None:
    """The best continuation of the cursor's line in the document (``prefix``, ``suffix``, the cursor's
    own line left out; each line counts ``DOCUMENT_WEIGHT`` times) and the workspace (``_ranked``), else
    a ``line-end`` or ``context`` draft from the document; None when there is none."""
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
    completion), then the continuations as ``find_draft`` ranks them."""
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
    # Where each continuation's copies are, for _ranked: above the cursor, below it, in the workspace.
    above: dict[str, list] = {}
    under: dict[str, list] = {}
    elsewhere: dict[str, list] = {}
    if typed:
        if len(typed.strip()) < MIN_KEY:
            return []
        search = _document_lines
        finders = (
            ("document", lambda c: (search(before, typed, c, above, True), search(below, typed, c, under))),
            ("workspace", lambda c: table.continuations(typed, exclude, c, elsewhere) if len(typed) >= BUCKET else 0),
        )
    else:
        previous = before[before.rfind("\n") + 1 :].strip() if before else ""
        finders = ()
        if previous and len(previous) <= MAX_LINE:
            follow = _document_following
            finders = (
                ("document", lambda c: (follow(before, previous, c, above, True), follow(below, previous, c, under))),
                ("workspace", lambda c: table.following(previous, exclude, c, elsewhere)),
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
    if len(votes) > 1:  # a choice: the cursor's neighbours (at a line's start: above the line before it's)
        up = _line_next_to(prefix, line_start, -1) if typed else _line_next_to(before, len(before), -1)
        ranked = _ranked(votes, (above, under, elsewhere), up, _line_next_to(suffix, 0, 1), before, below)
        return [Draft(text, origin[text], votes[text]) for text in ranked[:limit]]
    if votes:
        return [Draft(text, origin[text], count) for text, count in votes.items()]
    if typed:
        near_before, near_below = before[-TAIL_WINDOW:], below[:TAIL_WINDOW]
        budget = MAX_SCAN  # occurrences looked at, all ends together
        for tail in _tails(typed):
            budget -= _document_tails(near_before, tail, votes, budget)
            budget -= _document_tails(near_below, tail, votes, budget)
            if votes or budget <= 0:
                origin = dict.fromkeys(votes, "line-end")
                break
    elif not _rest_of_line(suffix, 0).strip():
        for found in _between(before, below, prefix[line_start:], limit):
            votes[found], origin[found] = 1, "context"
    return [Draft(text, origin[text], count) for text, count in votes.most_common(limit)]


def _ranked(votes: Counter, places: tuple[dict, ...], up: str, down: str, before: str, below: str) -> list[str]:
    """The continuations, the ``RANKED`` most voted first ordered by their score (``ranking_features``
    weighted by ``RANK_WEIGHTS``), then by votes, then by nearness.  Lines of the same start differ by
    what surrounds them: ``return rows`` where the line above is ``rows = ...``, ``return headers``
    after ``headers = ...``; ``for k, v in d.items():`` where ``d`` is in use nearby."""
    order = [text for text, _ in votes.most_common()]
    features = ranking_features(order[:RANKED], votes, places, up, down, before, below)

    def key(text: str) -> tuple[float, int, int]:
        *f, distance = features[text]
        return sum(w * x for w, x in zip(RANK_WEIGHTS, f)), votes[text], -distance

    return sorted(order[:RANKED], key=key, reverse=True) + order[RANKED:]


_last_names: tuple[str, str, frozenset[str]] = ("", "", frozenset())  # keystrokes on one line share them


def _names_near(above: str, under: str) -> frozenset[str]:
    global _last_names
    held = _last_names
    if held[0] == above and held[1] == under:
        return held[2]
    names = frozenset(NAME.findall(above)) | frozenset(NAME.findall(under))
    _last_names = (above, under, names)
    return names


def ranking_features(
    texts: Sequence[str], votes: Counter, places: tuple[dict, ...], up: str, down: str, before: str, below: str
) -> dict[str, tuple[float, ...]]:
    """Per continuation: (alike, log votes, nearness, names in use, log names, same line above, same line
    below) as ``RANK_WEIGHTS`` weighs them, then the distance of its nearest copy (characters; another
    file's come after).  ``alike``: the best ``_likeness`` sum of the lines around one of its
    ``PLACES_LOOKED`` nearest copies to the cursor's (``up``, ``down``); same line above (below): 1 when
    one of those copies has the cursor's line above (below) it exactly; names in use: those found
    ``NAMES_BEFORE``/``NAMES_AFTER`` characters around the cursor (a continuation without names: 1)."""
    up_tokens, down_tokens = _tokens(up), _tokens(down)
    in_use = _names_near(before[-NAMES_BEFORE:], below[:NAMES_AFTER])

    def distance(place: tuple[str, int, int]) -> int:
        text, _, at = place
        return len(text) - at if text is before else at if text is below else FAR + at

    out = {}
    for text in texts:
        spots = heapq.nsmallest(PLACES_LOOKED, [p for held in places for p in held.get(text, ())], key=distance)
        alike = same_up = same_down = 0.0
        if up or down:
            for t, a, b in spots:
                above, under = _line_next_to(t, a, -1), _line_next_to(t, b, 1)
                score = _likeness(_tokens(above), up_tokens) + _likeness(_tokens(under), down_tokens)
                if score > alike:
                    alike = score
                if up and above == up:
                    same_up = 1.0
                if down and under == down:
                    same_down = 1.0
        nearest = distance(spots[0]) if spots else 2 * FAR
        near = 1.0 / (1.0 + nearest / NEAR_CHARS) if nearest < FAR else 0.0
        names = NAME.findall(text)
        used = sum(n in in_use for n in names) / len(names) if names else 1.0
        out[text] = (alike, math.log1p(votes[text]), near, used, math.log1p(len(names)), same_up, same_down, nearest)
    return out


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
