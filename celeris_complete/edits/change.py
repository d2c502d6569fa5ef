"""What an edit changed, token by token, as patterns that can be looked for on other lines.

Lines are read as tokens (names, numbers, quoted strings, single other characters; white space between
them is not a token) between two marks: the line's start (after its indentation) and its end.  The
difference of an edit's lines before and after, token by token, is a list of ``Op``: the tokens
replaced (``old``), their context on each side, and the text that replaces them."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

TOKEN = re.compile(r"""[A-Za-z_$][\w$]*|\d[\w.]*|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`\n]*`|\S""")
WORD = re.compile(r"[A-Za-z_$][\w$]*\Z")
START, END = "\x02", "\x03"  # the marks at a line's start and end (never in a token)


@dataclass(frozen=True)
class Token:
    text: str
    start: int  # offsets in the text the tokens were read from
    end: int


def tokens(text: str) -> list[Token]:
    """``text``'s tokens, each line's between its START and END marks (the START at the end of its
    indentation, the END where its content ends)."""
    out: list[Token] = []
    pos = 0
    for line in text.splitlines(keepends=True):
        content = line.rstrip("\r\n")
        indent = len(content) - len(content.lstrip())
        out.append(Token(START, pos + indent, pos + indent))
        out += [Token(m.group(), pos + m.start(), pos + m.end()) for m in TOKEN.finditer(content)]
        out.append(Token(END, pos + len(content.rstrip()), pos + len(content.rstrip())))
        pos += len(line)
    return out


@dataclass(frozen=True)
class Op:
    """Tokens ``old`` (maybe none: an insertion), between ``left`` and ``right`` (two tokens of context
    before, one after; a line's START or END mark where the change touches the line's edge), became the text
    ``new``: with ``old`` the text from its first token's start to its last token's end; without, the
    text between ``left`` and ``right`` (white space included)."""

    left: tuple[str, ...]  # the one or two tokens before
    old: tuple[str, ...]
    right: str
    new: str
    loose: bool = False  # a name in the context matches any name (``loosened``)
    free: bool = True  # one name replaced by another matches without context (``bound``: a rename)

    @property
    def rename(self) -> bool:
        """One name replaced by another (found without context: every whole occurrence)."""
        return self.free and self.renames

    @property
    def renames(self) -> bool:
        """One name became another (a rename where the old name is bound in the document)."""
        return len(self.old) == 1 and WORD.match(self.old[0]) is not None and WORD.match(self.new) is not None

    @property
    def gap(self) -> bool:
        """What changes is the text between two tokens (an insertion, a deletion), white space included."""
        return not self.old or not self.new.strip()

    def match(self, texts: list[str], i: int) -> int | None:
        """Where this op's ``old`` tokens would end (the index of the token after them) were they
        found at ``texts[i]``, with the context around them; None where they are not."""
        n = len(self.old)
        if self.rename:  # an attribute of the same name is another name, unless the edit renamed one
            if texts[i] != self.old[0] or i + 1 >= len(texts) or (texts[i - 1] == ".") != (self.left[-1] == "."):
                return None
            return i + 1
        k = len(self.left)
        if i + n >= len(texts) or i < k or tuple(texts[i : i + n]) != self.old:
            return None
        same = self.alike if self.loose else str.__eq__
        if not same(texts[i + n], self.right) or not all(map(same, texts[i - k : i], self.left)):
            return None
        return i + n

    @staticmethod
    def alike(token: str, pattern: str) -> bool:
        return token == pattern or (WORD.match(token) is not None and WORD.match(pattern) is not None)

    def loosened(self) -> Op | None:
        """This op with a name in its context matching any name (``toolz.curry(toolz.filter)`` ->
        ``toolz.curry(filter)`` then applies to ``toolz.map``); None where that adds nothing, or would
        leave a pattern of punctuation alone."""
        if self.rename or not any(WORD.match(t) for t in (*self.left, self.right)):
            return None
        if not any(t[0].isalnum() or t[0] in "_$\"'`" for t in self.old):
            return None
        return Op(self.left, self.old, self.right, self.new, True, False)

    @property
    def anchor(self) -> str:
        """A token the pattern names, the longest: a line without it cannot match (a cheap first look)."""
        if self.rename:
            return self.old[0]
        context = () if self.loose else (*self.left, self.right)
        return max((t for t in (*context, *self.old) if t not in (START, END)), key=len, default="")

    @property
    def specific(self) -> bool:
        """The pattern names something (a name, number or string), not only punctuation and marks: a
        pattern of punctuation alone would match half the lines of a file."""
        return any(t[0].isalnum() or t[0] in "_$\"'`" for t in (*self.left, *self.old, self.right) if t)


def ops(before: str, after: str) -> list[Op]:
    """The token-level differences between ``before`` and ``after`` (the same lines before and after
    an edit); none when only white space changed."""
    a, b = tokens(before), tokens(after)
    matcher = difflib.SequenceMatcher(None, [t.text for t in a], [t.text for t in b], autojunk=False)
    out = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal" or i1 == 0 or i2 == len(a) or j1 == 0 or j2 == len(b):
            continue  # (the first START and last END are always equal: each op has a token either side)
        if i1 < i2 and j1 < j2:
            new = after[b[j1].start : b[j2 - 1].end]
        else:
            new = after[b[j1 - 1].end : b[j2].start]
        left = tuple(t.text for t in a[max(0, i1 - 2) : i1] if t.text != END)  # (not the line above's end)
        left = left[-1:] if left[-1] == START else left
        out.append(Op(left, tuple(t.text for t in a[i1:i2]), a[i2].text, new))
    return out


def apply_ops(line: str, found: list[Op]) -> str | None:
    """``line`` (one line, without its break) with every op that matches it applied, left to right,
    none overlapping; None when none matches."""
    toks = tokens(line)
    texts = [t.text for t in toks]
    pieces, pos, i = [], 0, 1
    while i < len(toks):
        for op in found:
            span = op.match(texts, i)
            if span is None:
                continue
            lo, hi = (toks[i - 1].end, toks[span].start) if op.gap else (toks[i].start, toks[span - 1].end)
            if lo < pos:
                continue
            pieces += [line[pos:lo], op.new]
            pos, i = hi, max(span, i + 1)
            break
        else:
            i += 1
    if not pieces:
        return None
    return "".join(pieces) + line[pos:]
