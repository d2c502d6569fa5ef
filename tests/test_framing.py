"""The stdio reader finds the next message after a wrong or missing Content-Length header."""

from __future__ import annotations

import io
import json

import pytest

from celeris_lsp.framing import FrameReader


def frame(obj, length_delta: int = 0, header: bytes = b"Content-Length: %d\r\n\r\n") -> bytes:
    body = json.dumps(obj).encode()
    return header % (len(body) + length_delta) + body if b"%d" in header else header + body


def bodies(data: bytes, chunk: int | None = None) -> list:
    """Every message read from ``data`` (fed ``chunk`` bytes at a time when given), as parsed JSON or raw."""

    class Trickle(io.RawIOBase):
        def __init__(self) -> None:
            self.data = data

        def readable(self) -> bool:
            return True

        def read1(self, n: int = -1) -> bytes:
            out, self.data = self.data[: min(n, chunk)], self.data[min(n, chunk) :]
            return out

        read = read1

    reader = FrameReader(Trickle() if chunk else io.BytesIO(data))
    out = []
    while (body := reader.next_body()) is not None:
        try:
            out.append(json.loads(body))
        except ValueError:
            out.append(body)
    return out


A, B, C = {"id": 1, "method": "a"}, {"id": 2, "method": "b"}, {"id": 3, "method": "c"}


@pytest.mark.parametrize("chunk", [None, 1, 7])
def test_well_formed_frames_and_other_headers(chunk):
    data = frame(A) + frame(B, header=b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n") + frame(C)
    assert bodies(data, chunk) == [A, B, C]


@pytest.mark.parametrize("chunk", [None, 3])
@pytest.mark.parametrize("delta", [-10, -1])
def test_a_length_too_short_loses_one_message_only(delta, chunk, caplog):
    out = bodies(frame(A) + frame(B, delta) + frame(C), chunk)
    assert out[0] == A and out[-1] == C and B not in out
    assert "skipped" in caplog.text


@pytest.mark.parametrize("chunk", [None, 5])
@pytest.mark.parametrize("delta", [1, 5, 21, 30, 10**9])
def test_a_length_too_long_gives_the_next_message_back(delta, chunk, caplog):
    # Too long by less than a header (the JSON value ends early), by more (the next header turns up inside),
    # or by far more than will ever come: the message and the next both arrive, nothing waits.
    assert bodies(frame(A) + frame(B, delta) + frame(C), chunk) == [A, B, C]
    assert "framing lost" in caplog.text


@pytest.mark.parametrize(
    "junk",
    [
        b"garbage without a line break",
        b"Content-Length: 12\r\n",  # a header block that never ends...
        b"Content-Lenght: 5\r\n\r\n{}",
        b"Content-Length: -4\r\n\r\n{}",
        b"Content-Length: \r\n\r\n{}",
        b'{"jsonrpc": "2.0", "id": 9, "method": "x"}',  # a body without its header
        b"\r\n\r\n\n",
    ],
)
def test_missing_or_broken_headers_resynchronise(junk):
    out = bodies(frame(A) + junk + frame(B) + frame(C))
    assert out[0] == A and out[-2:] == [B, C]


def test_a_header_with_a_lone_newline_and_other_case():
    assert bodies(b"content-length: 14\n\n" + json.dumps({"id": 1}).encode() + frame(B)) == [{"id": 1}, B]


def test_the_end_of_the_stream_inside_a_message_is_the_end(caplog):
    assert bodies(frame(A) + frame(B)[:-3]) == [A]
    assert "ended inside a message" in caplog.text


def test_a_zero_length_gives_an_empty_body():
    assert bodies(b"Content-Length: 0\r\n\r\n" + frame(A)) == [b"", A]
