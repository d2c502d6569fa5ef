"""From the model's raw span to the text an editor shows."""

from __future__ import annotations


def indentation(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def choose_mode(prefix: str, mode: str) -> str:
    """``auto``: a block on an empty line, the rest of the line otherwise."""
    if mode != "auto":
        return mode
    current_line = prefix[prefix.rfind("\n") + 1 :]
    return "block" if not current_line.strip() else "line"


def strip_suffix_overlap(text: str, suffix: str) -> str:
    """Never return text that already follows the cursor on its line (e.g. a closing bracket)."""
    rest_of_line = suffix.split("\n", 1)[0].rstrip()
    if rest_of_line and text.rstrip().endswith(rest_of_line):
        return text.rstrip()[: -len(rest_of_line)]
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
    return strip_suffix_overlap(text, suffix) if "\n" not in text else text
