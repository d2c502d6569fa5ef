"""The vocabulary extension (training/vocab.py): new merges appended, the model grown to answer as before."""

from __future__ import annotations

import pytest
import torch

from celeris_complete.errors import CelerisError
from celeris_complete.model.directory import load_model_dir, save_model_dir
from celeris_complete.training.vocab import extend_model, extend_tokenizer, id_map, is_extension, parts_in

GO = """package main

import (
\t"fmt"
\t"strings"
)

func joinNames(names []string) string {
\tif len(names) == 0 {
\t\treturn ""
\t}
\treturn strings.Join(names, ", ")
}

func main() {
\tfor i, name := range []string{"a", "b"} {
\t\tfmt.Printf("%d: %s\\n", i, name)
\t}
}
"""


@pytest.fixture(scope="module")
def grown(tiny_model_dir):
    src = load_model_dir(tiny_model_dir)
    tok = extend_tokenizer(src.tokenizer, [GO] * 20, 41)  # (600 + 41 tokens: spare rows up to 704)
    return src, tok, extend_model(src.model, src.tokenizer, tok)


def test_appended_merges_keep_every_old_token_and_shorten_the_new_language(grown):
    src, tok, _ = grown
    old = src.tokenizer
    assert tok.bpe_vocab_size == old.bpe_vocab_size + 41
    assert tok.token_bytes[: old.bpe_vocab_size] == old.token_bytes[: old.bpe_vocab_size]
    assert len(tok.encode(GO)) < 0.9 * len(old.encode(GO))
    assert tok.decode(tok.encode(GO)) == GO
    # Special tokens move above the new BPE tokens.
    assert id_map(old, tok)[old.eos_id] == tok.eos_id == tok.bpe_vocab_size + 1


def test_the_grown_model_answers_as_before_on_old_tokens(grown, small_corpus):
    src, tok, model = grown
    old = src.tokenizer
    to_new = torch.tensor(id_map(old, tok))
    text = sorted(small_corpus.glob("*.py"))[0].read_text(encoding="utf-8")[:400]
    context = torch.tensor([[old.suf_id, old.pre_id, *old.encode(text)[:40]]])
    slots = torch.full((1, 6), old.mask_id)
    src.model.eval()
    model.eval()
    with torch.no_grad():
        ctx_a, span_a = src.model(context, slots)
        ctx_b, span_b = model(to_new[context], to_new[slots])
    # Every old token's logit is where its new id is, unchanged.
    torch.testing.assert_close(span_b[..., to_new], span_a[..., : old.vocab_size], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ctx_b[..., to_new], ctx_a[..., : old.vocab_size], rtol=1e-5, atol=1e-5)


def test_new_rows_are_the_mean_of_their_parts_and_spare_rows_are_zero(grown):
    src, tok, model = grown
    old_rows, rows = src.model.embed.weight.detach(), model.embed.weight.detach()
    parts = parts_in(src.tokenizer, tok)
    assert len(parts) == 41
    for i, pieces in parts.items():
        assert b"".join(src.tokenizer.token_bytes[p] for p in pieces) == tok.token_bytes[i]
        torch.testing.assert_close(rows[i], old_rows[pieces].mean(0))
    assert model.cfg.vocab_size % 64 == 0 and model.cfg.vocab_size > tok.vocab_size
    assert not rows[tok.vocab_size :].any()


def test_the_grown_model_saves_loads_and_trains_on(grown, small_corpus, tmp_path):
    from celeris_complete.training.train import TrainArgs, train

    src, tok, model = grown
    save_model_dir(tmp_path / "grown", model, tok, dict(src.meta))
    loaded = load_model_dir(tmp_path / "grown")
    assert loaded.tokenizer.vocab_size == tok.vocab_size
    train(TrainArgs(output=tmp_path / "on", roots=[small_corpus], steps=2, init_from=tmp_path / "grown",
                    batch_size=2, context_len=64, max_suffix=16, eval_every=1000))  # fmt: skip
    assert load_model_dir(tmp_path / "on").tokenizer.token_bytes == tok.token_bytes


def test_old_text_keeps_its_cuts_where_no_new_merge_fires(grown, small_corpus):
    """Merges appended after the old ones only join old tokens: every cut the new tokenizer makes in a
    text the old one made too, and the texts no new merge fires in are tokenized the same."""
    src, tok, _ = grown
    texts = [p.read_text(encoding="utf-8") for p in sorted(small_corpus.glob("*.py"))]
    same = 0
    for text in texts:
        for line in text.splitlines(keepends=True):
            a = src.tokenizer.bpe.encode(line, add_special_tokens=False)
            b = tok.bpe.encode(line, add_special_tokens=False)
            assert {end for _, end in b.offsets} <= {end for _, end in a.offsets}, line
            assert len(b.ids) <= len(a.ids)
            if len(b.ids) == len(a.ids):
                assert b.ids == a.ids
                same += 1
    assert same > 0


def test_a_tokenizer_that_is_not_an_extension_is_refused(tiny_model_dir, small_tok):
    src = load_model_dir(tiny_model_dir)
    with pytest.raises(CelerisError, match="at least 1"):
        extend_tokenizer(src.tokenizer, [GO], 0)
    assert not is_extension(src.tokenizer, small_tok)
    with pytest.raises(CelerisError, match="not an extension"):
        extend_model(src.model, src.tokenizer, small_tok)
