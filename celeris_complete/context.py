"""From the text around the cursor to the model's context tokens.

Layout, as in training: ``[SUF] suffix [FILE]? [PRE] [FILE]? prefix``.  The
FILE token marks that a window reaches the start or the end of the file.
Windows are cut by characters before tokenizing, so the cost never grows
with the size of the file.
"""

from __future__ import annotations

from dataclasses import dataclass

from .tokenizer import CodeTokenizer

CHARS_PER_TOKEN_BOUND = 16  # generous: a token of this tokenizer rarely spans more characters


@dataclass(frozen=True)
class Context:
    tokens: list[int]
    prefix_tokens: int
    suffix_tokens: int


def prefix_window(tok: CodeTokenizer, prefix: str, budget: int) -> tuple[list[int], bool]:
    """The last ``budget`` tokens before the cursor, and whether they reach the file's start."""
    if budget <= 0:
        return [], not prefix
    window = prefix[-budget * CHARS_PER_TOKEN_BOUND :]
    cut = len(window) < len(prefix)
    if cut:  # start the window on a line so the first token is a whole one
        newline = window.find("\n")
        if 0 <= newline < len(window) - 1:
            window = window[newline + 1 :]
    ids = tok.encode(window)
    if len(ids) > budget:
        return ids[-budget:], False
    return ids, not cut


def suffix_window(tok: CodeTokenizer, suffix: str, budget: int) -> tuple[list[int], bool]:
    """The first ``budget`` tokens after the cursor, and whether they reach the file's end."""
    if budget <= 0:
        return [], not suffix
    window = suffix[: budget * CHARS_PER_TOKEN_BOUND]
    cut = len(window) < len(suffix)
    if cut:
        newline = window.rfind("\n")
        if newline > 0:
            window = window[: newline + 1]
    ids = tok.encode(window)
    if len(ids) > budget:
        return ids[:budget], False
    return ids, not cut


def build_context(tok: CodeTokenizer, prefix: str, suffix: str, prefix_budget: int, suffix_budget: int) -> Context:
    pre, at_start = prefix_window(tok, prefix, prefix_budget)
    suf, at_end = suffix_window(tok, suffix, suffix_budget)
    tokens = [tok.suf_id, *suf]
    if at_end:
        tokens.append(tok.file_id)
    tokens.append(tok.pre_id)
    if at_start:
        tokens.append(tok.file_id)
    tokens.extend(pre)
    return Context(tokens, len(pre), len(suf))
