"""A document's recent edits, kept as the lines each one touched: their text before, and where they
are now (their text after is read from the document).  Typing is coalesced: a change on the lines of
the latest edit (or next to them) extends it, so a name typed key by key is one edit.  Bounded: at most
``MAX_EDITS`` edits, and an edit whose lines grow past ``MAX_CHARS`` is kept as ``big`` (too large to be
a pattern; a paste) without its text."""

from __future__ import annotations

from dataclasses import dataclass

MAX_EDITS = 16
MAX_CHARS = 4_000  # before or after: an edit over this is a paste or a rewrite, not a pattern
MAX_LINES = 40


@dataclass
class Edit:
    """Lines ``[line, line + count)`` of the document as it is now were ``before`` (whole lines, each
    with its line break, the last one without where it ended the text)."""

    line: int
    count: int
    before: str
    big: bool = False


class EditHistory:
    def __init__(self, max_edits: int = MAX_EDITS) -> None:
        self.max_edits = max_edits
        self.edits: list[Edit] = []

    def clear(self) -> None:
        self.edits.clear()

    def record(self, old_lines: list[str], first: int, last: int, new_text_lines: int) -> None:
        """A change replaced lines ``first..last`` (inclusive) of the document before it, ``old_lines``
        (all of them, each with its break), by ``new_text_lines`` lines."""
        delta = new_text_lines - (last - first + 1)
        latest = self.edits[-1] if self.edits else None
        if latest is not None and first <= latest.line + latest.count and last >= latest.line - 1:
            lo, hi = min(first, latest.line), max(last, latest.line + latest.count - 1)
            if latest.big or hi - lo + 1 > MAX_LINES or hi - lo + 1 + delta > MAX_LINES:
                before, big = "", True
            else:
                before = "".join(old_lines[lo : latest.line]) + latest.before
                before += "".join(old_lines[latest.line + latest.count : hi + 1])
                big = len(before) > MAX_CHARS
            latest.line, latest.count, latest.before, latest.big = lo, hi - lo + 1 + delta, "" if big else before, big
            self._shift(latest, last, delta)
            return
        big = last - first + 1 > MAX_LINES or new_text_lines > MAX_LINES
        before = "" if big else "".join(old_lines[first : last + 1])
        big = big or len(before) > MAX_CHARS
        edit = Edit(first, last - first + 1 + delta, "" if big else before, big)
        self._shift(edit, last, delta)
        self.edits.append(edit)
        del self.edits[: -self.max_edits]

    def _shift(self, changed: Edit, last: int, delta: int) -> None:
        """Earlier edits below the change move with it; one the change overlapped is forgotten (its
        lines are no longer what it says)."""
        keep = []
        for e in self.edits:
            if e is changed:
                keep.append(e)
            elif e.line > last:
                e.line += delta
                keep.append(e)
            elif e.line + e.count - 1 < changed.line:
                keep.append(e)
        self.edits = keep

    def change(self, old_lines, start_line: int, end_line: int, text: str, whole_lines: bool = False) -> None:
        """A change replaced the text from a position on ``start_line`` to one on ``end_line`` of the
        document before it (``old_lines``) by ``text``; ``whole_lines``: it ended at the start of
        ``end_line`` and ``text`` is empty or ends a line, so ``end_line`` itself is untouched."""
        end_line = max(start_line, end_line)  # (past the last line: an empty line of its own)
        added = text.count("\n") + text.count("\r") - text.count("\r\n")
        if whole_lines and end_line > start_line:
            self.record(old_lines, start_line, end_line - 1, added)
        else:
            self.record(old_lines, start_line, end_line, 1 + added)

    def latest(self, lines: list[str] | None = None) -> tuple[Edit, str] | None:
        """The latest edit that is not big, and its lines' text now (from ``lines``, the document's),
        unless it changed nothing (typed and undone) or is too large."""
        if not self.edits or lines is None:
            return None
        e = self.edits[-1]
        if e.big:
            return None
        after = "".join(lines[e.line : e.line + e.count])
        if after == e.before or len(after) > MAX_CHARS or e.count > MAX_LINES:
            return None
        return e, after
