"""Training data: the corpus pre-tokenized into a memory-mapped array, and infill samples cut from it.

A sample is a context of exactly ``context_len`` tokens laid out as
``[SUF] suffix [PRE] prefix`` and a canvas of ``canvas`` slots holding the
span (the hole) followed by end-of-span tokens.  Documents are joined with a
FILE token; the engine adds the same token where a window reaches the start or
end of a file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from celeris_complete.errors import CelerisError
from celeris_complete.model.tokenizer import CodeTokenizer
from celeris_complete.training.corpus import CorpusFile


def pretokenize(files: list[CorpusFile], tok: CodeTokenizer, path: Path) -> int:
    """Write the files' tokens, FILE-separated, as uint16 to ``path``; returns the token count."""
    assert tok.vocab_size < 2**16
    chunks = [np.array([tok.file_id], dtype=np.uint16)]
    for i in range(0, len(files), 256):  # in groups: Python lists of every token of a large corpus are GBs
        for ids in tok.encode_batch([f.text for f in files[i : i + 256]]):
            chunks.append(np.asarray(ids, dtype=np.uint16))
            chunks.append(np.array([tok.file_id], dtype=np.uint16))
    arr = np.concatenate(chunks)
    tmp = Path(str(path) + ".tmp")
    arr.tofile(tmp)
    tmp.replace(path)
    return int(arr.size)


def load_tokens(path: Path) -> np.ndarray:
    return np.memmap(path, dtype=np.uint16, mode="r")


@dataclass
class Batch:
    context: np.ndarray  # (B, L) int64
    canvas: np.ndarray  # (B, C) int64: span tokens, then end-of-span
    span_len: np.ndarray  # (B,) tokens of the span inside the canvas (<= C)


class SpanSampler:
    """Cuts infill samples out of a token stream. About half the spans are line-aligned.

    ``rest_of_line`` is the share of spans that start inside a line, after at least one
    token of its text, and run to the line's end: the cursor mid-line, as an editor
    asks for the rest of the line.  Random spans end there only by chance.
    """

    def __init__(
        self, tokens: np.ndarray, tok: CodeTokenizer, context_len: int, max_suffix: int, rest_of_line: float = 0.0
    ) -> None:
        if not 0.0 <= rest_of_line <= 1.0:
            raise CelerisError(f"rest_of_line is a share of the spans, 0 to 1, not {rest_of_line}")
        self.tokens = tokens
        self.tok = tok
        self.context_len = context_len
        self.max_suffix = max_suffix
        self.rest_of_line = rest_of_line
        is_newline = np.zeros(tok.vocab_size, dtype=bool)
        is_blank = np.zeros(tok.vocab_size, dtype=bool)
        for i, b in enumerate(tok.token_bytes):
            if b and b.strip(b"\r\n") == b"":
                is_newline[i] = True
            elif b and b.strip(b" \t") == b"":
                is_blank[i] = True
        self.is_blank = is_blank
        self.newlines = np.flatnonzero(is_newline[np.asarray(tokens)])
        self.file_id = tok.file_id
        needed = context_len + max_suffix + 64 * 8 + 16
        if len(tokens) < needed:
            raise CelerisError(
                f"a token stream of {len(tokens)} tokens is too short for {context_len}-token contexts "
                f"(at least {needed} needed): give a larger corpus"
            )

    def _span(self, rng: np.random.Generator, canvas: int) -> tuple[int, int]:
        """(start, end) of a span whose context fits inside the stream."""
        n = len(self.tokens)
        lo, hi = self.context_len + 1, n - self.max_suffix - canvas * 8 - 2
        if self.rest_of_line and len(self.newlines) > 16 and rng.random() < self.rest_of_line:
            for _ in range(64):  # blank and one-token lines have no inside
                span = self._rest_of_line(rng)
                if span is not None and span[0] >= lo and span[1] + self.max_suffix + 2 <= n:
                    return span
        if rng.random() < 0.5 and len(self.newlines) > 16:
            k = int(rng.integers(0, len(self.newlines) - 8))
            lines = 1 if rng.random() < 0.5 else int(rng.integers(2, 8))
            start = int(self.newlines[k]) + 1
            if start < len(self.tokens) and self.is_blank[self.tokens[start]] and rng.random() < 0.75:
                start += 1  # the cursor after the indentation, as editors leave it
            end = int(self.newlines[k + lines])
            if rng.random() < 0.3:
                end += 1  # the span includes its final newline
            end = max(end, start)
        else:
            start = int(rng.integers(lo, max(lo + 1, hi)))
            length = 0 if rng.random() < 0.05 else int(rng.integers(1, canvas + 1))
            end = start + length
        if start < lo or end + self.max_suffix + 2 > n:
            return self._span(rng, canvas)
        return start, end

    def _rest_of_line(self, rng: np.random.Generator) -> tuple[int, int] | None:
        """A cursor inside a random line, after its indentation and at least one token; None if too short."""
        k = int(rng.integers(0, len(self.newlines) - 1))
        first, end = int(self.newlines[k]) + 1, int(self.newlines[k + 1])
        while first < end and self.is_blank[self.tokens[first]]:
            first += 1
        if end - first < 2 or self.file_id in self.tokens[first:end]:
            return None
        start = int(rng.integers(first + 1, end))
        if rng.random() < 0.3:
            end += 1  # the span includes its final newline
        return start, end

    def sample(self, rng: np.random.Generator, batch: int, canvas: int) -> Batch:
        L = self.context_len
        ctx = np.empty((batch, L), dtype=np.int64)
        can = np.full((batch, canvas), self.tok.eos_id, dtype=np.int64)
        span_len = np.empty(batch, dtype=np.int64)
        for b in range(batch):
            start, end = self._span(rng, canvas)
            span = np.asarray(self.tokens[start : min(end, start + canvas)], dtype=np.int64)
            cut = np.flatnonzero(span == self.file_id)
            if cut.size:  # a span never runs past the end of its file
                span = span[: cut[0]]
            can[b, : len(span)] = span
            span_len[b] = len(span)
            s = 0 if rng.random() < 0.1 else int(rng.integers(0, self.max_suffix + 1))
            p = L - 2 - s
            ctx[b, 0] = self.tok.suf_id
            ctx[b, 1 : 1 + s] = self.tokens[end : end + s]
            ctx[b, 1 + s] = self.tok.pre_id
            ctx[b, 2 + s :] = self.tokens[start - p : start]
        return Batch(ctx, can, span_len)
