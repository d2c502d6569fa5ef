"""From the model's raw span to the text an editor shows."""

from __future__ import annotations


def indentation(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def at_blank_line(prefix: str) -> bool:
    """The cursor's line holds nothing but indentation so far."""
    return not prefix[prefix.rfind("\n") + 1 :].strip()


def choose_mode(prefix: str, mode: str) -> str:
    """``auto``: a block on an empty line, the rest of the line otherwise."""
    if mode != "auto":
        return mode
    return "block" if at_blank_line(prefix) else "line"


def strip_suffix_overlap(text: str, suffix: str) -> str:
    """Never return text that already follows the cursor on its line (e.g. a closing bracket)."""
    rest_of_line = suffix.split("\n", 1)[0].rstrip()
    if rest_of_line and rest_of_line.lstrip()[0] in CLOSERS:
        return text  # brackets are a matter of balance (balance_brackets), not of overlap
    if rest_of_line and text.rstrip().endswith(rest_of_line):
        return text.rstrip()[: -len(rest_of_line)]
    return text


CLOSERS = {")": "(", "]": "[", "}": "{"}


def balance_brackets(text: str, suffix: str) -> str:
    """Cut the completion where it closes a bracket opened before the cursor that the text after
    the cursor already closes (so that accepting it never leaves one bracket too many)."""
    rest_of_line = suffix.split("\n", 1)[0].lstrip()
    if not rest_of_line or rest_of_line[0] not in CLOSERS:
        return text
    depth = 0
    quote = None
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in CLOSERS:
            if depth == 0:
                return text[:i].rstrip() if ch == rest_of_line[0] else text
            depth -= 1
    return text


def cut_line(text: str) -> str:
    return text.split("\n", 1)[0].rstrip()


def cut_block(text: str, prefix: str, suffix: str) -> str:
    """Whole lines down to the end of the enclosing block; drop lines that repeat the suffix."""
    current_line = prefix[prefix.rfind("\n") + 1 :]
    base = indentation(current_line)
    next_suffix_line = next((ln.strip() for ln in suffix.split("\n") if ln.strip()), None)
    lines = text.split("\n")
    kept = [lines[0].rstrip()]
    for line in lines[1:]:
        if line.strip():
            if indentation(line) < base:
                break
            if next_suffix_line is not None and line.strip() == next_suffix_line:
                break
        kept.append(line.rstrip())
    while kept and not kept[-1].strip():
        kept.pop()
    return "\n".join(kept)


def postprocess(raw: str, prefix: str, suffix: str, mode: str) -> str:
    raw = raw.rstrip("\ufffd")  # a span may stop inside a multi-byte character
    text = cut_line(raw) if mode == "line" else cut_block(raw, prefix, suffix)
    if "\n" in text:
        return text
    return balance_brackets(strip_suffix_overlap(text, suffix), suffix)
