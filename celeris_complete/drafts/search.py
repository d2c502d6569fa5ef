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
from collections import Counter
from collections.abc import Sequence

from celeris_complete.drafts.table import (
    BUCKET,
    MAX_LINE,
    MAX_SCAN,
    PLACES_LOOKED,
    Draft,
    LineTable,
    _note,
)

MIN_KEY = 2  # non-blank characters typed on the line before a draft is looked for


DOCUMENT_WEIGHT = 2  # a line in the document counts as much as this many lines elsewhere


MIN_TAIL = 3  # non-blank characters of the line's end that must recur for a draft from it
TAIL_WINDOW = 50_000  # characters on either side of the cursor searched for the line's end
CONTEXT_WINDOW = 20_000  # characters on either side of the cursor searched for a line between alike lines
CONTEXT_LINES = 600  # and lines (a file of short lines would hold thousands in those characters)
MIN_CONTEXT = 1.0  # how alike (0-2) the lines around a line must be to those around the cursor to draft it
TOKEN_START = re.compile(r"\w+|[^\w\s]")  # where a line's end may begin


RANKED = 32  # continuations ranked by the lines around their copies (the rest by votes)


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
    family: str | None = None,
) -> list[Draft]:
    """Up to ``limit`` drafts, distinct: ``first`` (cheaper sources: the typing cache, the previous
    completion), then the continuations as ``find_draft`` ranks them; ``family``: the workspace's lines
    only from files of the document's language family (a Go file is no draft for a Python one)."""
    out: list[Draft] = []
    for d in first:
        if d.text and all(d.text != o.text for o in out):
            out.append(d)
    if len(out) >= limit:
        return out[:limit]
    for d in _voted(prefix, suffix, table, exclude, limit, family):
        if all(d.text != o.text for o in out):
            out.append(d)
    return out[:limit]


def _voted(
    prefix: str, suffix: str, table: LineTable | None, exclude: str | None, limit: int, family: str | None = None
) -> list[Draft]:
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
            (
                "workspace",
                lambda c: table.continuations(typed, exclude, c, elsewhere, family) if len(typed) >= BUCKET else 0,
            ),
        )
    else:
        previous = before[before.rfind("\n") + 1 :].strip() if before else ""
        finders = ()
        if previous and len(previous) <= MAX_LINE:
            follow = _document_following
            finders = (
                ("document", lambda c: (follow(before, previous, c, above, True), follow(below, previous, c, under))),
                ("workspace", lambda c: table.following(previous, exclude, c, elsewhere, family)),
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
