"""Snippets from other files: chunks that share the most identifiers with the code at the cursor.

Each file is cut into overlapping chunks of lines; a chunk is known by the set
of identifiers it holds.  A query (the lines before the cursor) is scored
against chunks through an inverted index, by Jaccard similarity of identifier
sets, ignoring identifiers so common they tell nothing.  Thread-safe: files
are added from an indexing thread while the model thread queries.

Kept compact for big workspaces: identifiers are numbered once, a chunk holds
a tuple of numbers and offsets into its file's text (kept once per file), and
postings are lists from which removed chunks are dropped lazily.  The whole
index is capped (``MAX_CHUNKS``, ``MAX_TEXT_CHARS``); beyond that new files are
not indexed and a file that grows past it keeps its previous version.
"""

from __future__ import annotations

import re
import threading
from array import array
from dataclasses import dataclass

import numpy as np

from celeris_complete.checks.languages import family_of
from celeris_complete.drafts.table import LineTable

CHUNK_LINES = 12
CHUNK_STRIDE = 6
MAX_FILE_CHARS = 1_000_000
MAX_CHUNKS = 60_000  # about 70 MB with the texts
MAX_TEXT_CHARS = 48_000_000
COMMON_FRACTION = 0.02  # identifiers in more chunks than this fraction (and COMMON_MIN) tell nothing
COMMON_MIN = 64
MIN_SCORE = 0.08
NAMES_SLACK = 10_000  # identifiers no chunk holds, tolerated before they are renumbered away
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


@dataclass(frozen=True)
class Snippet:
    source: str  # the file's key (a path or URI)
    line: int  # first line of the chunk, 0-based
    text: str
    score: float


def identifiers(text: str) -> frozenset[str]:
    return frozenset(IDENT.findall(text))


def chunk_spans(text: str) -> list[tuple[int, int, int]]:
    """(first line, start offset, end offset) of overlapping chunks of ``CHUNK_LINES`` lines."""
    starts = [0]
    at = text.find("\n")
    while at >= 0:
        starts.append(at + 1)
        at = text.find("\n", at + 1)
    if starts[-1] == len(text):
        starts.pop()
    n = len(starts)
    if n <= CHUNK_LINES:
        return [(0, 0, len(text))] if text.strip() else []
    out = []
    for first in range(0, n - CHUNK_STRIDE, CHUNK_STRIDE):
        last = first + CHUNK_LINES
        out.append((first, starts[first], starts[last] if last < n else len(text)))
    return out


def chunk_text(text: str) -> list[tuple[int, str]]:
    return [(line, text[a:b]) for line, a, b in chunk_spans(text) if text[a:b].strip()]


class SnippetIndex:
    """Kept in few Python objects: a chunk is a row of numeric arrays (its file's number, first line,
    offsets, identifier count; the chunks of a file are consecutive rows), a posting is an array of
    chunk rows.  Millions of small objects would stay scattered over the allocator's arenas after their
    files are removed, holding the memory of a large folder deleted for the rest of the session."""

    def __init__(self, max_chunks: int = MAX_CHUNKS, max_text_chars: int = MAX_TEXT_CHARS) -> None:
        self.max_chunks = max_chunks
        self.max_text_chars = max_text_chars
        self._lock = threading.Lock()
        self._names: dict[str, int] = {}  # identifier -> its number
        self._texts: dict[str, str] = {}  # source -> its text
        self._by_source: dict[str, tuple[int, int, int]] = {}  # source -> (its number, first row, rows)
        self._sources: list[str | None] = []  # a file's number -> its source
        self._family: dict[str, str | None] = {}  # source -> its language's family (checks/languages.py)
        self._postings: dict[int, array] = {}  # identifier number -> chunk rows (some removed)
        self._rows = self._empty_rows(1024)
        self._next_id = 0  # rows used
        self._live = 0  # rows of files still indexed
        self._dead = 0
        self._chars = 0
        self.version = 0  # bumped by every change, so callers can tell when to query again
        self.lines = LineTable()  # the same files' lines, for drafts

    @staticmethod
    def _empty_rows(n: int) -> dict[str, np.ndarray]:
        return {
            "file": np.full(n, -1, dtype=np.int32),  # -1: removed
            "line": np.zeros(n, dtype=np.int32),
            "a": np.zeros(n, dtype=np.int64),
            "b": np.zeros(n, dtype=np.int64),
            "idents": np.zeros(n, dtype=np.int32),
        }

    def __len__(self) -> int:
        return self._live

    def sources(self) -> list[str]:
        with self._lock:
            return list(self._by_source)

    def set_file(self, source: str, text: str) -> bool:
        """Index ``text`` as the content of ``source`` (replacing what was there); False if refused."""
        if len(text) > MAX_FILE_CHARS or "\x00" in text[:8192]:
            self.remove(source)
            return False
        pieces = [(line, a, b, set(IDENT.findall(text, a, b))) for line, a, b in chunk_spans(text)]
        pieces = [piece for piece in pieces if piece[3]]
        with self._lock:
            old_chunks = self._by_source.get(source, (0, 0, 0))[2]
            old_chars = len(self._texts.get(source, ""))
            full = self._live - old_chunks + len(pieces) > self.max_chunks
            if full or self._chars - old_chars + len(text) > self.max_text_chars:
                return False  # a file already indexed keeps its previous version
            self._remove_locked(source)
            if self._next_id + len(pieces) > len(self._rows["file"]):
                self._compact_locked(room=len(pieces))
            number = len(self._sources)
            self._sources.append(source)
            self._family[source] = family_of(source)
            first = self._next_id
            rows = self._rows
            for row, (line, a, b, names) in enumerate(pieces, start=first):
                rows["file"][row], rows["line"][row], rows["a"][row], rows["b"][row] = number, line, a, b
                rows["idents"][row] = len(names)
                for name in names:
                    key = self._names.setdefault(name, len(self._names))
                    posting = self._postings.get(key)
                    if posting is None:
                        self._postings[key] = posting = array("I")
                    posting.append(row)
            self._next_id += len(pieces)
            self._live += len(pieces)
            self._by_source[source] = (number, first, len(pieces))
            self._texts[source] = text
            self._chars += len(text)
            self.version += 1
        self.lines.set_file(source, text)
        return True

    def remove(self, source: str) -> None:
        with self._lock:
            self._remove_locked(source)
        self.lines.remove(source)

    def _remove_locked(self, source: str) -> None:
        held = self._by_source.pop(source, None)
        if held is None:
            return
        number, first, n = held
        self._rows["file"][first : first + n] = -1
        self._sources[number] = None
        self._family.pop(source, None)
        self._live -= n
        self._dead += n
        self._chars -= len(self._texts.pop(source, ""))
        self.version += 1
        if self._dead > max(1000, self._live):
            self._compact_locked()

    def _compact_locked(self, room: int = 0) -> None:
        """Drop removed rows (the rest renumbered), then postings left empty and identifiers no chunk
        holds any more; the arrays sized for the rows left and ``room`` more."""
        old = self._rows
        kept = np.flatnonzero(old["file"][: self._next_id] >= 0)
        renumber = np.full(self._next_id + 1, -1, dtype=np.int64)
        renumber[kept] = np.arange(len(kept))
        files = [s for s in self._sources if s is not None]
        file_renumber = np.full(len(self._sources), -1, dtype=np.int32)
        self._rows = self._empty_rows(max(1024, 2 * (len(kept) + room)))
        for key in old:
            self._rows[key][: len(kept)] = old[key][kept]
        for i, source in enumerate(files):
            number, first, n = self._by_source[source]
            file_renumber[number] = i
            self._by_source[source] = (i, int(renumber[first]), n)
        self._rows["file"][: len(kept)] = file_renumber[self._rows["file"][: len(kept)]]
        self._sources, self._next_id, self._dead = files, len(kept), 0
        self._by_source, self._texts = dict(self._by_source), dict(self._texts)  # dicts never shrink
        postings: dict[int, array] = {}
        for key, posting in self._postings.items():
            rows = renumber[np.frombuffer(posting, dtype=np.uint32)]
            rows = rows[rows >= 0]
            if len(rows):
                postings[key] = _as_array(rows)
        self._postings = postings
        if len(self._names) > 2 * len(self._postings) + NAMES_SLACK:
            self._renumber_names_locked()

    def _renumber_names_locked(self) -> None:
        """Forget identifiers that no live chunk holds (removed files leave theirs behind otherwise:
        a large folder added and deleted kept its names for the rest of the session)."""
        names = {number: name for name, number in self._names.items() if number in self._postings}
        remap = {old: new for new, old in enumerate(sorted(names))}
        self._names = {names[old]: new for old, new in remap.items()}
        self._postings = {remap[old]: posting for old, posting in self._postings.items()}

    @property
    def identifier_count(self) -> int:
        return len(self._names)

    @property
    def file_count(self) -> int:
        return len(self._by_source)

    def query(self, text: str, exclude: str | None = None, limit: int = 2, family: str | None = None) -> list[Snippet]:
        """The best chunks for ``text`` (at most one per file), best first; ``family``: only from files of
        that language family (None: from any)."""
        names = identifiers(text)
        with self._lock:
            wanted = [self._names[name] for name in names if name in self._names]
            if not wanted:
                return []
            common = max(COMMON_MIN, int(self._live * COMMON_FRACTION))
            postings = [self._postings.get(number) for number in wanted]
            parts = [np.frombuffer(p, dtype=np.uint32) for p in postings if p is not None and len(p) <= common]
            if not parts:
                return []
            rows, shared = np.unique(np.concatenate(parts), return_counts=True)
            files = self._rows["file"][rows]
            keep = files >= 0
            if exclude in self._by_source:
                keep &= files != self._by_source[exclude][0]
            rows, shared, files = rows[keep], shared[keep], files[keep]
            score = shared / (len(names) + self._rows["idents"][rows] - shared)
            good = score >= MIN_SCORE
            rows, score, files = rows[good], score[good], files[good]
            lines = self._rows["line"][rows]
            best: dict[int, tuple[float, int, int]] = {}  # a file's number -> (score, line, row)
            for row, sc, f, line in zip(rows.tolist(), score.tolist(), files.tolist(), lines.tolist()):
                old = best.get(f)
                if old is None or (sc, -line) > (old[0], -old[1]):
                    best[f] = (sc, line, row)
            sources = self._sources
            if family is not None:
                best = {f: held for f, held in best.items() if self._family.get(sources[f]) == family}
            ranked = sorted(best.items(), key=lambda kv: (-kv[1][0], sources[kv[0]], kv[1][1]))[:limit]
            out = []
            for f, (sc, line, row) in ranked:
                a, b = int(self._rows["a"][row]), int(self._rows["b"][row])
                out.append(Snippet(sources[f], line, self._texts[sources[f]][a:b], sc))
        return out


def _as_array(rows: np.ndarray) -> array:
    out = array("I")
    out.frombytes(rows.astype(np.uint32).tobytes())
    return out
