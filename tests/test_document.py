"""The language server's document: the same text as pygls's after any edit, without re-splitting the text."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec
from pygls.workspace.text_document import TextDocument

from celeris_lsp.document import LINE_BREAK, FastDocument, Lines, line_starts

ALPHABET = st.sampled_from(["a", "b", " ", "\n", "\r", "\r\n", "é", "漢", "😋", "\t"])
TEXT = st.lists(ALPHABET, max_size=40).map("".join)


def edit(line: int, char: int, end_line: int, end_char: int, text: str):
    return types.TextDocumentContentChangePartial(
        range=types.Range(types.Position(line, char), types.Position(end_line, end_char)), text=text
    )


@settings(max_examples=400, deadline=None)
@given(
    TEXT,
    st.lists(
        st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(0, 2), st.integers(0, 6), TEXT),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from([types.PositionEncodingKind.Utf16, types.PositionEncodingKind.Utf8]),
)
def test_edits_give_the_same_text_as_pygls(text, edits, encoding):
    codec = PositionCodec(encoding)
    fast = FastDocument("file:///a.py", text, position_codec=codec)
    reference = TextDocument("file:///a.py", text, position_codec=codec)
    for line, char, more_lines, end_char, new in edits:
        n = len(reference.lines)
        line = min(line, max(0, n - 1))
        end_line = min(line + more_lines, max(0, n - 1))
        units = [codec.client_num_units(x.rstrip("\r\n")) for x in reference.lines] or [0]
        char, end_char = min(char, units[line]), min(end_char, units[end_line])  # pygls mishandles others
        if end_line == line:
            end_char = max(char, end_char)
        change = edit(line, char, end_line, end_char, new)
        reference.apply_change(change)
        fast.apply_change(edit(line, char, end_line, end_char, new))
        assert fast.source == reference.source
        assert fast.starts.tolist() == [0, *line_starts(fast.source).tolist()]
        assert list(fast.lines) == list(reference.lines)


def test_columns_past_the_end_of_a_line_mean_its_end():
    doc = FastDocument("file:///a.py", "ab\ncd\n")
    doc.apply_change(edit(0, 1, 0, 99, "X"))
    assert doc.source == "aX\ncd\n"
    doc.apply_change(edit(1, 50, 7, 0, "!"))
    assert doc.source == "aX\ncd!"


def test_lines_end_only_at_lsp_line_breaks():
    text = "a\x0cb\r\nc\rd\ne"
    lines = Lines(text, np.array([0, *line_starts(text)]))
    big = text * 20_000
    assert line_starts(big).tolist() == [m.end() for m in LINE_BREAK.finditer(big)]  # the vectorized path
    assert list(lines) == ["a\x0cb\r\n", "c\r", "d\n", "e"]
    assert list(Lines("x\n", np.array([0, 2]))) == ["x\n"] and len(Lines("", np.array([0]))) == 0


def test_offsets_in_a_huge_document_without_splitting_it():
    text = "def f(x):\n    return x\n" * 200_000
    doc = FastDocument("file:///big.py", text)
    assert doc.offset_at_position(types.Position(300_001, 4)) == 300_001 // 2 * 23 + 10 + 4
    doc.apply_change(edit(300_001, 4, 300_001, 4, "yield "))
    assert doc.source[300_000 // 2 * 23 + 10 :].startswith("    yield return x\n")
    assert doc.line_of_offset(len(doc.source) - 1) == 399_999


def test_typing_at_the_end_of_a_crlf_line_keeps_the_line_starts():
    doc = FastDocument("file:///a.py", "ab\r\ncd\r\n" * 1000)
    assert len(doc.starts) == 2001
    doc.apply_change(edit(0, 2, 0, 2, "X"))
    doc.apply_change(edit(0, 3, 0, 3, "\r\n"))
    assert doc._starts is not None  # updated in place, not recounted
    assert doc.starts.tolist() == [0, *line_starts(doc.source).tolist()]


def test_lone_surrogates_in_a_big_document():
    text = "x = '\ud800'\n" * 10_000
    doc = FastDocument("file:///a.py", text)
    assert len(doc.lines) == 10_000


def test_a_reversed_range_is_read_the_other_way_round():
    """As vscode-languageserver-textdocument does (it was an insertion at its start)."""
    doc = FastDocument("file:///a.py", "abcdef\nghi\n")
    doc.apply_change(edit(1, 2, 0, 3, "X"))
    assert doc.source == "abcXi\n"
