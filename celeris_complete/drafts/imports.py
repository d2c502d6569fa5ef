"""Drafts for Python import lines: the names the document uses that nothing binds, imported the way
the workspace imports them.

A line among imports is hard to guess from the text around it (any module could come next) and easy
to know from the rest of the file: the line the user is about to write imports what the code below
uses and nothing binds yet. Those names come from the document's symbol table (``symtable``: a name
that some scope reads as a global and the module never assigns or imports, builtins aside; with
``from __future__ import annotations`` the annotations' names too, which the table leaves out). How
to import each: as the workspace's own import lines do (``from tomlkit.items import Table`` in
another file: its votes); else from the standard-library module that defines it
(``STANDARD_NAMES``); else guessed: from the module of the ``from M import`` lines around the cursor
(or the one typed), or ``import name`` for a lowercase name only ever written before a dot. Names
from one module share a line unless the document writes one name per line (it imports from one
module on several lines). Of several lines, the one that sorts between the import lines around the
cursor comes first (import lines are most often sorted), then the one with more votes, guesses last.

Asked only where an import is being written: on a line that starts with ``from `` or ``import ``, or
at the start of a line (or in its first word) whose nearest code line above or below at its
indentation is an import, or which opens an ``if TYPE_CHECKING:`` block.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import re
import symtable
import warnings
from collections import Counter, defaultdict

from celeris_complete.checks.names import STAR_IMPORT
from celeris_complete.checks.window import PARSE_LOCK, parse

FROM_IMPORT = re.compile(r"from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+\(?([^()#]*)\)?[ \t]*(?:#.*)?$")
PLAIN_IMPORT = re.compile(r"import[ \t]+([\w.]+(?:[ \t]+as[ \t]+\w+)?(?:[ \t]*,[ \t]*[\w.]+(?:[ \t]+as[ \t]+\w+)?)*)$")
STARTS_IMPORT = re.compile(r"(?:from|import)[ \t]")
ALIAS = re.compile(r"([\w.]+)(?:[ \t]+as[ \t]+(\w+))?$")
BUILTINS = frozenset(dir(builtins))
TYPED_MODULE = re.compile(r"from[ \t]+(\.*[\w.]*\w|\.+)[ \t]")  # ``from M `` typed: M
MAX_GUESSED = 16  # unbound names, at most, whose way to be imported is guessed
STANDARD_MODULES = (
    "collections.abc", "typing", "dataclasses", "functools", "itertools", "collections", "contextlib", "pathlib",
    "datetime", "enum", "abc", "operator", "types", "numbers", "decimal", "fractions", "io", "os", "os.path", "re",
    "json", "math", "textwrap", "warnings", "logging", "copy", "inspect", "string", "time", "threading",
    "subprocess", "shutil", "tempfile", "random", "heapq", "bisect", "weakref", "unicodedata", "html",
    "urllib.parse", "struct", "hashlib", "base64", "argparse", "traceback", "uuid", "glob", "fnmatch", "sys",
)  # fmt: skip
FUTURE_ANNOTATIONS = re.compile(r"^from[ \t]+__future__[ \t]+import[ \t][^\n]*\bannotations\b", re.MULTILINE)
TYPE_CHECKING_BLOCK = re.compile(r"if[ \t]+(?:typing\.)?TYPE_CHECKING[ \t]*:")  # imports for annotations only
MAX_STATEMENT = 300  # characters: a longer import line is not read (nor its regular expression run)
MAX_DOCUMENT = 120_000  # characters: a larger document gets no import drafts (its parse costs ~0.4 ms per 1,000)
NEIGHBOUR_LINES = 20  # lines looked through for the code line above and below the cursor's


def _standard_names(modules: tuple[str, ...]) -> dict[str, str]:
    """Each public name of these standard-library modules -> the first of them that defines it (their
    ``__all__``, else what they hold that is not a module); read once, when the server starts."""
    out: dict[str, str] = {}
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        public = getattr(module, "__all__", None)
        if public is None:
            public = [n for n in dir(module) if not n.startswith("_") and not inspect.ismodule(getattr(module, n))]
        for n in public:
            if isinstance(n, str):
                out.setdefault(n, name)
    return out


# Where a name nothing in the workspace imports comes from; of modules that share a name, the first
# (``Iterable`` from collections.abc rather than typing's alias).
STANDARD_NAMES = _standard_names(STANDARD_MODULES)


def parse_import(statement: str) -> tuple[str | None, list[tuple[str, str]]] | None:
    """(module or None for ``import x``, [(what is imported, the name it binds)]) of one import statement
    on one line; None for anything else."""
    if len(statement) > MAX_STATEMENT:
        return None
    m = FROM_IMPORT.match(statement)
    if m:
        names = _aliases(m.group(2), plain=False)
        return (m.group(1), names) if names and m.group(1) else None
    m = PLAIN_IMPORT.match(statement)
    if m:
        names = _aliases(m.group(1), plain=True)
        return (None, names) if names else None
    return None


def _aliases(text: str, plain: bool) -> list[tuple[str, str]] | None:
    """[(what is imported, the name it binds)] of ``a, b as c`` (an empty part, as after a trailing
    comma, skipped); ``import a.b`` binds ``a``. None if a part is not a name."""
    out = []
    for part in text.split(","):
        alias = ALIAS.match(part.strip())
        if alias is None:
            if part.strip():
                return None
            continue
        imported = alias.group(1)
        out.append((imported, alias.group(2) or (imported.split(".")[0] if plain else imported)))
    return out


class _DocumentNames:
    """A document's unbound names, and (parsed when first asked) those of them only written before a dot."""

    def __init__(self, source: str, unbound: frozenset[str]) -> None:
        self.source, self.unbound = source, unbound
        self._bases: frozenset[str] | None = None

    def bases(self) -> frozenset[str]:
        if self._bases is None:
            self._bases = attribute_bases(parse(self.source), self.unbound)
        return self._bases


# The last document's unbound names and those of them only ever written before a dot, by the hashes
# of the text above and below the cursor's line and its indentation: typing on an import line asks
# again with only that line changed. One tuple, replaced whole.
_last: tuple[tuple[int, int, str] | None, _DocumentNames | None] = (None, None)


def unbound_names(source: str) -> frozenset[str] | None:
    """The names some scope of ``source`` reads as globals that the module never binds (builtins
    aside; nor a name a function declares ``global`` and assigns); None when it does not parse."""
    try:
        with PARSE_LOCK, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            top = symtable.symtable(source, "<document>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError, SystemError):
        return None
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    out: set[str] = set()
    tables = [top]
    while tables:
        table = tables.pop()
        for s in table.get_symbols():
            if s.is_referenced() and (table is top or s.is_global()):
                out.add(s.get_name())
            if table is not top and s.is_declared_global() and (s.is_assigned() or s.is_imported()):
                bound.add(s.get_name())  # ``global x; x = ...`` in a function, or a walrus in a comprehension
        tables.extend(table.get_children())
    if FUTURE_ANNOTATIONS.search(source):  # annotations left unevaluated are not in the symbol table
        tree = parse(source)
        out |= annotation_names(tree) if tree is not None else set()
    return frozenset(n for n in out - bound - BUILTINS if not n.startswith("__"))


def attribute_bases(tree: ast.Module | None, names: frozenset[str]) -> frozenset[str]:
    """Those of ``names`` that ``tree``'s code reads and only ever as the base of an attribute
    (``name.attr``): modules, most likely."""
    if tree is None or not names:
        return frozenset()
    bases: Counter = Counter()
    reads: Counter = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in names:
            reads[node.id] += 1
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names:
            bases[node.value.id] += 1
    return frozenset(n for n, k in reads.items() if bases[n] == k)


def annotation_names(tree: ast.Module) -> set[str]:
    """The names read in the annotations of ``tree``'s definitions (string annotations included, not
    the strings of ``Literal[...]`` nor ``Annotated``'s metadata)."""
    found: set[str] = set()
    pending: list[ast.AST] = []
    statements: list = list(tree.body)  # statements only: annotations sit on definitions and AnnAssign
    while statements:
        node = statements.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(p for p in (a.vararg, a.kwarg) if p is not None)]
            pending.extend(p.annotation for p in params if p.annotation is not None)
            if node.returns is not None:
                pending.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            pending.append(node.annotation)
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            statements.extend(getattr(node, field, ()))
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 200:
            try:
                pending.append(ast.parse(node.value, mode="eval").body)
            except (SyntaxError, ValueError, RecursionError, MemoryError, SystemError):
                pass
        elif isinstance(node, ast.Subscript):
            pending.append(node.value)
            generic = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", "")
            if generic == "Literal":
                continue  # its strings are values, not names
            if generic == "Annotated" and isinstance(node.slice, ast.Tuple) and node.slice.elts:
                pending.append(node.slice.elts[0])  # the rest is metadata
            else:
                pending.append(node.slice)
        elif isinstance(node, ast.expr):
            pending.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.expr))
    return found


def workspace_imports(table, exclude: str | None) -> Counter:
    """The import lines (stripped) of the workspace's files other than ``exclude``, with their counts;
    ``table`` is a ``drafts.LineTable`` (or None)."""
    out: Counter = Counter()
    if table is None:
        return out
    for keyword in ("from ", "import "):
        found: Counter = Counter()
        table.continuations(keyword, exclude, found)
        for rest, n in found.items():
            out[keyword + rest] += n
    return out


def _neighbour(lines: list[str], indent: str | None) -> str | None:
    """The first code line of ``lines`` (nearest first) at ``indent`` (None: at any), stripped; None
    when one at another indentation (or nothing) comes first."""
    for line in lines[:NEIGHBOUR_LINES]:
        content = line.strip()
        if not content or content.startswith("#"):
            continue
        here = line[: len(line) - len(line.lstrip(" \t"))]
        return content if indent is None or here == indent else None
    return None


def _sort_key(statement: str) -> tuple[str, str]:
    parsed = parse_import(statement)
    if parsed is None:
        return statement.lower(), ""
    module, names = parsed
    return ((module or names[0][0]).lower(), ", ".join(n for n, _ in names).lower() if module else "")


def _name_order(name: str) -> tuple[int, str]:
    """isort's order within a line: constants, then classes, then the rest, each alphabetically."""
    kind = 0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2
    return kind, name.lower()


def _document_names(source: str) -> _DocumentNames | None:
    """The unbound names of ``source``, or None when it does not parse, has none, or imports ``*``
    (which may bind anything)."""
    if STAR_IMPORT.search(source):
        return None
    unbound = unbound_names(source)
    return _DocumentNames(source, unbound) if unbound else None


def import_drafts(prefix: str, suffix: str, workspace=None, limit: int = 3) -> list[str]:
    """Up to ``limit`` continuations of the cursor's line (text after the cursor) that import names the
    document (``prefix`` + ``suffix``, whole) uses and nothing binds; ``workspace()`` gives the import
    lines of the workspace's other files (``workspace_imports``), asked only where an import is written."""
    start = prefix.rfind("\n") + 1
    line = prefix[start:]
    typed = line.lstrip(" \t")
    indent = line[: len(line) - len(typed)]
    if "\n" in suffix:
        rest, below = suffix.split("\n", 1)
    else:
        rest, below = suffix, ""
    if rest.strip() or len(prefix) + len(suffix) > MAX_DOCUMENT:
        return []
    above_lines = prefix[max(0, start - 1 - 4000) : max(0, start - 1)].split("\n")[::-1] if start else []
    below_lines = below[:4000].split("\n")
    up, down = _neighbour(above_lines, indent), _neighbour(below_lines, indent)
    among_imports = any(n is not None and STARTS_IMPORT.match(n) for n in (up, down)) or (
        up is None and TYPE_CHECKING_BLOCK.match(_neighbour(above_lines, None) or "") is not None
    )
    if not (STARTS_IMPORT.match(typed) or (among_imports and ("from".startswith(typed) or "import".startswith(typed)))):
        return []
    global _last
    key = (hash(prefix[:start]), hash(below), indent)
    seen = _last
    if seen[0] != key:
        seen = _last = (key, _document_names(prefix[:start] + indent + "pass\n" + below))
    if seen[1] is None:
        return []
    document = seen[1]
    unbound = document.unbound
    # How each name is imported: as the workspace's import lines do (their votes), or the document's own
    # (no votes: one a function makes locally); a module the document already imports from breaks ties.
    document_imports = Counter(
        s for s in (raw.strip() for raw in (prefix[:start] + below).split("\n")) if STARTS_IMPORT.match(s)
    )
    ways: dict[str, Counter] = defaultdict(Counter)  # a bound name -> (module or None, imported) -> votes
    modules_here: Counter = Counter()
    for statement in document_imports:
        parsed = parse_import(statement)
        if parsed and parsed[0]:
            modules_here[parsed[0]] += 1
    for source, weight in ((workspace() if workspace else Counter(), 1), (document_imports, 0)):
        for statement, votes in source.items():
            parsed = parse_import(statement)
            if parsed is None:
                continue
            module, names = parsed
            for imported, bound in names:
                if bound in unbound:
                    ways[bound][(module, imported)] += votes * weight
    for bound in unbound - ways.keys():  # where nothing else says, the standard library's module for it
        module = STANDARD_NAMES.get(bound)
        if module is not None and bound not in document.bases():
            ways[bound][(module, bound)] = 0
    single = any(n > 1 for n in modules_here.values())  # one name per line: the document's style
    by_module: dict[str, list[str]] = defaultdict(list)
    votes: Counter = Counter()  # a line -> its votes
    module_votes: Counter = Counter()
    lines: list[str] = []
    for bound, counts in ways.items():
        (module, imported), n = max(
            counts.items(), key=lambda kv: (kv[1] + 0.5 * (kv[0][0] in modules_here), kv[0][0] or "", kv[0][1])
        )
        name = imported if imported == bound else f"{imported} as {bound}"
        if module is None and imported.split(".")[0] == bound:  # ``import os.path`` binds ``os``
            lines.append(f"import {imported}")
            votes[lines[-1]] = n
        elif module is None:
            lines.append(f"import {name}")
            votes[lines[-1]] = n
        elif single:
            lines.append(f"from {module} import {name}")
            votes[lines[-1]] = n
        else:
            by_module[module].append(name)
            module_votes[module] += n
    for module, names in by_module.items():
        lines.append(f"from {module} import {', '.join(sorted(names, key=_name_order))}")
        votes[lines[-1]] = module_votes[module]

    # Names nothing says how to import: one among ``from M import`` lines (or after ``from M `` typed)
    # may come from M; one only ever written as ``name.attr`` may be a module of its own.
    modules = {p[0] for p in map(parse_import, (n for n in (up, down) if n is not None)) if p is not None and p[0]}
    if (typed_module := TYPED_MODULE.match(typed)) is not None:
        modules.add(typed_module.group(1))
    modules.discard("__future__")
    guessed = set()
    for bound in sorted(unbound - ways.keys())[:MAX_GUESSED]:
        guessed.update(f"from {module} import {bound}" for module in modules)
        if not bound[0].isupper() and bound in document.bases():
            guessed.add(f"import {bound}")
    lines += sorted(guessed - set(lines))

    def fit(statement: str) -> int:
        key = _sort_key(statement)
        return sum(
            1
            for other, after in ((up, True), (down, False))
            if other is not None and STARTS_IMPORT.match(other) and (_sort_key(other) <= key) == after
        )

    lines = [s for s in lines if s.startswith(typed) and len(s) > len(typed)]
    lines.sort(key=lambda s: (-fit(s), -votes[s], s in guessed, s))
    return [s[len(typed) :] for s in lines[:limit]]
