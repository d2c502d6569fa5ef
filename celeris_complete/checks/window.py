"""The code around the cursor that the compiler reads: the innermost enclosing function (dedented) or
the top-level statement, with stand-ins for what the cursor's line leaves open; where an error lies."""

from __future__ import annotations

import ast
import re
import threading
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar

from celeris_complete.checks.brackets import still_open
from celeris_complete.checks.names import MAX_DOCUMENT, may_be_unbound, unbound_names

SCAN_LINES = 400  # how far the window may reach on either side of the cursor
BIG_WINDOW = 20_000  # characters of a window above which the line being typed gets one ending tried
STATEMENT_LINES = 20  # how far back an unclosed bracket may open the statement being typed
SCAN_CHARS = 100 * SCAN_LINES  # the text looked at for them (a whole 50 MB file is never split into lines)
# Lines at column 0 that go on a statement rather than start one.
CONTINUES = ("else", "elif", "except", "finally")
MAX_HEADERS = 16  # columns of stand-in block headers at most (deeper: a continuation line, not a body)

OK, BLAMED, ELSEWHERE = "ok", "blamed", "elsewhere"
NONLOCAL = re.compile(r"\bnonlocal\b")
JUMP = re.compile(r"\b(?:return|raise|break|continue)\b")
JUMPS = (ast.Return, ast.Raise, ast.Break, ast.Continue)
PARSE_LOCK = threading.Lock()


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_code(line: str) -> bool:  # not blank, not a comment (a comment's indentation says nothing)
    stripped = line.lstrip()
    return bool(stripped) and stripped[0] != "#"


def _starts_statement(line: str) -> bool:
    if not line or not (line[0].isalpha() or line[0] in "_@"):
        return False
    return line.split(None, 1)[0].rstrip(":") not in CONTINUES


def _dedent(lines: list[str], shift: int) -> list[str]:
    pad = " " * shift
    return [ln[shift:] if ln.startswith(pad) else ln.lstrip(" ") for ln in lines]


@dataclass(frozen=True)
class Window:
    """The code around the cursor that the compiler sees: ``before`` and ``after`` the answer, with
    ``shift`` columns taken off every line but the cursor's own continuation."""

    before: str
    after: str
    shift: int = 0
    # At a blank cursor line: ``pass`` where a line would go (the body a ``for ...:`` still lacks), or
    # block headers where the next line is indented deeper (see ``_placeholder``).
    placeholder: str = ""
    # For the names check (names_check.py): the document around the window, (prefix, end, suffix,
    # start) with the window between prefix[end:] and suffix[:start]; None: the document is not whole.
    outside: tuple[str, int, str, int] | None = field(default=None, repr=False, compare=False)
    # The text before the window (the prefix up to ``ahead[1]``, where it is whole) and after it (the
    # scanned suffix from line ``beyond[1]`` on): where the string an answer's triple quote belongs to
    # starts or ends when the window lies inside it (a docstring's prose at column 0 starts or ends
    # windows).
    ahead: tuple[str, int] = field(default=("", 0), repr=False, compare=False)
    beyond: tuple[str, int] = field(default=("", 0), repr=False, compare=False)
    _lines: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # text -> error line
    terminator: ClassVar[str] = ":"  # what finishes a line that opens a block (``brackets.closed``)
    _names: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # text -> names missing

    @property
    def nested(self) -> bool:  # a def taken out of what encloses it (see ``error_line``)
        return self.shift > 0

    @cached_property
    def module_level_def(self) -> bool:
        return not self.shift and self.before.startswith(("def ", "async def "))

    def error_line(self, text: str) -> int:
        """``error_line`` of the window with ``text`` (each text compiled once). A decorator line the
        window ends with (the function it decorates not written yet, or after the window: a line at
        column 0 ends it) compiles when a function right after it would make it compile. Where the
        window may lie inside a string (an odd number of triple quotes before it, or one in ``text``)
        an error is judged again as if it did (``_in_string``): a docstring's prose at column 0 looks
        like statements to the window."""
        if text not in self._lines:
            source = self.source(text)
            line = error_line(source, self.nested)
            if line and (self.opened or '"""' in text or "'''" in text):  # rarely
                line = self._in_string(source, text, line)
            if line:
                end = len(source) - len(self.after)  # where the answer ends
                start, stop = source.rfind("\n", 0, end) + 1, source.find("\n", end)
                stop = len(source) if stop < 0 else stop
                last = source[start:stop]  # the answer's last line, with the rest of the cursor's line
                if last.lstrip().startswith("@"):
                    indent = last[: len(last) - len(last.lstrip())]
                    if error_line(f"{source[:stop]}\n{indent}def _(): pass{source[stop:]}", self.nested) == 0:
                        line = 0
            self._lines[text] = line
        return self._lines[text]

    @cached_property
    def opened(self) -> str:
        """The triple quote of a string the window starts inside (an odd number of them before it;
        "" where the document's start was not scanned)."""
        prefix, start = self.ahead
        return next((q for q in ('"""', "'''") if prefix.count(q, 0, start) % 2), "")

    def _in_string(self, source: str, text: str, line: int) -> int:
        """0 where ``source`` (with ``text``, an error at ``line``) compiles as if the window lay inside a
        string: one opened before the window (``opened``), or the one ``text``'s last triple quote
        opens in a statement at column 0, closed after the window (reaching on to the first line after
        it that holds one: elsewhere the window reaches the line that closes a string); else
        ``line``. Only a whole compile counts: an error moved elsewhere may still be the answer's."""
        if self.opened and error_line(self.opened + source, self.nested) == 0:
            return 0
        first, last = self.answer_lines(text)
        if not first <= line <= last or ('"""' not in text and "'''" not in text):
            return line
        if self.shift or _indent(self.before[self.before.rfind("\n") + 1 :] + text) or text[:1] == "\t":
            return line  # not at module level, where prose at column 0 ends windows (a module docstring)
        quote = max(('"""', "'''"), key=text.rfind)
        suffix, end = self.beyond
        start = sum(len(ln) + 1 for ln in suffix.split("\n", end)[:end])
        at = suffix.find(quote, start) if suffix else -1
        if at < 0:
            return line
        stop = suffix.find("\n", at)
        more = suffix[start : len(suffix) if stop < 0 else stop]
        return 0 if error_line(source + more, self.nested) == 0 else line

    def unreachable_below(self, text: str) -> bool:
        """Whether ``text``'s last code line ends a jump (``return``, ``raise``, ``break``, ``continue``)
        with more statements after it in its block: code left dead. Real code almost never does (one of
        HumanEval-Infilling's 1,033 single-line holes); a small model often does where a block's
        ``else:`` was removed. Parsed only when the answer's lines hold a jump's keyword."""
        source = self.source(text)
        lines = source.split("\n")
        first, last = self.answer_lines(text)  # 1-based; the last one holds the rest of the cursor's line
        if text.endswith("\n"):
            last -= 1
        jump = next((n for n in range(last, first - 1, -1) if _is_code(lines[n - 1])), 0)
        return bool(jump) and _dead_after(source, lines, first, jump)

    @cached_property
    def dead_at_cursor(self) -> bool:
        """Whether the code above the cursor's line ends a jump that the code below it would go on after
        in the same block (the window as it is, at a blank line): where a block's ``else:`` was removed."""
        source = self.source("")
        lines = source.split("\n")
        first = self.answer_lines("")[0]
        if lines[first - 1].strip():
            return False
        jump = next((n for n in range(first - 1, 0, -1) if _is_code(lines[n - 1])), 0)
        return bool(jump) and _dead_after(source, lines, jump, jump)

    def names_missing(self, text: str) -> list[str]:
        """The names ``text`` uses that nothing could bind (names_check.py), where the window compiles
        with it (each text judged once). Parsed only when a name in it is written nowhere else in the
        document (or is ``self`` in a function at column 0): rarely."""
        if self.outside is None:
            return []
        if text not in self._names:
            self._names[text] = self._names_missing(text)
        return self._names[text]

    @cached_property
    def _around(self) -> str:
        return self.before + self.after  # the window without an answer, for the names check

    def _names_missing(self, text: str) -> list[str]:
        around = self._around
        continues_word = self.before[-1:].isalnum() or self.before[-1:] == "_"
        if not may_be_unbound(text, self.outside, around, self.module_level_def, continues_word):
            return []
        source = self.source(text)
        tree = parse(source)
        if tree is None:
            return []
        answer = source[len(self.before) : len(source) - len(self.after)]  # as placed (dedented)
        first, last = self.answer_lines(text)
        column = len(self.before[self.before.rfind("\n") + 1 :].encode("utf-8"))  # the cursor's, in bytes
        tail = answer[answer.rfind("\n") + 1 :].encode("utf-8")
        end = len(tail) if "\n" in answer else column + len(tail)
        return unbound_names(tree, (first, column, last, end), self.outside, around, self.module_level_def)

    @cached_property
    def unfinished(self) -> bool:
        """Whether the line being typed is unfinished: the window without an answer fails first on it, at
        or after the cursor (``if `` before ``]``), or compiles once the strings and brackets left open
        before the cursor are closed, with or without a colon, or only its string (the statement goes on
        below), with or without a comma (``return f(a, `` or ``elif x == 'EN``; ``retrun x`` is the
        user's). Not in a triple-quoted string: a docstring's line may go on to the next. A right
        answer finishes that line, so an answer the compiler blames on its own lines is wrong there too
        (see ``strict``)."""
        cursor = self.before[self.before.rfind("\n") + 1 :]
        if not cursor.strip():
            return False
        line, column = self._bare_error
        here = self.before.count("\n") + 1
        if line == here and column > len(cursor):
            return True
        if line <= 0 or line < here - STATEMENT_LINES:
            return False
        # Finished, does the window compile? Its strings and brackets are found from the error's line if
        # that lies before the cursor's (the compiler blames a bracket never closed on its own line),
        # else from the cursor's line (an error below it is what the open line swallowed).
        left = still_open("\n".join(self.before.split("\n")[min(line, here) - 1 :]))
        if left is None:
            return False
        quote, closers = left
        if len(quote) == 3:
            return False  # in a triple-quoted string (a docstring): the answer may go on below
        endings = [quote + closers, quote + closers + ":", quote, quote + ","]
        if len(self.before) + len(self.after) > BIG_WINDOW:  # a compile costs milliseconds: one try
            endings = endings[:1]
        return any(error_line(self.source(ending), self.nested) == 0 for ending in dict.fromkeys(endings) if ending)

    @cached_property
    def _bare_error(self) -> tuple[int, int]:  # ``error_at`` of the window without an answer
        return error_at(self.source(""), self.nested)

    @property
    def strict(self) -> bool:
        """Whether an answer blamed on its own lines is wrong, not the victim of an edit the compiler
        cannot judge: the window is ``clean`` or ``headed``, or only the line being typed is
        ``unfinished``."""
        return self.clean or self.headed or self.unfinished

    @cached_property
    def clean(self) -> bool:
        """Whether the window compiles without an answer, or with a ``pass`` ``placeholder``: then the
        compiler can judge any answer, wherever its error lies."""
        if self._bare_error[0] == 0:
            return True
        return self.placeholder.strip() == "pass" and self._fits_placeholder

    @cached_property
    def headed(self) -> bool:
        """Whether the window compiles with a ``placeholder`` of block headers (the next line is indented
        deeper, or goes on with ``elif``...): a hole where a header was, or the user's own stray indent
        below, which look the same. So an error in the answer's own lines is the answer's, but one
        below it (the code after an answer that is not a header) is not judged."""
        return self._bare_error[0] != 0 and self.placeholder.strip() not in ("", "pass") and self._fits_placeholder

    @cached_property
    def _fits_placeholder(self) -> bool:
        return error_line(self.source(self.placeholder), self.nested) == 0

    def source(self, text: str) -> str:
        if self.shift and "\n" in text:
            first, rest = text.split("\n", 1)
            text = first + "\n" + "\n".join(_dedent(rest.split("\n"), self.shift))
        return self.before + text + self.after

    def answer_lines(self, text: str) -> tuple[int, int]:
        first = self.before.count("\n") + 1
        return first, first + text.count("\n")


def window(prefix: str, suffix: str, whole: bool = True) -> Window:
    """The innermost ``def`` that encloses the cursor (by indentation), or the top-level statement.
    ``whole``: ``prefix`` and ``suffix`` hold the whole document (else names are not judged)."""
    document = (prefix, suffix)
    prefix, suffix = prefix[-SCAN_CHARS:], suffix[:SCAN_CHARS]
    lines = prefix.split("\n")[-SCAN_LINES:]
    typed = lines[-1]
    deepest = _indent(typed) if typed else 0  # how far in every line so far is (at column 0: no def encloses)
    start, shift = 0, 0
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i]
        if not line.strip():
            continue
        ind = _indent(line)
        if i < len(lines) - 1 and ind < deepest and line.lstrip().startswith(("def ", "async def ")):
            start, shift = i, ind
            break
        if ind == 0 and _starts_statement(line):
            start = i
            break
        if line.lstrip()[0] != "#":
            deepest = min(deepest, ind)
    body = lines[start:]
    before = "\n".join(_dedent(body[:-1], shift) + [body[-1][shift:] if shift else body[-1]])
    after_lines = suffix.split("\n")
    end = len(after_lines)
    for j in range(1, min(len(after_lines), SCAN_LINES)):
        line = after_lines[j]
        if line.strip() and (_indent(line) <= shift if shift else _starts_statement(line)):
            if shift == 0 or line.lstrip()[0] != "#":
                end = j
                break
    else:
        end = min(len(after_lines), SCAN_LINES)
    rest = after_lines[:end]
    after = "\n".join(rest[:1] + _dedent(rest[1:], shift)) + ("\n" if end < len(after_lines) else "")
    placeholder = _placeholder(typed, prefix, suffix, after_lines[:end])
    outside = None
    inside_before = len("\n".join(body))
    if whole and len(document[0]) + len(document[1]) <= MAX_DOCUMENT:
        inside_after = len("\n".join(rest)) + (1 if end < len(after_lines) else 0)
        outside = (document[0], len(document[0]) - inside_before, document[1], inside_after)
    ahead = (prefix, len(prefix) - inside_before) if len(document[0]) <= SCAN_CHARS else ("", 0)
    beyond = (suffix, end) if end < len(after_lines) else ("", 0)
    return Window(before, after, shift, placeholder, outside, ahead, beyond)


def _placeholder(typed: str, prefix: str, suffix: str, rest: list[str]) -> str:
    """What stands for the code to write at a blank cursor line (``rest``: the document's lines from
    the cursor's to the window's end). Like an answer, it is in the document's columns, not the
    window's (``Window.source`` dedents it). ``pass`` at the likeliest level; where
    the next code line is indented deeper, block headers (``if True:``) at every column from that level
    to the next line's (a hole where a ``for ...:`` was, and the lines of its body a block may have
    removed: whatever level the code after it dedents to has a header); where the next line goes on a
    statement (``elif``, ``except``...), that statement's start (``if True:`` or ``try:``, with a
    body). At column 0 of a line that holds code, the stand-in ends with a line break (the code stays
    the next line); "" where the cursor follows text or tabs."""
    if typed.strip() or "\t" in typed:
        return ""
    if rest[0].strip() and typed:
        return ""  # in the indentation of a line of code: what goes there is not a line of its own
    level = max(indent_levels(prefix, suffix)[0], len(typed))  # the first line starts at the cursor at the least
    code = rest[0] if rest[0].strip() else next((ln for ln in rest[1:] if _is_code(ln)), "")
    nxt = _indent(code) if code else -1
    word = code.split(None, 1)[0].rstrip(":") if code else ""
    lines = [(col, "if True:") for col in range(level, nxt if nxt - level <= MAX_HEADERS else level)]
    if word in CONTINUES and nxt >= level:
        lines += [(nxt, "try:" if word in ("except", "finally") else "if True:"), (nxt + 1, "pass")]
    if not lines:
        lines = [(level, "pass")]
    first, *more = lines
    text = "\n".join([" " * (first[0] - len(typed)) + first[1]] + [" " * c + t for c, t in more])
    return text + "\n" if rest[0].strip() else text


def parse(source: str) -> ast.Module | None:
    """``source``'s syntax tree, or None where it does not parse."""
    try:
        # One parse at a time: CPython's ast.parse is not safe in parallel threads ("AST constructor
        # recursion depth mismatch", a SystemError), and the engine's callers may be several threads.
        with PARSE_LOCK, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(source, "<completion>")
    except (SyntaxError, ValueError, MemoryError, RecursionError, SystemError):
        return None


def _dead_after(source: str, lines: list[str], first: int, jump: int) -> bool:
    """Whether a jump statement ends at line ``jump`` (1-based) of ``source`` with more statements after
    it in its block; ``lines[first - 1 : jump]`` must hold its keyword (else nothing is parsed)."""
    if not JUMP.search("\n".join(lines[first - 1 : jump])):
        return False
    tree = parse(source)
    if tree is None:  # compiles only as a string's inside, say: no verdict
        return False
    for node in ast.walk(tree):
        for block in (getattr(node, "body", None), getattr(node, "orelse", None), getattr(node, "finalbody", None)):
            if isinstance(block, list):
                for statement in block[:-1]:
                    if isinstance(statement, JUMPS) and statement.end_lineno == jump:
                        return True
    return False


def error_line(source: str, nested: bool = False) -> int:
    """0 when ``source`` compiles, else the line of the compiler's syntax error (-1: no line given).
    Compiled, not only parsed: ``return`` or ``break`` outside what allows them are errors too.
    ``nested``: ``source`` is a def taken out of what encloses it, whose names a ``nonlocal``
    statement may name (judged as ``global`` there: same length, same rules otherwise)."""
    return error_at(source, nested)[0]


def error_at(source: str, nested: bool = False) -> tuple[int, int]:
    """``error_line`` and the error's 1-based column in that line (0: none given)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarnings (an odd escape) are no verdict
            compile(source, "<completion>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        if nested and str(exc.msg).startswith("no binding for nonlocal"):
            return error_at(NONLOCAL.sub("global  ", source))
        return (exc.lineno if exc.lineno is not None else -1), exc.offset or 0
    except (ValueError, MemoryError, RecursionError):  # null bytes, absurd nesting
        return -1, 0
    return 0, 0


def indent_levels(prefix: str, suffix: str) -> list[int]:
    """Where a line written at a blank cursor line plausibly starts, likeliest first: the body of the
    line before when it ends with a colon, else that line's level; the next line's level (at column 0,
    the rest of the cursor's line is the next line); then each
    shallower level the lines before use (a dedent)."""
    lines = prefix[-SCAN_CHARS:].split("\n")[-SCAN_LINES:-1]
    prev = next((ln for ln in reversed(lines) if ln.strip()), "")
    after = suffix[:SCAN_CHARS].split("\n")[:SCAN_LINES]
    typed = prefix[prefix.rfind("\n") + 1 :]
    after[0] = "" if typed else after[0]  # at column 0 the rest of the cursor's line is the next line
    nxt = next((ln for ln in after if _is_code(ln)), None)
    seen = sorted({_indent(ln) for ln in lines if ln.strip()})
    unit = next((n for n in seen if n > 0), 4)
    levels = [_indent(prev) + unit if prev.rstrip().endswith(":") else _indent(prev)]
    if nxt is not None:
        levels.append(_indent(nxt))
    levels += [n for n in reversed(seen) if n < _indent(prev)]
    return list(dict.fromkeys(levels))
