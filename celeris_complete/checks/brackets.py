"""Brackets and open lines: what an unfinished line still needs closed, and whether a line goes on."""

from __future__ import annotations

from celeris_complete.checks.postprocess import CLOSERS

CLOSING = {opener: closer for closer, opener in CLOSERS.items()}  # "(" -> ")"


def still_open(code: str, comment: str = "#") -> tuple[str, str] | None:
    """The string quote (``"``, ``'''``...; "" if none) and the brackets, innermost first, that
    ``code`` leaves open; None where it closes a bracket it did not open, ends in a comment (``comment``
    starts one: Python's ``#``, the C family's ``//``), or breaks a one-quote string's line. Roughly
    Python's rules: prefixes are not looked at (an f-string's braces are text); in a string a backslash
    escapes the next character (or line break)."""
    stack: list[str] = []
    quote = ""
    i, n = 0, len(code)
    while i < n:
        ch = code[i]
        if quote:
            if ch == "\\":
                i += 3 if code.startswith("\r\n", i + 1) else 2
                continue
            if code.startswith(quote, i):
                i += len(quote)
                quote = ""
                continue
            if ch == "\n" and len(quote) == 1:
                return None  # a one-quote string does not go on to the next line
        elif ch in "'\"":
            quote = code[i : i + 3] if code.startswith(ch * 3, i) else ch
            i += len(quote)
            continue
        elif code.startswith(comment, i):
            end = code.find("\n", i)
            if end < 0:
                return None
            i = end
            continue
        elif ch in CLOSING:
            stack.append(CLOSING[ch])
        elif ch in CLOSERS:
            if not stack or stack.pop() != ch:
                return None
        i += 1
    return quote, "".join(reversed(stack))


# Words after which a Python line cannot end (``return``, ``yield``, ``raise``, ``else`` can).
CONTINUED_BY = frozenset(
    "if elif while for in not and or is import from as with def class lambda assert del global nonlocal await".split()
)
OPERATOR_END = ".([{,=+-*/%<>&|^~@!\\"


# Where a line comment starts, per language family (checks/languages.py), and the families whose blocks
# are braces: there a line that ends by opening one (``if (x) {``) is finished.
LINE_COMMENTS = {"js": "//", "go": "//", "rust": "//", "java": "//", "c": "//", "lua": "--"}
BRACE_BLOCKS = frozenset({"js", "go", "rust", "java", "c"})


def line_is_open(line: str, family: str | None = None) -> bool:
    """The text before the cursor on its line (not blank) cannot end there: it ends with a blank, an
    operator, an opening bracket or a word that needs what follows (``in``, ``and``...), or leaves a
    bracket or a one-quote string open (``still_open``).  An answer that ends the line at once is then
    surely wrong.  ``family``: the document's language family (None: Python's rules); in a family whose
    blocks are braces, a line that opens one may end."""
    body = line.strip()
    if not body:
        return False
    if family in BRACE_BLOCKS and body.endswith("{"):
        return False
    comment = LINE_COMMENTS.get(family or "", "#")
    if family in LINE_COMMENTS and comment in body and still_open(body, comment) is None:
        return False  # it ends in a comment (or closes what it never opened)
    if line[-1] in " \t" or body[-1] in OPERATOR_END or body.rsplit(None, 1)[-1] in CONTINUED_BY:
        return True
    opened = still_open(body, comment)  # None: a comment ends the line, or a bracket closed that it never opened
    return opened is not None and (len(opened[0]) == 1 or bool(opened[1]))


def closed(text: str, prefix: str, terminator: str = ":") -> list[str]:
    """A one-line answer finished: the brackets the line leaves open closed, ``terminator`` added (Python's
    colon; a semicolon in the C family; "": none), or both (not one of punctuation alone: ``(`` made
    ``()`` says nothing); not inside a string or a comment."""
    if "\n" in text or not any(c.isalnum() for c in text):
        return []
    left = still_open(prefix[prefix.rfind("\n") + 1 :] + text)
    if left is None or left[0]:
        return []
    closers = left[1]
    tail = text.rstrip()
    out = [tail + closers] if closers else []
    if terminator and not tail.endswith(terminator):
        out.append(tail + closers + terminator)
    return out
