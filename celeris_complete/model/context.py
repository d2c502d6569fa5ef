"""From the text around the cursor to the model's context tokens.

Layout, as in training: ``[SUF] suffix [FILE]? [PRE] (snippet [FILE])* [FILE]? prefix``.
The FILE token marks that a window reaches the start or the end of the file.
Snippets from other files (open documents, the workspace) go before the
prefix, each ended by FILE, as the end of another file precedes a file in the
training stream.  (When the prefix window starts mid-file, the FILE before it
says otherwise: training never showed that case; its effect is not measured.)
Windows are cut by characters before tokenizing, so the cost never grows
with the size of the file, and the prefix window's start is anchored (it
moves in steps of ``ANCHOR_CHARS``) so that typing only appends tokens to
the context, which the context cache then reuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from celeris_complete.model.tokenizer import CodeTokenizer

CHARS_PER_TOKEN_BOUND = 16  # generous: a token of this tokenizer rarely spans more characters
PREFIX_CHARS_PER_TOKEN = 2.5  # the prefix window's size in characters per token of budget
ANCHOR_CHARS = 256
ANCHOR_TOKENS = 32


@dataclass(frozen=True)
class Context:
    tokens: list[int]
    prefix_tokens: int
    suffix_tokens: int
    heal: str = ""  # text cut from the end of the prefix; the completion must start with it
    snippet_tokens: int = 0


def prefix_window(tok: CodeTokenizer, prefix: str, budget: int) -> tuple[list[int], bool]:
    """About ``budget`` tokens before the cursor, and whether they reach the file's start."""
    if budget <= 0:
        return [], not prefix
    start = max(0, len(prefix) - int(budget * PREFIX_CHARS_PER_TOKEN))
    start -= start % ANCHOR_CHARS
    if start > 0:  # begin on a line, so the first token is a whole one
        newline = prefix.find("\n", start, len(prefix) - 1)
        if newline >= 0:
            start = newline + 1
    ids = tok.encode(prefix[start:])
    if len(ids) > budget:
        # Drop whole quanta from the front, sized by the lines before the cursor's line (which
        # typing does not change), so the start moves rarely.
        stable = len(ids)
        while stable > 0 and ids[stable - 1] not in tok.newline_ids:
            stable -= 1
        quantum = max(1, min(ANCHOR_TOKENS, budget // 4))
        excess = stable + quantum - budget
        drop = min(stable, max(0, -(-excess // quantum) * quantum))
        ids = ids[drop:]
        return (ids[-budget:] if len(ids) > budget else ids), False
    return ids, start == 0


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


def is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def build_context(
    tok: CodeTokenizer,
    prefix: str,
    suffix: str,
    prefix_budget: int,
    suffix_budget: int,
    heal: bool = True,
    file_start: bool = True,
    file_end: bool = True,
    snippets: Sequence[str] = (),
    snippet_budget: int = 0,
) -> Context:
    """``file_start``/``file_end``: whether ``prefix`` starts the file and ``suffix`` ends it (a
    caller may pass only a slice of a huge document around the cursor).  ``snippets``, most
    relevant first, share ``snippet_budget`` tokens; the most relevant sits nearest the prefix."""
    pre, at_start = prefix_window(tok, prefix, prefix_budget)
    at_start = at_start and file_start
    healed = ""
    if heal and pre and prefix and is_word_char(prefix[-1]):
        # The cursor may sit inside a word the model would write as one token: drop the word's
        # last token from the context and let the completion start with it again (token healing).
        last = tok.decode([pre[-1]])
        if last.strip() and all(is_word_char(c) for c in last.lstrip(" ")):
            healed = last
            pre = pre[:-1]
    elif heal and pre and prefix and prefix[-1] in " \t" and prefix[prefix.rfind("\n") + 1 :].strip():
        last = tok.decode([pre[-1]])
        if last and not last.strip(" \t") and prefix.endswith(last):
            # Blanks typed after code (``x = f(a, ``, ``k ``): written alone they are a token the model
            # rarely saw before more code on the line; the completion starts with them instead.
            healed = last
            pre = pre[:-1]
    suf, at_end = suffix_window(tok, suffix, suffix_budget)
    at_end = at_end and file_end
    tokens = [tok.suf_id, *suf]
    if at_end:
        tokens.append(tok.file_id)
    tokens.append(tok.pre_id)
    snippet_ids = snippet_tokens(tok, snippets, snippet_budget)
    tokens.extend(snippet_ids)
    if at_start and not snippet_ids:
        tokens.append(tok.file_id)
    tokens.extend(pre)
    return Context(tokens, len(pre), len(suf), healed, len(snippet_ids))


def snippet_tokens(tok: CodeTokenizer, snippets: Sequence[str], budget: int) -> list[int]:
    """Snippets, each cut to whole lines within what is left of ``budget`` and ended by FILE;
    the most relevant (first) is placed last, next to the prefix."""
    chosen: list[list[int]] = []
    left = budget
    for text in snippets:
        if left < 8:
            break
        ids = tok.encode(text[: left * CHARS_PER_TOKEN_BOUND])
        if len(ids) >= left:
            ids = ids[: left - 1]
            while ids and ids[-1] not in tok.newline_ids:
                ids.pop()
        if not ids:
            continue
        chosen.append([*ids, tok.file_id])
        left -= len(ids) + 1
    return [t for ids in reversed(chosen) for t in ids]
