"""Snippets from other files: chunks that share the most identifiers with the code at the cursor.

Each file is cut into overlapping chunks of lines; a chunk is known by the set
of identifiers it holds.  A query (the lines before the cursor) is scored
against chunks through an inverted index, by Jaccard similarity of identifier
sets, ignoring identifiers so common they tell nothing.  Thread-safe: files
are added from an indexing thread while the model thread queries.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from dataclasses import dataclass

CHUNK_LINES = 12
CHUNK_STRIDE = 6
MAX_FILE_CHARS = 1_000_000
MAX_CHUNKS = 200_000  # about 16k files of ordinary size: beyond this, new files are not indexed
COMMON_FRACTION = 0.05  # identifiers in more chunks than this fraction are ignored by queries
MIN_SCORE = 0.08
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


@dataclass(frozen=True)
class Snippet:
    source: str  # the file's key (a path or URI)
    line: int  # first line of the chunk, 0-based
    text: str
    score: float


@dataclass(frozen=True)
class _Chunk:
    source: str
    line: int
    text: str
    idents: frozenset[str]


def identifiers(text: str) -> frozenset[str]:
    return frozenset(IDENT.findall(text))


def chunk_text(text: str) -> list[tuple[int, str]]:
    """(first line, text) of overlapping chunks of ``CHUNK_LINES`` lines."""
    lines = text.splitlines(keepends=True)
    if len(lines) <= CHUNK_LINES:
        return [(0, text)] if text.strip() else []
    out = []
    for start in range(0, len(lines) - CHUNK_STRIDE, CHUNK_STRIDE):
        body = "".join(lines[start : start + CHUNK_LINES])
        if body.strip():
            out.append((start, body))
    return out


class SnippetIndex:
    def __init__(self, max_chunks: int = MAX_CHUNKS) -> None:
        self.max_chunks = max_chunks
        self._lock = threading.Lock()
        self._chunks: dict[int, _Chunk] = {}
        self._by_source: dict[str, list[int]] = {}
        self._postings: dict[str, set[int]] = {}
        self._next_id = 0
        self.version = 0  # bumped by every change, so callers can tell when to query again

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
        pieces = [(line, body, identifiers(body)) for line, body in chunk_text(text)]
        with self._lock:
            self._remove_locked(source)
            if len(self._chunks) + len(pieces) > self.max_chunks:
                return False
            ids = []
            for line, body, idents in pieces:
                if not idents:
                    continue
                cid = self._next_id
                self._next_id += 1
                self._chunks[cid] = _Chunk(source, line, body, idents)
                for name in idents:
                    self._postings.setdefault(name, set()).add(cid)
                ids.append(cid)
            self._by_source[source] = ids
            self.version += 1
        return True

    def remove(self, source: str) -> None:
        with self._lock:
            self._remove_locked(source)

    def _remove_locked(self, source: str) -> None:
        ids = self._by_source.pop(source, None)
        if ids is None:
            return
        for cid in ids:
            chunk = self._chunks.pop(cid)
            for name in chunk.idents:
                posting = self._postings.get(name)
                if posting is not None:
                    posting.discard(cid)
                    if not posting:
                        del self._postings[name]
        self.version += 1

    def query(self, text: str, exclude: str | None = None, limit: int = 2) -> list[Snippet]:
        """The best chunks for ``text`` (at most one per file), best first."""
        wanted = identifiers(text)
        if not wanted:
            return []
        with self._lock:
            common = max(8, int(len(self._chunks) * COMMON_FRACTION))
            shared: Counter[int] = Counter()
            for name in wanted:
                posting = self._postings.get(name)
                if posting is None:
                    continue
                if len(posting) > common:
                    continue
                shared.update(posting)
            best: dict[str, Snippet] = {}
            for cid, n in shared.items():
                chunk = self._chunks[cid]
                if chunk.source == exclude:
                    continue
                score = n / (len(wanted) + len(chunk.idents) - n)
                if score < MIN_SCORE:
                    continue
                old = best.get(chunk.source)
                if old is None or score > old.score or (score == old.score and chunk.line < old.line):
                    best[chunk.source] = Snippet(chunk.source, chunk.line, chunk.text, score)
        ranked = sorted(best.values(), key=lambda s: (-s.score, s.source, s.line))
        return ranked[:limit]
