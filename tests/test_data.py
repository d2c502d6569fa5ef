import numpy as np
import pytest

from celeris_complete.errors import CelerisError
from celeris_complete.training.corpus import gather
from celeris_complete.training.data import SpanSampler, load_tokens, pretokenize


@pytest.fixture(scope="module")
def stream(small_corpus, small_tok, tmp_path_factory):
    path = tmp_path_factory.mktemp("tokens") / "train.bin"
    n = pretokenize(gather([small_corpus]), small_tok, path)
    tokens = load_tokens(path)
    assert len(tokens) == n
    return tokens


def test_pretokenize_separates_files(stream, small_tok, small_corpus):
    files = gather([small_corpus])
    assert int((np.asarray(stream) == small_tok.file_id).sum()) == len(files) + 1
    first = small_tok.decode(np.asarray(stream[1:200]).tolist())
    assert first == files[0].text[: len(first)]


def test_sample_layout(stream, small_tok):
    sampler = SpanSampler(stream, small_tok, context_len=96, max_suffix=24)
    rng = np.random.default_rng(0)
    batch = sampler.sample(rng, 64, 16)
    assert batch.context.shape == (64, 96) and batch.canvas.shape == (64, 16)
    assert (batch.context[:, 0] == small_tok.suf_id).all()
    for row, canvas, n in zip(batch.context, batch.canvas, batch.span_len):
        pre = np.flatnonzero(row == small_tok.pre_id)
        assert len(pre) == 1 and pre[0] <= 1 + 24
        assert (canvas[n:] == small_tok.eos_id).all()
        assert not (canvas[:n] == small_tok.eos_id).any()


def test_spans_are_contiguous_with_context(stream, small_tok):
    """prefix + span + suffix is a piece of the original stream."""
    sampler = SpanSampler(stream, small_tok, context_len=96, max_suffix=24)
    rng = np.random.default_rng(1)
    text = small_tok.decode(np.asarray(stream).tolist())
    batch = sampler.sample(rng, 40, 64)
    checked = 0
    for row, canvas, n in zip(batch.context, batch.canvas, batch.span_len):
        if n >= 64 or small_tok.file_id in row:
            continue
        p = int(np.flatnonzero(row == small_tok.pre_id)[0])
        joined = small_tok.decode(row[p + 1 :].tolist() + canvas[:n].tolist() + row[1:p].tolist())
        assert joined in text
        checked += 1
    assert checked > 10


def test_half_the_spans_are_line_aligned(stream, small_tok):
    sampler = SpanSampler(stream, small_tok, context_len=96, max_suffix=24)
    rng = np.random.default_rng(2)
    batch = sampler.sample(rng, 400, 32)
    aligned = 0
    for row in batch.context:
        before = small_tok.token_bytes[row[-1]]
        aligned += before.endswith(b"\n") or (before.strip(b" \t") == b"" and len(before) > 0)
    assert 0.4 < aligned / 400 < 0.85


def test_short_stream_is_a_clear_error(small_tok):
    with pytest.raises(CelerisError, match="too short"):
        SpanSampler(np.zeros(100, dtype=np.uint16), small_tok, context_len=96, max_suffix=24)


def test_rest_of_line_spans_start_inside_a_line_and_end_at_its_end(stream, small_tok):
    sampler = SpanSampler(stream, small_tok, context_len=96, max_suffix=24, rest_of_line=1.0)
    batch = sampler.sample(np.random.default_rng(3), 200, 64)
    for row, canvas, n in zip(batch.context, batch.canvas, batch.span_len):
        p = int(np.flatnonzero(row == small_tok.pre_id)[0])
        line_so_far = small_tok.decode(row[p + 1 :].tolist()).rsplit("\n", 1)[-1]
        assert line_so_far.strip(), "the cursor is after some of the line's text"
        span = small_tok.decode(canvas[:n].tolist())
        assert span and "\n" not in span[:-1]
        if p > 1 and n < 64 and not span.endswith("\n") and small_tok.file_id not in row[1:p]:
            assert small_tok.decode(row[1:p].tolist()).startswith("\n"), "and the span runs to the line's end"


def test_rest_of_line_share_is_checked(stream, small_tok):
    with pytest.raises(CelerisError, match="share"):
        SpanSampler(stream, small_tok, context_len=96, max_suffix=24, rest_of_line=1.5)
