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
from collections import Counter
from dataclasses import dataclass

from .drafts import LineTable

CHUNK_LINES = 12
CHUNK_STRIDE = 6
MAX_FILE_CHARS = 1_000_000
MAX_CHUNKS = 60_000  # about 70 MB with the texts
MAX_TEXT_CHARS = 48_000_000
COMMON_FRACTION = 0.02  # identifiers in more chunks than this fraction (and COMMON_MIN) tell nothing
COMMON_MIN = 64
MIN_SCORE = 0.08
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
    def __init__(self, max_chunks: int = MAX_CHUNKS, max_text_chars: int = MAX_TEXT_CHARS) -> None:
        self.max_chunks = max_chunks
        self.max_text_chars = max_text_chars
        self._lock = threading.Lock()
        self._names: dict[str, int] = {}  # identifier -> its number
        self._texts: dict[str, str] = {}  # source -> its text
        self._chunks: dict[int, tuple[str, int, int, int, tuple[int, ...]]] = {}  # source, line, a, b, idents
        self._by_source: dict[str, list[int]] = {}
        self._postings: dict[int, list[int]] = {}  # identifier number -> chunk ids (some removed)
        self._dead = 0
        self._chars = 0
        self._next_id = 0
        self.version = 0  # bumped by every change, so callers can tell when to query again
        self.lines = LineTable()  # the same files' lines, for drafts

    def __len__(self) -> int:
        return len(self._chunks)

    def sources(self) -> list[str]:
        with self._lock:
            return list(self._by_source)

    def set_file(self, source: str, text: str) -> bool:
        """Index ``text`` as the content of ``source`` (replacing what was there); False if refused."""
        if len(text) > MAX_FILE_CHARS or "\x00" in text[:8192]:
            self.remove(source)
            return False
        pieces = [(line, a, b, IDENT.findall(text, a, b)) for line, a, b in chunk_spans(text)]
        with self._lock:
            old_chunks = len(self._by_source.get(source, ()))
            old_chars = len(self._texts.get(source, ""))
            full = len(self._chunks) - old_chunks + len(pieces) > self.max_chunks
            if full or self._chars - old_chars + len(text) > self.max_text_chars:
                return False  # a file already indexed keeps its previous version
            self._remove_locked(source)
            ids = []
            for line, a, b, names in pieces:
                if not names:
                    continue
                numbers = tuple({self._names.setdefault(name, len(self._names)) for name in names})
                cid = self._next_id
                self._next_id += 1
                self._chunks[cid] = (source, line, a, b, numbers)
                for number in numbers:
                    self._postings.setdefault(number, []).append(cid)
                ids.append(cid)
            self._by_source[source] = ids
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
        ids = self._by_source.pop(source, None)
        if ids is None:
            return
        for cid in ids:
            del self._chunks[cid]
        self._dead += len(ids)
        self._chars -= len(self._texts.pop(source, ""))
        self.version += 1
        if self._dead > max(1000, len(self._chunks)):
            self._compact_locked()

    def _compact_locked(self) -> None:
        live = self._chunks
        for number, posting in list(self._postings.items()):
            kept = [cid for cid in posting if cid in live]
            if kept:
                self._postings[number] = kept
            else:
                del self._postings[number]
        self._dead = 0

    def query(self, text: str, exclude: str | None = None, limit: int = 2) -> list[Snippet]:
        """The best chunks for ``text`` (at most one per file), best first."""
        names = identifiers(text)
        with self._lock:
            wanted = [self._names[name] for name in names if name in self._names]
            if not wanted:
                return []
            common = max(COMMON_MIN, int(len(self._chunks) * COMMON_FRACTION))
            shared: Counter[int] = Counter()
            for number in wanted:
                posting = self._postings.get(number)
                if posting is not None and len(posting) <= common:
                    shared.update(posting)
            best: dict[str, tuple[float, int, int]] = {}
            for cid, n in shared.items():
                chunk = self._chunks.get(cid)
                if chunk is None or chunk[0] == exclude:
                    continue
                score = n / (len(names) + len(chunk[4]) - n)
                if score < MIN_SCORE:
                    continue
                old = best.get(chunk[0])
                if old is None or (score, -chunk[1]) > (old[0], -self._chunks[old[2]][1]):
                    best[chunk[0]] = (score, chunk[1], cid)
            ranked = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[0], kv[1][1]))[:limit]
            out = []
            for source, (score, line, cid) in ranked:
                _, _, a, b, _ = self._chunks[cid]
                out.append(Snippet(source, line, self._texts[source][a:b], score))
        return out
