"""Byte-level BPE tokenizer for code, lossless on any UTF-8 text.

The BPE part (``tokenizer.json``) never matches special tokens in text: the
special ids (mask, end-of-span, ...) live above the BPE vocabulary and can
only be produced by our own code, so text that happens to contain
"<|mask|>" still round-trips exactly.

Pre-tokenization keeps line structure visible to the model: every newline is
its own piece and the indentation at the start of a line is its own piece,
so "start of a line" and "after the indentation" are always token
boundaries, in training and at the cursor.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from celeris_complete.errors import CelerisError

SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(text: str) -> str:
    """``text`` with each lone surrogate (an editor's buffer can hold one; JSON carries it as an escape)
    replaced by U+FFFD, one character for one: the tokenizers library takes valid Unicode only."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return SURROGATE.sub("\ufffd", text)
    return text


SPECIAL_TOKENS = ("mask", "eos", "suf", "pre", "file")

# Alternatives are tried left to right at each position (Oniguruma: ^ is a line start).
PIECES = "|".join(
    (
        r"\r?\n",  # newline
        r"^[ \t]+",  # indentation run
        r" ?[\p{L}_][\p{L}\p{N}_]*",  # identifier or word, with one leading space
        r" ?\p{N}{1,3}",  # digits, in groups of three at most
        r" ?[^\s\p{L}\p{N}_]+",  # operators and punctuation
        r"[ \t]+",  # other runs of blanks
        r"\s",  # any other whitespace character
    )
)


def _byte_decoder() -> dict[str, int]:
    """The byte-level alphabet's character for each byte, reversed (the GPT-2 mapping)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return {ch: b for b, ch in chars.items()}


class CodeTokenizer:
    def __init__(self, bpe: Tokenizer) -> None:
        self.bpe = bpe
        self.bpe_vocab_size = bpe.get_vocab_size()
        for i, name in enumerate(SPECIAL_TOKENS):
            setattr(self, f"{name}_id", self.bpe_vocab_size + i)
        self.vocab_size = self.bpe_vocab_size + len(SPECIAL_TOKENS)
        self.token_bytes = self._token_bytes()
        self.newline_ids = frozenset(i for i, b in enumerate(self.token_bytes) if b and not b.strip(b"\r\n"))

    # ---- construction -------------------------------------------------------------------
    @staticmethod
    def new_bpe() -> Tokenizer:
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(PIECES), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
        tok.decoder = decoders.ByteLevel()
        return tok

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int = 8192) -> CodeTokenizer:
        """Train on texts; ``vocab_size`` counts the special tokens too."""
        tok = cls.new_bpe()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size - len(SPECIAL_TOKENS),
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            special_tokens=[],
            show_progress=False,
        )
        tok.train_from_iterator(texts, trainer)
        return cls(tok)

    @classmethod
    def load(cls, path: Path) -> CodeTokenizer:
        if not Path(path).is_file():
            raise CelerisError(f"tokenizer file not found: {path}")
        try:
            return cls(Tokenizer.from_file(str(path)))
        except Exception as exc:  # tokenizers raises plain Exception on bad JSON
            raise CelerisError(f"tokenizer file {path} is corrupt or not a tokenizer: {exc}") from None

    def save(self, path: Path) -> None:
        tmp = Path(str(path) + ".tmp")
        self.bpe.save(str(tmp))
        tmp.replace(path)

    def _token_bytes(self) -> list[bytes]:
        table = _byte_decoder()
        out = []
        for i in range(self.bpe_vocab_size):
            piece = self.bpe.id_to_token(i)
            out.append(bytes(table[ch] for ch in piece))
        return out + [b""] * len(SPECIAL_TOKENS)

    # ---- use ----------------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        return self.bpe.encode(encodable(text), add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.bpe.encode_batch([encodable(t) for t in texts], add_special_tokens=False)]

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """Raw bytes of the BPE tokens; special tokens contribute nothing."""
        tb = self.token_bytes
        return b"".join(tb[i] for i in ids)

    def decode(self, ids: Iterable[int]) -> str:
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def special_ids(self) -> dict[str, int]:
        return {name: getattr(self, f"{name}_id") for name in SPECIAL_TOKENS}

    def describe(self) -> str:
        return json.dumps({"bpe_vocab_size": self.bpe_vocab_size, "special": self.special_ids()})
