"""JSON-RPC frames read from a byte stream, finding their feet again after a bad header.

pygls's reader trusts ``Content-Length`` completely: a wrong or missing length
loses the framing for good (a JSON body has no line break, so every later
header line starts with the rest of a body and is never recognised again), and
the server then drops every message silently.  This reader recognises a header
at the end of any line, and a length that runs past its message is caught by the
next header turning up inside the body (``Content-Length: N`` followed by a line
break cannot occur in valid JSON) or by a complete JSON value followed by more
bytes.  What is skipped is logged on one line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from threading import Event
from typing import BinaryIO

log = logging.getLogger("celeris.lsp")

HEADER = re.compile(rb"content-length:[ \t]*(\d{1,15})[ \t]*\r?\n", re.IGNORECASE)
CHUNK = 1 << 16
MAX_LINE = 1 << 20  # a longer line without a break is junk, dropped but for its tail (a header may start there)
OVERLAP = 64  # bytes of the body searched again for a header split between two reads


class FrameReader:
    """Message bodies from ``stream``; blocking; ``next_body`` is None at the end of the stream."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.buffer = bytearray()
        self.eof = False
        self.skipped_total = 0  # bytes dropped outside any message

    def _fill(self) -> bool:
        if self.eof:
            return False
        read = getattr(self.stream, "read1", self.stream.read)
        data = read(CHUNK)
        if not data:
            self.eof = True
            return False
        self.buffer += data
        return True

    def _readline(self) -> bytes:
        """The next line with its break, a long junk stretch, or what is left at the end of the stream."""
        searched = 0
        while True:
            end = self.buffer.find(b"\n", searched)
            if end >= 0:
                line = bytes(self.buffer[: end + 1])
                del self.buffer[: end + 1]
                return line
            searched = len(self.buffer)
            if len(self.buffer) > MAX_LINE:
                line = bytes(self.buffer[:-OVERLAP])
                del self.buffer[:-OVERLAP]
                return line
            if not self._fill():
                line = bytes(self.buffer)
                self.buffer.clear()
                return line

    def _headers(self) -> int | None:
        """The length announced by the next header block, or None at the end of the stream."""
        length, skipped = None, 0
        while True:
            line = self._readline()
            if not line:
                if skipped:
                    log.warning("the stream ended after %d bytes that were not a message", skipped)
                return None
            match = HEADER.search(line)
            if match and match.end() == len(line):
                skipped += match.start()
                length = int(match.group(1))
            elif not line.strip():
                if length is not None:
                    if skipped:
                        self.skipped_total += skipped
                        log.warning("framing lost: skipped %d bytes before the next Content-Length header", skipped)
                    return length
            elif length is None or b":" not in line:
                skipped += len(line)  # not a header (other headers, Content-Type, are ignored)

    def _body(self, length: int) -> bytes | None:
        """``length`` bytes, or fewer when the next header turns up in them (the length was wrong)."""
        body = bytearray()
        while len(body) < length:
            if not self.buffer and not self._fill():
                log.warning("the stream ended inside a message (%d of %d bytes)", len(body), length)
                return None
            searched = max(0, len(body) - OVERLAP)
            take = min(len(self.buffer), length - len(body))
            body += self.buffer[:take]
            del self.buffer[:take]
            match = HEADER.search(body, searched)
            if match:
                self.buffer[:0] = body[match.start() :]
                log.warning(
                    "framing lost: Content-Length %d ran into the next header after %d bytes", length, match.start()
                )
                return bytes(body[: match.start()])
        return self._trim(bytes(body))

    def _trim(self, body: bytes) -> bytes:
        """A body that holds a complete JSON value and then more gives the rest back to the stream (a length
        too long by less than a header).  Only bodies that do not end like a JSON object are looked at."""
        if body.rstrip()[-1:] in (b"}", b"]"):
            return body
        text = body.decode("utf-8", "surrogateescape")
        start = len(text) - len(text.lstrip())
        try:
            _, end = json.JSONDecoder().raw_decode(text, start)
        except (ValueError, RecursionError):
            return body
        if not text[end:].strip():
            return body
        cut = len(text[:end].encode("utf-8", "surrogateescape"))
        self.buffer[:0] = body[cut:]
        log.warning("framing lost: Content-Length %d was longer than its message (%d bytes)", len(body), cut)
        return body[:cut]

    def next_body(self) -> bytes | None:
        length = self._headers()
        if length is None:
            return None
        return self._body(length)


async def serve_frames(reader: FrameReader, handle: Callable[[bytes], None], stop: Event) -> None:
    """Hand each body to ``handle`` on the event loop until the stream ends or ``stop`` is set.  The reads
    run on a thread of their own: on a shared pool, the next read was often submitted before the worker
    that did the last one counted itself idle, and the pool started another thread, up to its limit."""
    loop = asyncio.get_running_loop()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="celeris-stdin")
    try:
        while not stop.is_set():
            body = await loop.run_in_executor(pool, reader.next_body)
            if body is None:
                log.info("the client closed the connection")
                return
            try:
                handle(body)
            except Exception:
                log.exception("a message could not be handled")
    finally:
        pool.shutdown(wait=False)
