"""Python answers judged by the compiler: is a syntax error the answer's own, and what to show instead.

The model is small and most of its wrong answers cannot be Python at all (an unclosed bracket, a
keyword where a name belongs, the wrong indentation): on HumanEval-Infilling 85% of the shipped
model's non-empty single-line answers left a program that does not compile. The compiler tells in
about a millisecond for a function-sized window. Only the code around the cursor is compiled: the
innermost function that encloses the cursor (dedented), or else the top-level statement (from the
last line before the cursor that starts a statement at column 0 to the next such line after it),
at most 40k characters on either side. So a slice of a huge
file, or an error elsewhere in it, costs little and judges nothing: an answer is blamed when the
compiler's error lies in the answer's own lines, or anywhere when the window compiles without it;
and when it compiles but uses a name that nothing could bind (``names_check.py``).
"""

from __future__ import annotations

from celeris_complete.checks.brackets import closed
from celeris_complete.checks.languages import resolve
from celeris_complete.checks.window import (
    BLAMED,
    ELSEWHERE,
    OK,
    SCAN_LINES,
    Window,
    _indent,
    _is_code,
    indent_levels,
    window,
)


def header_drafts(win: Window, prefix: str, suffix: str) -> list[str]:
    """At a blank line where the code below needs a block header that holds nothing to guess (``else:``,
    ``try:``): the ones that make the window compile and leave no code dead, at the
    cursor's indentation (or, at column 0, at any level of the lines above that is less deep than the
    line below), nearest level first. Only where the window needs one: it does not compile as it is (the
    line below is deeper, or goes on with ``except``), or the code above the cursor ends a jump the
    code below would go on after. Drafts for the model to verify, as the repository's lines are."""
    typed = prefix[prefix.rfind("\n") + 1 :]
    if typed.strip() or suffix[: suffix.find("\n") if "\n" in suffix else len(suffix)].strip():
        return []
    if win.error_line("") != 0:
        headers = ("try:",)  # the code below is deeper: after a block, ``else:`` would be a guess (``if x:``?)
    elif win.dead_at_cursor:
        headers = ("else:",)
    else:
        return []
    below = next((ln for ln in suffix.split("\n", SCAN_LINES)[1:SCAN_LINES] if _is_code(ln)), "")
    deeper = below[: len(below) - len(below.lstrip())]
    if typed:
        levels = [""] if len(typed) < len(deeper) else []
    else:
        above = prefix.rsplit("\n", SCAN_LINES)[-SCAN_LINES:]
        indents = {ln[: len(ln) - len(ln.lstrip())] for ln in above if _is_code(ln)}
        levels = sorted((i for i in indents if len(i) < len(deeper)), key=len, reverse=True)
    return [level + header for level in levels for header in headers if fits(win, level + header)]


def fits(win: Window, text: str) -> bool:
    """The window compiles with ``text``, every name ``text`` uses could be bound, no code below is dead."""
    return win.error_line(text) == 0 and not win.names_missing(text) and not win.unreachable_below(text)


def judge(win: Window, text: str) -> str:
    """``OK`` when the window compiles with ``text``, every name ``text`` uses could be bound
    (names_check.py) and no code below it is left dead (``Window.unreachable_below``); else
    ``BLAMED``. ``BLAMED`` when it does not compile and the error lies in the lines ``text`` spans, or
    anywhere when the window is clean (``Window.clean``: an answer that makes the next line an
    unexpected indent); ``ELSEWHERE`` otherwise: the window is broken whatever the answer (the user is
    in the middle of an edit), or, in a ``Window.headed`` window, the error lies below the answer."""
    line = win.error_line(text)
    if line == 0:
        return BLAMED if win.names_missing(text) or win.unreachable_below(text) else OK
    first, last = win.answer_lines(text)
    if first <= line <= last:
        return BLAMED
    return BLAMED if win.clean else ELSEWHERE


def is_python(language: str | None) -> bool:
    """A language id (LSP), a file name or a suffix that says Python (``languages.resolve``)."""
    found = resolve(language)
    return found is not None and found.family == "python"


def reindentations(text: str, prefix: str, suffix: str) -> list[str]:
    """``text`` moved to each other plausible level (every line by the same amount) when the cursor
    stands in the indentation of a blank line; [] otherwise, or where tabs indent."""
    typed = prefix[prefix.rfind("\n") + 1 :]
    first = text.split("\n", 1)[0]
    if typed.strip() or "\t" in typed or not first.strip() or "\t" in first[: _indent(first) + 1]:
        return []
    own = len(typed) + _indent(first)
    out = []
    lines = text.split("\n")
    for level in indent_levels(prefix, suffix):
        if level == own or level < len(typed):
            continue
        shift = level - own
        moved = [" " * (level - len(typed)) + lines[0].lstrip(" ")]
        moved += [" " * max(0, _indent(ln) + shift) + ln.lstrip(" ") if ln.strip() else ln for ln in lines[1:]]
        out.append("\n".join(moved))
    return out


def shortened(text: str) -> list[str]:
    """A block's leading whole lines, longest first (without its last line, and so on down to one)."""
    lines = text.rstrip("\n").split("\n")
    return ["\n".join(lines[:n]) for n in range(len(lines) - 1, 0, -1) if lines[n - 1].strip()]


def first_compiling(texts, win: Window) -> str | None:
    """The first non-empty text with which the window compiles."""
    for text in texts:
        if text.strip() and fits(win, text):
            return text
    return None


def check(
    text: str, prefix: str, suffix: str, others=(), sample=list, win: Window | None = None, whole: bool = True
) -> tuple[str, str, Window]:
    """The answer to show, the verdict and the window (``win``, when the caller has it already; else
    ``window(prefix, suffix, whole)``): ``text`` as it is unless the compiler blames it (then
    ``repair``'s choice)."""
    win = window(prefix, suffix, whole) if win is None else win
    verdict = judge(win, text)
    if verdict == BLAMED:
        text, verdict = repair(text, prefix, suffix, win, others, sample)
    return text, verdict, win


def mended(text: str, prefix: str, suffix: str, win: Window) -> tuple[str, str] | None:
    """``text`` (blamed) at another indentation that compiles, else its longest run of first lines that
    compiles, else (one line) finished with the brackets it leaves open and a colon, with the verdict
    ("reindented", "shortened", "closed"); None when none does. No model calls."""
    fixed = first_compiling(reindentations(text, prefix, suffix), win)
    if fixed is not None:
        return fixed, "reindented"
    fixed = first_compiling(shortened(text), win)
    if fixed is not None:
        return fixed, "shortened"
    fixed = first_compiling(closed(text, prefix, win.terminator), win)
    return None if fixed is None else (fixed, "closed")


def repair(text: str, prefix: str, suffix: str, win: Window, others, sample) -> tuple[str, str]:
    """What to show instead of ``text``, an answer the compiler blamed, and the verdict. In order: the
    answer at another indentation that compiles (at a blank line); its longest run of first lines that
    compiles (a block); the line finished (``closed``). Then, only where the compiler's blame is to be
    trusted (``Window.strict``: the window is clean, or only the line being typed is unfinished): at a
    blank line (a line to write: the user just pressed Enter), the first sampled answer (``others``,
    else ``sample()``: model calls) that compiles as it is, re-indented or shortened; failing that,
    nothing. Mid-line no samples are drawn (alternatives the user asked for are still tried): a typed
    partial name compiles, so the window is often clean while the user types a line, and samples on
    many keystrokes would make them miss the next key. Elsewhere ``text`` as it was (the user is in
    the middle of an edit the compiler cannot judge)."""
    fixed = mended(text, prefix, suffix, win)
    if fixed is not None:
        return fixed
    if not win.strict:  # the compiler cannot judge here: nothing is worth samples
        return text, "kept"
    if not others and prefix[prefix.rfind("\n") + 1 :].strip():  # mid-line: no samples drawn for it
        return "", "withheld"
    candidates = [c for c in (others or sample()) if c.strip() and c != text]
    variants = (v for c in candidates for v in (c, *reindentations(c, prefix, suffix), *shortened(c)))
    fixed = first_compiling(variants, win)
    if fixed is not None:
        return fixed, "replaced"
    return "", "withheld"
