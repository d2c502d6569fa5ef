import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from celeris_complete.errors import CelerisError
from celeris_complete.model.tokenizer import SPECIAL_TOKENS, CodeTokenizer

SAMPLES = [
    "def f(x):\n    return x + 1\n",
    "line one\r\nline two\r\n\ttabbed\r\n",
    "        " * 40 + "deep = True\n",
    "s = '日本語 😀 e\u0301 ﷽'\n",
    "<|mask|> <|eos|> looks special but is text\n",
    "",
    "\n\n\n",
    "\x00\x01\x7f odd control bytes",
]


@pytest.mark.parametrize("text", SAMPLES)
def test_round_trip_examples(small_tok, text):
    ids = small_tok.encode(text)
    assert small_tok.decode(ids) == text
    assert all(i < small_tok.bpe_vocab_size for i in ids), "text never produces special ids"


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_round_trip_any_unicode(small_tok, text):
    assert small_tok.decode(small_tok.encode(text)) == text


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["\t", " ", "    ", "\r\n", "\n", "x", "é", "(", "😀"]), max_size=200))
def test_round_trip_whitespace_heavy(small_tok, pieces):
    text = "".join(pieces)
    assert small_tok.decode(small_tok.encode(text)) == text


def test_line_structure_is_visible(small_tok):
    ids = small_tok.encode("if x:\n        y = 1\n")
    pieces = [small_tok.token_bytes[i] for i in ids]
    assert b"\n" in pieces, "a newline is a token of its own"
    # The indentation run is its own token(s), never glued to the code that follows.
    after_newline = pieces[pieces.index(b"\n") + 1 :]
    code_start = next(i for i, p in enumerate(after_newline) if p.strip())
    assert b"".join(after_newline[:code_start]) == b"        "


def test_special_ids_above_bpe(small_tok):
    ids = small_tok.special_ids()
    assert list(ids) == list(SPECIAL_TOKENS)
    assert sorted(ids.values()) == list(range(small_tok.bpe_vocab_size, small_tok.vocab_size))
    assert small_tok.decode([ids["mask"], ids["eos"]]) == ""


def test_save_load(small_tok, tmp_path):
    small_tok.save(tmp_path / "t.json")
    again = CodeTokenizer.load(tmp_path / "t.json")
    text = "for i in range(10):\n\tprint(i)\n"
    assert again.encode(text) == small_tok.encode(text)


def test_load_errors(tmp_path):
    with pytest.raises(CelerisError, match="not found"):
        CodeTokenizer.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(CelerisError, match="corrupt"):
        CodeTokenizer.load(tmp_path / "bad.json")


def test_lone_surrogates_are_encoded(small_tok):
    """An editor's buffer can hold half a surrogate pair (JSON carries it as an escape); the tokenizers
    library refused it and the completion failed with an internal error (found by the fuzzing tests)."""
    text = "x = '\ud83d' + '\udc00\ud800'\n"
    assert small_tok.decode(small_tok.encode(text)) == "x = '\ufffd' + '\ufffd\ufffd'\n"
    assert small_tok.encode_batch([text]) == [small_tok.encode(text)]
