"""Answers judged by a language's parser outside Python: tree-sitter's grammars (wheels from PyPI).

``grammar_window`` takes the code around the cursor (from the last line before it that starts a
declaration at column 0 to before the next one after it, or through the first ``}`` at column 0; at
most ``WINDOW_CHARS`` on either side, so a huge file costs what a small one does), parses it once as it
is (the base), and judges each answer by parsing the window with the answer at the cursor, incrementally
from the base tree (a small fraction of a millisecond for a function-sized window).

The judgement is differential, as the compiler's is for Python (``checks/syntax.py``): a window cut
from the middle of a file, or code the user is still editing, may hold errors of its own. An error in
the answer's own lines (or where a ``MISSING`` node says the answer left something open) is the
answer's; an error elsewhere that the base did not have is the answer's too where the base parsed
cleanly. ``GrammarWindow`` offers what ``syntax.judge``, ``fits``, ``mended`` and ``repair`` ask of
Python's ``Window``, so the same rules repair, cut or withhold an answer: names are not checked and no
code is found dead (``names_missing`` is empty, ``unreachable_below`` false).

A grammar whose package is missing, or that fails to load, leaves its language unchecked (``load``
returns None): the answer is shown as the model wrote it, after the guard of ``checks/languages.py``.
"""

from __future__ import annotations

import importlib
import threading
import time
from functools import cache, cached_property

from celeris_complete.checks.languages import Language

WINDOW_CHARS = 6_000  # characters on either side of the cursor, at most (about a millisecond to parse)
WINDOW_LINES = 300  # lines on either side looked at for the window's bounds
PARSE_SECONDS = 0.010  # a parse that takes longer is given up (the answer is then not judged)
CHUNK = 4096  # bytes handed to the parser at a time
MAX_ERRORS = 64  # error nodes collected per parse (a wholly broken window has thousands)
# Language name -> (module, function giving the grammar); TypeScript's own .tsx files take the TSX one.
GRAMMARS: dict[str, tuple[str, str]] = {
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "javascript": ("tree_sitter_javascript", "language"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "java": ("tree_sitter_java", "language"),
    "c": ("tree_sitter_c", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
    "shell": ("tree_sitter_bash", "language"),
    "lua": ("tree_sitter_lua", "language"),
}
# What finishes a statement (``closed``'s candidates add it): none in Go, the shell and Lua.
TERMINATORS = {"go": "", "shell": "", "lua": ""}
# A column-0 line that starts with one of these starts a declaration (a comment line too: harmless), unless
# it is one of the ``NOT_A_START``: the rest of a generic's or a type's lines (``> = A & {``) and a block
# comment's inner lines do not.
STARTS = "_$@#/"
NOT_A_START = ("*", "#!", "where")
_local = threading.local()  # one parser per thread and grammar (a tree-sitter Parser is not thread-safe)


def dialect(language: Language, hint: str | None = None) -> str:
    """The grammar's name for ``language``: TypeScript's TSX where the editor's id or the file says so."""
    if language.name == "typescript" and hint:
        lowered = hint.lower()
        if lowered in ("typescriptreact", "tsx") or lowered.endswith(".tsx"):
            return "tsx"
    return language.name


@cache
def load(name: str):
    """The tree-sitter ``Language`` of a grammar (``GRAMMARS``), or None where it is missing or broken."""
    if name not in GRAMMARS:
        return None
    module, function = GRAMMARS[name]
    try:
        import tree_sitter

        return tree_sitter.Language(getattr(importlib.import_module(module), function)())
    except Exception:  # not installed, or built for another tree-sitter: the language stays unchecked
        return None


def available(language: Language | None, hint: str | None = None) -> bool:
    """Whether answers in ``language`` can be judged by its parser here."""
    return language is not None and language.family != "python" and load(dialect(language, hint)) is not None


def grammars() -> list[str]:
    """The grammars that load here (``celeris/status``, ``selftest``)."""
    return [name for name in GRAMMARS if load(name) is not None]


def _parser(name: str):
    parsers = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = {}
    parser = parsers.get(name)
    if parser is None:
        import tree_sitter

        parser = parsers[name] = tree_sitter.Parser(load(name))
    return parser


def parse(parser, data: bytes, old=None):
    """The tree of ``data`` (from ``old``, edited, where given), or None past ``PARSE_SECONDS``."""
    deadline = time.perf_counter() + PARSE_SECONDS

    def read(at: int, _point) -> bytes:
        return data[at : at + CHUNK]

    def late(*_) -> bool:
        return time.perf_counter() > deadline

    try:
        if old is None:
            return parser.parse(read, progress_callback=late)
        return parser.parse(read, old, progress_callback=late)
    except ValueError:  # given up: the parser would resume this parse on its next call unless reset
        parser.reset()
        return None


def _starts_declaration(line: str) -> bool:
    return bool(line) and (line[0].isalnum() or line[0] in STARTS) and not line.startswith(NOT_A_START)


def bounds(prefix: str, suffix: str) -> tuple[str, str]:
    """The window's text before and after the cursor (see the module doc)."""
    head = prefix[-WINDOW_CHARS:]
    above = head.split("\n")
    if len(head) < len(prefix):
        above = above[1:] or [""]  # a cut line is not the window's first
    start = max(0, len(above) - WINDOW_LINES)
    for i in range(len(above) - 1, start - 1, -1):
        if _starts_declaration(above[i]):
            start = i
            break
    tail = suffix[:WINDOW_CHARS]
    below = tail.split("\n")
    if len(tail) < len(suffix) and len(below) > 1:
        below = below[:-1]
    stop = min(len(below), WINDOW_LINES)
    for i in range(1, stop):
        if below[i].startswith("}"):
            stop = i + 1
            break
        if _starts_declaration(below[i]):
            stop = i
            break
    return "\n".join(above[start:]), "\n".join(below[:stop])


def _errors(node, out: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(first row, last row) of the tree's ERROR and MISSING nodes, outermost first."""
    stack = [node]
    while stack and len(out) < MAX_ERRORS:
        node = stack.pop()
        if node.is_error or node.is_missing:
            out.append((node.start_point[0], node.end_point[0]))
            continue
        if node.has_error:
            stack.extend(reversed(node.children))
    return out


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "replace")  # a lone surrogate (an odd editor buffer) is one unknown byte


class GrammarWindow:
    """The window around the cursor as its language's parser reads it (see the module doc); what the
    answer checks of ``checks/syntax.py`` ask of a window."""

    def __init__(self, prefix: str, suffix: str, name: str) -> None:
        self.name = name
        self.terminator = TERMINATORS.get(name, ";")
        self.before, self.after = bounds(prefix, suffix)
        self.row = self.before.count("\n")  # the cursor's row in the window
        self._head, self._tail = _encode(self.before), _encode(self.after)
        self._column = len(_encode(self.before[self.before.rfind("\n") + 1 :]))
        self._parser = _parser(name)
        self._tree = parse(self._parser, self._head + self._tail)
        if self._tree is None:
            raise TimeoutError
        self.base = _errors(self._tree.root_node, [])
        self._old = set(self.base)
        self._lines: dict[str, int] = {}

    @property
    def clean(self) -> bool:
        """The window parses without an error as it is (an answer that adds one is wrong)."""
        return not self.base

    @cached_property
    def strict(self) -> bool:
        """The window parses cleanly, or would without what was typed on the cursor's line (the line being
        typed is the only thing unfinished): the parser's blame of an answer is to be trusted, and every
        error around the answer is its own."""
        if self.clean:
            return True
        typed = len(self.before) - self.before.rfind("\n") - 1
        if not self.before[len(self.before) - typed :].strip():
            return False  # nothing typed: the errors are elsewhere
        blanked = parse(self._parser, self._head[: len(self._head) - self._column] + self._tail)
        return blanked is not None and not blanked.root_node.has_error

    dead_at_cursor = False
    headed = False

    def names_missing(self, text: str) -> list[str]:
        return []

    def unreachable_below(self, text: str) -> bool:
        return False

    def answer_lines(self, text: str) -> tuple[int, int]:
        """The 1-based lines of the window that ``text`` at the cursor spans."""
        return self.row + 1, self.row + 1 + text.count("\n")

    def error_line(self, text: str) -> int:
        """0 when ``text`` at the cursor adds no error to the window; else the 1-based line of the first
        error it adds (one in its own lines first); -1 when the parse took too long (a right answer parses
        fast, error recovery is what takes long: ``judge`` blames it where the window is clean, as an error
        elsewhere)."""
        found = self._lines.get(text)
        if found is None:
            found = self._lines[text] = self._error_line(text)
        return found

    def _error_line(self, text: str) -> int:
        if not text:
            return 0
        added = _encode(text)
        at = len(self._head)
        k = text.count("\n")
        last = text[text.rfind("\n") + 1 :]
        end_column = len(_encode(last)) + (self._column if k == 0 else 0)
        tree = self._tree.copy()
        tree.edit(
            start_byte=at, old_end_byte=at, new_end_byte=at + len(added), start_point=(self.row, self._column),
            old_end_point=(self.row, self._column), new_end_point=(self.row + k, end_column),
        )  # fmt: skip
        tree = parse(self._parser, self._head + added + self._tail, tree)
        if tree is None:
            return -1
        errors = _errors(tree.root_node, [])
        end = self.row + k  # the answer's last row
        elsewhere = 0
        for first, last_row in errors:
            if self.row <= first <= end:
                return first + 1  # starts in the answer's own lines
            if self.strict and first <= end + 1 and last_row >= self.row:
                return min(max(first, self.row), end) + 1  # around it, or just after: it left its line unfinished
            if first < self.row <= last_row:  # across the answer: the base's own, which it neither made nor mended?
                if (first, last_row - k if last_row > end else self.row) in self._old:
                    continue
                return self.row + 1
            if not elsewhere and not self._had(first if first < self.row else first - k):  # above or below it
                elsewhere = first + 1
        return elsewhere

    def _had(self, row: int) -> bool:
        """Whether the base had an error starting on this row (of the window without the answer)."""
        return any(first == row for first, _ in self.base)


def grammar_window(prefix: str, suffix: str, language: Language, hint: str | None = None) -> GrammarWindow | None:
    """The window around the cursor for ``language``'s parser; None where it has none here."""
    name = dialect(language, hint)
    if load(name) is None:
        return None
    try:
        return GrammarWindow(prefix, suffix, name)
    except TimeoutError:  # a window the parser cannot read in time: the answer is not judged
        return None
