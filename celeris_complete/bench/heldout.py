"""Sites in code the model never saw and that no benchmark evaluates: the training corpus's held-out
validation files (``corpus_manifest.json``, split "validation"), each source's other files as the
workspace.  What the answers' confidence is fitted on (never on `bench repo`'s packages).

``heldout_sources`` finds the held-out files on disk (the corpus packages' cache, this Python's
standard library, the installed packages); ``collect`` completes at `bench repo`-style sites in them
(half after the indentation, half mid-line, the rest of the line removed; and whole lines removed, the
cursor at the start of the empty line left) through the engine as the
language server calls it: the workspace's lines for drafts, snippets from its other files, the
compiler check, no samples (an automatic request), no deadline.  Per site: the answer, whether it is
the line's rest (exact, bench repo's rule), and the answer's ``features``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path

from celeris_complete.bench.repo import MIN_REST, PACKAGES, Site, choose_sites, score, site_context
from celeris_complete.bench.repo_languages import python_files
from celeris_complete.drafts.snippets import SnippetIndex
from celeris_complete.engine import Engine, InfillRequest
from celeris_complete.errors import CelerisError
from celeris_complete.training.corpus import DEFAULT_EXCLUDES

SITES_PER_FILE = 10
# Besides: whole lines removed, the cursor at the start of the empty line left (the calibration's
# "blank" place: see engine/confidence.py).
BLANK_PER_FILE = 5
QUERY_LINES = 24  # the lines before the cursor's that choose snippets (about the language server's)


def fold_of(source: str, path: str) -> int:
    """0 or 1 by a hash of the file: the two halves of a cross-validated fit."""
    return int(hashlib.sha256(f"{source}/{path}".encode()).hexdigest(), 16) % 2


def heldout_sources(model_dir: Path) -> Iterator[tuple[str, Path, list[str]]]:
    """(source name, its root on disk, its held-out files) for every source of the model's corpus whose
    root exists; never one of bench repo's packages."""
    manifest = json.loads((model_dir / "corpus_manifest.json").read_text(encoding="utf-8"))
    held: dict[str, list[str]] = {}
    for entry in manifest["files"]:
        if entry.get("split") == "validation":
            top, _, rel = entry["path"].partition("/")
            held.setdefault(top, []).append(rel)
    benchmarks = {name for name, _ in PACKAGES}
    for source in manifest["sources"]:
        name, root = source["name"], Path(source["root"])
        if source.get("package") in benchmarks:
            raise CelerisError(f"{name}: a bench repo package in the model's corpus")
        if name in held and root.is_dir():
            yield name, root, sorted(held[name])


def workspace_files(root: Path) -> dict[str, str]:
    """The source's Python files as the corpus took them (its exclusions: no site-packages, tests' data)."""
    return {
        path: text
        for path, text in python_files(root).items()
        if not any(fnmatch.fnmatch(path, p) or fnmatch.fnmatch("/" + path, p) for p in DEFAULT_EXCLUDES)
    }


def blank_sites(path: str, text: str, n: int, seed: str) -> list[Site]:
    """``n`` lines removed whole, each leaving an empty line with the cursor at its start (as after a
    line break, and as HumanEval-Infilling's holes are): the answer is the line, indentation included."""
    lines = text.split("\n")
    usable = [
        i for i, line in enumerate(lines[:-1])
        if sum(not c.isspace() for c in line) >= MIN_REST and not line.lstrip().startswith("#")
    ]  # fmt: skip
    chosen = sorted(random.Random(f"blank:{seed}:{path}").sample(usable, min(n, len(usable))))
    return [Site(path, i, 0, "blank", lines[i].rstrip()) for i in chosen]


def _snippet_query(prefix: str) -> str:
    head = prefix[: prefix.rfind("\n") + 1]
    return "\n".join(head.split("\n")[-QUERY_LINES - 1 :])


def collect(
    engine: Engine,
    model_dir: Path,
    sites_per_file: int = SITES_PER_FILE,
    blank_per_file: int = BLANK_PER_FILE,
    part: int = 0,
    parts: int = 1,
    progress: Callable[[str], None] = lambda m: None,
) -> list[dict]:
    """Every ``parts``-th source (from ``part``): its held-out files' sites answered (see the module doc)."""
    rows: list[dict] = []
    for k, (name, root, held) in enumerate(heldout_sources(model_dir)):
        if k % parts != part:
            continue
        files = workspace_files(root)
        index = SnippetIndex()
        for path, text in files.items():
            index.set_file(path, text)
        n0 = len(rows)
        for path in held:
            if path not in files:
                continue
            fold = fold_of(name, path)
            chosen = choose_sites({path: files[path]}, sites_per_file, 1, "heldout:0", max_share=1.0)
            for site in chosen + blank_sites(path, files[path], blank_per_file, "heldout:0"):
                prefix, suffix = site_context(files[path], site)
                snippets = [s.text for s in index.query(_snippet_query(prefix), exclude=path)]
                done = engine.complete(
                    InfillRequest(
                        prefix, suffix, snippets=snippets, lines=index.lines, source=path, language="python",
                        repair_samples=False,
                    )
                )  # fmt: skip
                rows.append({
                    "source": name, "fold": fold, **asdict(site), **score(site.expected, done.text),
                    "answer": done.text, "draft": done.draft, "syntax": done.syntax, "features": done.features,
                })  # fmt: skip
        progress(f"{name}: {len(rows) - n0} sites in {len(held)} held-out files")
    return rows
