"""A larger vocabulary for a trained model: its tokenizer extended by merges learned on new text, and its
embedding grown to match, so that training goes on from what the model knows.

BPE applies merges in order, so merges appended after the shipped ones leave every shipped token its id
and its bytes, and change a text's tokens only where a new merge fires (on Python, 1.1% of the tokens
for 2,048 merges learned on TypeScript, JavaScript, Go and Rust: ``scripts/measure_tokenizer.py``). The
special tokens (mask, end of span, ...) sit above the BPE vocabulary and move up with it. A new token's
embedding row starts as the mean of the rows of the shipped tokens it is made of (the output layer is
the embedding, tied). Given the old tokens, the grown model gives every old token the logit the source
gave it; the new tokens' logits compete with them, and a text re-encoded may hold new tokens, so its
answers are close to the source's, not the same, until training goes on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

import torch
from tokenizers import Tokenizer

from celeris_complete.errors import CelerisError
from celeris_complete.model.network import InfillModel, ModelConfig
from celeris_complete.model.tokenizer import SPECIAL_TOKENS, CodeTokenizer

# A BPE trained on the new text proposes merges in its own order; some need parts the shipped vocabulary
# lacks, or make tokens it has. Proposals are drawn from a BPE this many times larger than what is kept.
PROPOSALS_PER_MERGE = 4


def extend_tokenizer(tok: CodeTokenizer, texts: Iterable[str], merges: int) -> CodeTokenizer:
    """``tok`` with up to ``merges`` merges appended, learned on ``texts``: each merge a BPE trained on them
    proposes (in its order) is kept when both its parts are already tokens (shipped or appended) and
    what it makes is new."""
    if merges < 1:
        raise CelerisError(f"merges to add: at least 1, not {merges}")
    state = json.loads(tok.bpe.to_str())
    model = state["model"]
    if model.get("type") != "BPE":
        raise CelerisError(f"the tokenizer is a {model.get('type')} model, not BPE: it cannot be extended")
    vocab, rules = model["vocab"], model["merges"]
    proposer = CodeTokenizer.train(texts, tok.vocab_size + PROPOSALS_PER_MERGE * merges)
    added = 0
    as_strings = bool(rules) and isinstance(rules[0], str)  # (the library's own format, kept)
    for a, b in _merges(json.loads(proposer.bpe.to_str())["model"]["merges"]):
        if added >= merges:
            break
        if a in vocab and b in vocab and a + b not in vocab:
            vocab[a + b] = len(vocab)
            rules.append(f"{a} {b}" if as_strings else [a, b])
            added += 1
    if not added:
        raise CelerisError("the new text taught no merge the tokenizer lacks")
    return CodeTokenizer(Tokenizer.from_str(json.dumps(state)))


def _merges(rules: list) -> list[tuple[str, str]]:
    """Merges as pairs (tokenizers 0.20 and later write ``[a, b]``, earlier versions ``"a b"``)."""
    return [tuple(r) if isinstance(r, list) else tuple(r.split(" ", 1)) for r in rules]


def parts_in(old: CodeTokenizer, new: CodeTokenizer) -> dict[int, list[int]]:
    """For each token ``new`` added, the ``old`` token ids its bytes are made of (by the merges that made it)."""
    vocab = json.loads(new.bpe.to_str())["model"]["vocab"]
    made = {a + b: (a, b) for a, b in _merges(json.loads(new.bpe.to_str())["model"]["merges"])}

    def expand(piece: str) -> list[int]:
        i = vocab[piece]
        if i < old.bpe_vocab_size:
            return [i]
        if piece not in made:
            raise CelerisError(f"token {i} of the new tokenizer is made by no merge: it is not an extension")
        a, b = made[piece]
        return expand(a) + expand(b)

    return {i: expand(piece) for piece, i in vocab.items() if i >= old.bpe_vocab_size}


def is_extension(old: CodeTokenizer, new: CodeTokenizer) -> bool:
    """Whether ``new`` is ``old`` with merges appended: the same tokens at the same ids, the same merges first."""
    if new.bpe_vocab_size <= old.bpe_vocab_size:
        return False
    if new.token_bytes[: old.bpe_vocab_size] != old.token_bytes[: old.bpe_vocab_size]:
        return False
    before = _merges(json.loads(old.bpe.to_str())["model"]["merges"])
    return _merges(json.loads(new.bpe.to_str())["model"]["merges"])[: len(before)] == before


def id_map(old: CodeTokenizer, new: CodeTokenizer) -> list[int]:
    """Each ``old`` id's id in ``new``: the BPE ids stay, the special tokens move up."""
    if not is_extension(old, new):
        raise CelerisError("the new tokenizer is not the old one with merges appended: it is not an extension of it")
    return list(range(old.bpe_vocab_size)) + [getattr(new, f"{name}_id") for name in SPECIAL_TOKENS]


def extend_model(model: InfillModel, old: CodeTokenizer, new: CodeTokenizer) -> InfillModel:
    """A copy of ``model`` for ``new``'s vocabulary: every weight as it was, the old tokens' embedding rows
    at their ids in ``new``, each new token's row the mean of its parts' rows.  The embedding has rows
    for a multiple of 64 tokens, as training makes it; the rows past the tokenizer's are never used (the
    engine bans those ids) and start at zero."""
    if model.cfg.vocab_size < old.vocab_size:
        raise CelerisError(f"the model has {model.cfg.vocab_size} tokens, fewer than its tokenizer's {old.vocab_size}")
    cfg = ModelConfig.from_dict({**model.cfg.to_dict(), "vocab_size": math.ceil(new.vocab_size / 64) * 64})
    grown = InfillModel(cfg)
    state = {k: v for k, v in model.state_dict().items() if k != "embed.weight"}
    old_rows = model.embed.weight.detach()[: old.vocab_size]
    rows = torch.zeros(cfg.vocab_size, cfg.d_model, dtype=old_rows.dtype)
    rows[id_map(old, new)] = old_rows
    for i, pieces in parts_in(old, new).items():
        rows[i] = old_rows[pieces].mean(0)
    grown.load_state_dict({**state, "embed.weight": rows}, strict=True)
    return grown
