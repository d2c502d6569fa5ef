"""The layout shows the architecture: packages by job, dependencies pointing one way, no import circles,
modules of a readable size (read with ast; nothing is imported), and results/ that holds summaries."""

from __future__ import annotations

import ast
import subprocess

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = {"celeris_complete": REPO / "celeris_complete", "celeris_lsp": REPO / "lsp"}
MAX_LINES = 500

# Which packages each package may import (besides itself and the foundation, config and errors), in the
# order of celeris_complete/__init__.py: cli -> serve, bench, lsp -> engine -> backends, drafts ->
# model, checks -> system.  training sits beside the engine: models come out of it, completions do not
# go through it.
FOUNDATION = {"config", "errors", "__init__"}  # __init__: the version
MAY_IMPORT = {
    "system": set(),
    "checks": set(),
    "model": {"system"},
    "drafts": {"checks", "system"},
    "backends": {"model", "checks", "system"},
    "engine": {"backends", "drafts", "checks", "model", "system"},
    "training": {"model", "system"},
    "edits": {"checks", "system"},
    "serve": {"edits", "engine", "backends", "drafts", "checks", "model", "system"},
    "bench": {"edits", "engine", "training", "backends", "drafts", "checks", "model", "system"},
    "celeris_lsp": {"edits", "engine", "training", "drafts", "checks", "model", "system"},
    "cli": {
        "serve", "bench", "celeris_lsp", "edits", "engine", "training", "backends", "drafts", "checks", "model",
        "system",
    },  # fmt: skip
    "config": {"errors"},
    "errors": set(),
    "__init__": set(),
}


def module_name(path: Path) -> str:
    for package, root in ROOTS.items():
        if root in path.parents:
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            return ".".join([package, *parts])
    raise ValueError(path)


def modules() -> dict[str, Path]:
    return {module_name(p): p for root in ROOTS.values() for p in sorted(root.rglob("*.py"))}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project's modules that ``name`` imports, at module level or inside functions (a lazy import
    still closes a circle), not those under ``if TYPE_CHECKING``."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def resolve(module: str) -> None:
        while module and module not in known:
            module = module.rpartition(".")[0]
        if module and module != name:
            found.add(module)

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    resolve(alias.name)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                for alias in child.names:
                    full = f"{base}.{alias.name}"
                    resolve(full if full in known else base)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imports(name, path, known) for name, path in found.items()}


def package_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "celeris_lsp":
        return "celeris_lsp"
    return parts[1] if len(parts) > 1 else "__init__"


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return out


def test_no_import_circles_even_through_lazy_imports():
    assert cycles(graph()) == []


def test_packages_import_only_the_packages_below_them():
    wrong = []
    for module, targets in graph().items():
        source = package_of(module)
        allowed = MAY_IMPORT[source] | FOUNDATION | {source}
        wrong += [f"{module} -> {t}" for t in sorted(targets) if package_of(t) not in allowed]
    assert wrong == []


def test_every_package_says_what_it_holds_and_what_it_may_import():
    for init in sorted((REPO / "celeris_complete").rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        if init.parent.name == "celeris_complete":
            assert "import" in doc, init
        else:
            assert "May import:" in doc, init


def test_modules_stay_readable():
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_the_completion_pipeline_reads_top_to_bottom():
    """``Engine.complete`` runs named stages, each a function of its own (engine/), in a screenful."""
    tree = ast.parse((REPO / "celeris_complete" / "engine" / "pipeline.py").read_text(encoding="utf-8"))
    engine = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Engine")
    complete = next(n for n in engine.body if isinstance(n, ast.FunctionDef) and n.name == "complete")
    assert complete.end_lineno - complete.lineno + 1 <= 60
    assert [a.arg for a in complete.args.args] == ["self", "req"]  # one request object, not 20 keywords


def test_the_wheel_holds_every_package():
    """The editable install maps the top folder only, so a package missing from pyproject's list would pass
    every test here and be missing from a real install."""
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {module_name(p) for root in ROOTS.values() for p in root.rglob("__init__.py")}
    assert listed == on_disk


RESULT_FILE_LIMIT = 200_000  # a summary; one `bench repo` or `bench quality` per-site dump is ~300 kB


def test_results_hold_summaries_not_per_site_dumps():
    """results/ keeps what the docs cite, as small summaries; full runs (``--output``) stay outside git."""
    tracked = subprocess.run(["git", "ls-files", "results"], cwd=REPO, capture_output=True, text=True)
    in_git = tracked.returncode == 0
    paths = [REPO / p for p in tracked.stdout.split()] if in_git else list((REPO / "results").rglob("*"))
    sizes = {str(p.relative_to(REPO)): p.stat().st_size for p in paths if p.is_file()}
    assert sizes, "no results/ found"
    assert {p: n for p, n in sizes.items() if n > RESULT_FILE_LIMIT} == {}


def test_the_checker_sees_circles_and_wrong_way_imports(tmp_path):
    """The checks above can fail: a lazy import that closes a circle, and an upward import."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [["a", "b", "c"]]
    pkg = tmp_path / "celeris_complete"
    (pkg / "model").mkdir(parents=True)
    (pkg / "model" / "net.py").write_text("def f():\n    from celeris_complete.engine import run\n")
    (pkg / "engine").mkdir()
    (pkg / "engine" / "__init__.py").write_text("from ..model import net\n")
    known = {"celeris_complete.model.net", "celeris_complete.engine", "celeris_complete.model"}
    lazy = imports("celeris_complete.model.net", pkg / "model" / "net.py", known)
    assert lazy == {"celeris_complete.engine"} and "engine" not in MAY_IMPORT["model"]
    relative = imports("celeris_complete.engine", pkg / "engine" / "__init__.py", known)
    assert relative == {"celeris_complete.model.net"}
