"""Python answers judged by their names: an answer that uses a name nothing can have bound is wrong.

A small model (and a line copied from elsewhere in the file, a draft) often writes a line that
compiles but uses another function's local variable, or ``self`` in a function that has none. Where
the compiler sees the code around the cursor (``syntax_check.Window``), a name the answer loads is
accepted when anything could bind it: a builtin; any binding anywhere in the window (parameters,
assignments, imports, loop and ``with`` targets, nested definitions; the answer's own included); or
the name written anywhere in the document outside the window (a global, an import, or another
function's local: too loose on purpose, so that no right answer is flagged). ``self`` and ``cls``
are the exception: in a function defined at column 0 nothing outside can bind them. A star import
anywhere, or a document known only in part, judges nothing.

On `bench repo`'s seeds 0 and 1 it changed 23 of 1,000 answers and no exact one (lines copied from
other files of the package, using names this file lacks); on HumanEval-Infilling 62 answers, mostly
``self`` in functions at column 0, and no pass (`results/names_check/`).
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
STAR_IMPORT = re.compile(r"^\s*from\s+[\w.]+\s+import\s+\*", re.MULTILINE)


def may_be_unbound(text: str, outside: tuple[str, int, str, int], module_level_def: bool) -> bool:
    """Whether a name ``text`` holds could be one nothing binds: ``self`` or ``cls`` in a function at
    column 0, or a name written nowhere outside the window (then only parsing the window can tell).
    Cheap (a search of the document per name): most answers need no syntax tree."""
    words = {w for w in IDENTIFIER.findall(text) if w not in ALWAYS_BOUND and not keyword.iskeyword(w)}
    if not words:
        return False
    prefix, end, suffix, start = outside
    return any(
        module_level_def if name in PARAMETER_ONLY else not _written(name, prefix, end, suffix, start)
        for name in words
    )


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


def unbound_names(
    tree: ast.AST, first: int, last: int, column: int, outside: tuple[str, int, str, int] | None,
    module_level_def: bool,
) -> list[str]:
    """Names the answer loads (lines ``first``..``last`` of ``tree``, the window with the answer, from
    byte ``column`` of the first: a name the user typed or began before the cursor is theirs) that
    nothing could bind. ``outside``: (prefix, end, suffix, start): the document before the window is
    ``prefix[:end]``, after it ``suffix[start:]``; None: the document is not known whole (judge nothing).
    ``module_level_def``: the window is a function defined at column 0."""
    if outside is None:
        return []
    loaded = [
        n.id for n in ast.walk(tree)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and first <= n.lineno <= last
        and (n.lineno > first or n.col_offset >= column) and n.id not in ALWAYS_BOUND
    ]  # fmt: skip
    if not loaded:
        return []
    bound = bound_names(tree)
    missing = [name for name in dict.fromkeys(loaded) if name not in bound]
    if not missing:
        return []
    prefix, end, suffix, start = outside
    if STAR_IMPORT.search(prefix, 0, end) or STAR_IMPORT.search(suffix, start):
        return []
    return [
        name for name in missing
        if (module_level_def if name in PARAMETER_ONLY else not _written(name, prefix, end, suffix, start))
    ]  # fmt: skip


def _written(name: str, prefix: str, end: int, suffix: str, start: int) -> bool:
    """``name`` is written, not as an attribute, in ``prefix[:end]`` or ``suffix[start:]`` (str.find:
    some 30 times faster here than a regular expression that looks behind)."""
    return _find_word(name, prefix, 0, end) or _find_word(name, suffix, start, len(suffix))


def _find_word(name: str, text: str, lo: int, hi: int) -> bool:
    i = text.find(name, lo, hi)
    while i >= 0:
        j = i + len(name)
        before = text[i - 1] if i > 0 else " "
        after = text[j] if j < len(text) else " "
        if not (before.isalnum() or before in "_.") and not (after.isalnum() or after == "_"):
            return True
        i = text.find(name, i + 1, hi)
    return False
