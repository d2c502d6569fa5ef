"""Python answers judged by their names: an answer that uses a name nothing can have bound is wrong.

A small model (and a line copied from elsewhere in the file, a draft) often writes a line that
compiles but uses another function's local variable, or ``self`` in a function that has none. Where
the compiler sees the code around the cursor (``syntax_check.Window``), a name the answer loads is
accepted when anything could bind it: a builtin; any binding anywhere in the window (parameters,
assignments, imports, loop and ``with`` targets, nested definitions; the answer's own included); the
base of an attribute (a module or a global object the file may be about to import); or the name
written anywhere else in the document (a global, an import; loose on purpose, so that no right answer
is flagged), except inside another top-level function or class, where only the name its header
defines or a ``global`` statement counts (another function's parameter or local binds nothing here;
told by the line at column 0 each occurrence lies under, without a parse). ``self`` and ``cls`` are
the exception: in a function defined at column 0 only a name at column 0 outside could bind them. A
star import anywhere, a document known only in part, or one over ``MAX_DOCUMENT`` characters judges
nothing.

On `bench repo`'s seeds 0 and 1 it changed 22 of 1,000 answers and no exact one (lines copied from
other files of the package, using names this file lacks); on HumanEval-Infilling it withholds mostly
``self`` in functions at column 0, pass@1 unchanged (`results/names_check/`).
"""

from __future__ import annotations

import ast
import builtins
import keyword
import re

ALWAYS_BOUND = frozenset(dir(builtins)) | {
    "__file__", "__name__", "__doc__", "__spec__", "__package__", "__path__", "__loader__", "__builtins__",
    "__class__", "__debug__", "__annotations__", "__dict__", "__module__", "__qualname__",
}  # fmt: skip
PARAMETER_ONLY = ("self", "cls")  # bound by a method's parameters, never (by convention) by a module
IDENTIFIER = re.compile(r"(?<![\w.])[A-Za-z_]\w*")  # not an attribute
WORD_END = re.compile(r"^\w+")
STAR_IMPORT = re.compile(r"^[ \t]*from[ \t]+[\w.]+[ \t]+import[ \t]+\*", re.MULTILINE)
MAX_DOCUMENT = 1_000_000  # characters: a larger document is not judged (searching it would cost too much)
FIND_LIMIT = 2_000  # occurrences inside other words looked past before a name counts as written
BLOCKS_LIMIT = 200  # occurrences inside other functions looked past before it counts as written (~1 ms)
COLUMN_0 = re.compile(r"\n(?=[^\s#])")  # a line that starts at column 0 (not a comment): a top-level statement
SCOPE_HEADERS = ("def ", "async def ", "class ")  # top-level statements whose names stay inside
GLOBAL = re.compile(r"[ \t]*global[ \t]")
DEFINES = re.compile(r"(?:async[ \t]+)?def[ \t]+(\w+)|class[ \t]+(\w+)")

# (prefix, end, suffix, start): the document before the window is prefix[:end], after it suffix[start:].
Outside = tuple[str, int, str, int]


def may_be_unbound(
    text: str, outside: Outside, window_text: str, module_level_def: bool, continues_word: bool = False
) -> bool:
    """Whether a name in ``text`` could be one nothing binds (only parsing the window can tell): ``self``
    or ``cls`` in a function at column 0, or a name written nowhere else, neither in the window
    (``window_text``, the answer left out) nor outside it. A few ``str.find``: most answers need no tree.
    ``continues_word``: the cursor is inside a word, whose end ``text`` starts with (the user's name)."""
    if continues_word:
        text = WORD_END.sub("", text, count=1)
    words = {
        m.group() for m in IDENTIFIER.finditer(text)
        if m.group() not in ALWAYS_BOUND and not keyword.iskeyword(m.group())
        and (m.group() in PARAMETER_ONLY or not text.startswith(".", m.end()))  # an attribute's base: see below
    }  # fmt: skip
    return any(_suspect(name, outside, window_text, module_level_def) for name in words)


def unbound_names(
    tree: ast.AST, span: tuple[int, int, int, int], outside: Outside, window_text: str, module_level_def: bool
) -> list[str]:
    """Names the answer loads that nothing could bind. ``tree``: the window with the answer; ``span``:
    (first line, byte column, last line, byte column) of the answer in it (a name the user began before
    the cursor, or the rest of the line after the answer, is not the answer's)."""
    first, column, last, end = span
    # The base of an attribute (``settings.TIMEOUT``, ``np.array``) is most often a module or a global
    # object: an import the file may be about to get (a line from another file of the workspace): not judged.
    bases = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    loaded = [
        n.id for n in ast.walk(tree)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and first <= n.lineno <= last
        and (n.lineno > first or n.col_offset >= column) and (n.lineno < last or n.col_offset < end)
        and n.id not in ALWAYS_BOUND and (n.id in PARAMETER_ONLY or id(n) not in bases)
    ]  # fmt: skip
    if not loaded:
        return []
    bound = bound_names(tree)
    missing = [name for name in dict.fromkeys(loaded) if name not in bound]
    if not missing or _star_import(tree, outside):
        return []
    return [name for name in missing if _suspect(name, outside, window_text, module_level_def)]


def _suspect(name: str, outside: Outside, window_text: str, module_level_def: bool) -> bool:
    prefix, end, suffix, start = outside
    if name in PARAMETER_ONLY:  # at column 0 outside the window, a module could bind it after all
        at_column_0 = re.compile(rf"^{name}\b", re.MULTILINE)
        return module_level_def and not (at_column_0.search(prefix, 0, end) or at_column_0.search(suffix, start))
    if _find_word(name, window_text, 0, len(window_text)):
        return False
    own = _block_start(prefix, end)  # the top-level statement the window lies in (its start in prefix)
    return not (
        _find_word(name, prefix, 0, end, lambda b: b == own)
        or _find_word(name, suffix, start, len(suffix), lambda b: b < start)
    )


def _block_start(text: str, i: int) -> int:
    """Where the line at column 0 that ``i`` lies under starts (0: none before it)."""
    j = text.rfind("\n", 0, i)
    while j >= 0:
        c = text[j + 1 : j + 2]
        if c and not c.isspace() and c != "#":
            return j + 1
        j = text.rfind("\n", 0, j)
    return 0


def _binds_from(text: str, i: int, block: int, same_block) -> bool:
    """Whether the name written at ``i``, under the column-0 line at ``block``, could bind it for the
    window: in the window's own top-level statement (an enclosing function), or at module level (any
    statement but a function or class); inside another top-level function or class only as the name
    its header defines or in a ``global`` statement (another function's parameter or local binds
    nothing here)."""
    if same_block(block) or not text.startswith(SCOPE_HEADERS, block):
        return True
    line = text.rfind("\n", 0, i) + 1
    if line == block:
        m = DEFINES.match(text, block)
        return m is not None and i in (m.start(1), m.start(2))
    return GLOBAL.match(text, line, i) is not None


def _star_import(tree: ast.AST, outside: Outside) -> bool:
    prefix, end, suffix, start = outside
    if STAR_IMPORT.search(prefix, 0, end) or STAR_IMPORT.search(suffix, start):
        return True
    return any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.walk(tree))


def bound_names(tree: ast.AST) -> set[str]:
    """Every name anything in ``tree`` binds, in whatever scope (a superset of what one scope sees)."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            out.add(n.id)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            out.update(n.names)
        elif isinstance(n, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and n.name:
            out.add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            out.add(n.rest)
        elif type(n).__name__ in ("TypeVar", "ParamSpec", "TypeVarTuple"):  # def f[T](): Python 3.12+
            out.add(n.name)  # type: ignore[attr-defined]
    return out


def _find_word(name: str, text: str, lo: int, hi: int, same_block=None) -> bool:
    """``name`` written in ``text[lo:hi]``, not as an attribute nor inside another word (str.find: some
    30 times faster here than a regular expression that looks behind). Past ``FIND_LIMIT`` occurrences
    inside other words, or ``BLOCKS_LIMIT`` in other functions (``same_block``, given: see ``_binds_from``),
    it counts as written (a short name in a huge document: judged loosely)."""
    i, seen, elsewhere = text.find(name, lo, hi), 0, 0
    block, scanned = 0, -1  # the column-0 line above the last occurrence looked at, and where the scan got to
    while i >= 0:
        j = i + len(name)
        before = text[i - 1] if i > 0 else " "
        after = text[j] if j < len(text) else " "
        if not (before.isalnum() or before in "_.") and not (after.isalnum() or after == "_"):
            if same_block is None:
                return True
            # (i + 1: the lookahead sees the occurrence's own first character, at column 0 or not)
            block = _block_start(text, i) if scanned < 0 else _last_column_0(text, scanned, i + 1, block)
            scanned = i
            if _binds_from(text, i, block, same_block):
                return True
            elsewhere += 1
            if elsewhere >= BLOCKS_LIMIT:
                return True
        seen += 1
        if seen >= FIND_LIMIT:
            return True
        i = text.find(name, i + 1, hi)
    return False


def _last_column_0(text: str, lo: int, hi: int, block: int) -> int:
    """The start of the last line at column 0 in ``text[lo:hi]``, else ``block`` (the one above ``lo``)."""
    for m in COLUMN_0.finditer(text, lo, hi):
        block = m.end()
    return block
