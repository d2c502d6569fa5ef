"""A text document that stays fast when it is tens of megabytes long.

pygls's ``TextDocument`` splits the whole text into lines for every change
and every position lookup, which costs over 100 ms per keystroke in a 20 MB
file, on the message loop.  This one keeps the offsets where lines start and
updates them around each edit, so a change or a lookup costs a copy of the
text at most.  Lines end at ``\\n``, ``\\r\\n`` or ``\\r``, as the LSP says
(``str.splitlines`` also breaks at form feeds and other characters).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from lsprotocol import types
from pygls.workspace.text_document import TextDocument
from pygls.workspace.workspace import Workspace

from celeris_complete.edits.history import EditHistory

LINE_BREAK = re.compile(r"\r\n|\r|\n")


def line_starts(text: str, base: int = 0) -> np.ndarray:
    """Offsets (plus ``base``) just after each line break in ``text``."""
    if len(text) < 65536:
        return np.fromiter((base + m.end() for m in LINE_BREAK.finditer(text)), dtype=np.int64)
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    lf = codes == 10
    cr = codes == 13
    cr[:-1] &= ~lf[1:]  # the \r of a \r\n pair ends no line; its \n does
    return np.flatnonzero(lf | cr) + (base + 1)


class Lines(Sequence[str]):
    """The document's lines (with their endings), cut from the text only when asked for."""

    def __init__(self, text: str, starts: np.ndarray) -> None:
        self.text = text
        self.starts = starts  # starts[0] == 0; a last, empty line after a final break is not a line

    def __len__(self) -> int:
        n = len(self.starts)
        return n - 1 if self.starts[-1] == len(self.text) else n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        end = int(self.starts[i + 1]) if i + 1 < len(self.starts) else len(self.text)
        return self.text[int(self.starts[i]) : end]


class FastDocument(TextDocument):
    _starts: np.ndarray | None = None
    history: EditHistory | None = None  # the user's recent edits (celeris/nextEdit), from the first change

    @property
    def starts(self) -> np.ndarray:
        if self._starts is None:
            self._starts = np.concatenate(([0], line_starts(self.source)))
        return self._starts

    @property
    def lines(self) -> Lines:
        return Lines(self.source, self.starts)

    def offset_at_server_position(self, server_position) -> int:
        starts = self.starts
        row = min(server_position.line, len(starts) - 1)
        return min(int(starts[row]) + server_position.character, len(self.source))

    def offset_at_position(self, client_position: types.Position) -> int:
        pos = self._position_codec.position_from_client_units(self.lines, client_position)
        return self.offset_at_server_position(pos)

    def line_of_offset(self, offset: int) -> int:
        return int(np.searchsorted(self.starts, offset, side="right")) - 1

    def _apply_full_change(self, change) -> None:
        old, starts = self.source, self.starts
        super()._apply_full_change(change)
        self._starts = None
        new = self.source
        p = shared_start(old, new)
        s = shared_start(old[p:][::-1], new[p:][::-1]) if len(old) - p < 1_000_000 else 0
        self.record(Lines(old, starts), p, len(old) - s, new[p : len(new) - s])

    def record(self, old: Lines, start: int, end: int, text: str) -> None:
        """Keep the change (offsets ``start``, ``end`` of the text before it, ``old``) in the history."""
        if self.history is None:
            self.history = EditHistory()
        first = int(np.searchsorted(old.starts, start, side="right")) - 1
        last = int(np.searchsorted(old.starts, end, side="right")) - 1
        at_line_start = end == int(old.starts[last]) and (start == int(old.starts[first]) or text.endswith("\n"))
        self.history.change(old, first, last, text, whole_lines=at_line_start and (not text or text.endswith("\n")))

    def _apply_none_change(self, change) -> None:
        super()._apply_none_change(change)
        self._starts = None

    def _apply_incremental_change(self, change: types.TextDocumentContentChangePartial) -> None:
        old = self.source
        starts = self.starts
        lines = Lines(old, starts)
        # A reversed range is read the other way round, as vscode-languageserver-textdocument does.
        start, end = sorted((self.offset_in(lines, change.range.start), self.offset_in(lines, change.range.end)))
        new = old[:start] + change.text + old[end:]
        delta = len(change.text) - (end - start)
        # Rescan the lines the edit touches (one character either side keeps \r\n pairs whole).
        first = max(0, int(np.searchsorted(starts, start, side="right")) - 2)
        lo = int(starts[first])
        hi_old = min(len(old), end + 1)
        if hi_old < len(old) and old[hi_old - 1] == "\r" and old[hi_old] == "\n":
            hi_old += 1  # never end the window inside a \r\n pair
        k = int(np.searchsorted(starts, hi_old, side="right"))  # starts[k:] lie after the rescanned part
        hi_new = hi_old + delta
        rescanned = line_starts(new[lo:hi_new], lo)
        self.record(lines, start, end, change.text)
        self._source = new
        self._starts = np.concatenate((starts[: first + 1], rescanned, starts[k:] + delta))
        if 0 < hi_new < len(new) and new[hi_new - 1 : hi_new + 1] == "\r\n" and hi_new in rescanned:
            self._starts = None  # a \r\n pair was split by the scan window: recount (rare)

    def offset_in(self, lines: Lines, position: types.Position) -> int:
        """Past the end of a line means its end, past the last line the end of the text (as the LSP
        says; pygls moves such a column to one before the line's end)."""
        if position.line >= len(lines):
            return len(lines.text)
        line = lines[position.line]
        content = line.rstrip("\r\n")
        if position.character >= self._position_codec.client_num_units(content):
            return int(lines.starts[position.line]) + len(content)
        server = self._position_codec.position_from_client_units(lines, position)
        return int(lines.starts[server.line]) + server.character


def shared_start(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b`` (compared in blocks: fast on megabytes)."""
    n, step = 0, 1 << 16
    limit = min(len(a), len(b))
    while n < limit:
        m = min(limit, n + step)
        if a[n:m] == b[n:m]:
            n = m
            continue
        lo, hi = n, m  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if a[lo:mid] == b[lo:mid]:
                lo = mid
            else:
                hi = mid
        return lo
    return n


def use_fast_documents(workspace: Workspace) -> None:
    """Make ``workspace`` create ``FastDocument``s for the documents opened from now on."""

    def create(doc_uri, source=None, version=None, language_id=None) -> TextDocument:
        return FastDocument(
            doc_uri,
            source=source,
            version=version,
            language_id=language_id,
            sync_kind=workspace._sync_kind,
            position_codec=workspace._position_codec,
        )

    workspace._create_text_document = create
