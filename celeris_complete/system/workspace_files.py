"""Which files of a workspace are its source: ``.gitignore`` at every level, the ``.git`` folder,
lock files, ignore and secret globs (a secret file is judged by its path and never opened), source
suffixes.  The language server's index and the adaptation's snapshot both choose files this way.

May import: the standard library and pathspec.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath

import pathspec

# What is indexed: source code and the configuration that names its identifiers, not data or docs.
SOURCE_SUFFIXES = frozenset(
    ".py .pyi .js .jsx .mjs .cjs .ts .tsx .go .rs .c .h .cc .cpp .cxx .hpp .hh .java .kt .kts .scala .swift "
    ".m .mm .cs .fs .rb .php .lua .pl .pm .r .jl .dart .ex .exs .erl .hs .ml .mli .clj .vue .svelte .sh .bash "
    ".zsh .fish .ps1 .sql .proto .graphql .toml .yaml .yml .cfg .ini .cmake .gradle .tf .nix .zig .v .sv .vhd "
    ".el .vim".split()
)
NEVER_INDEX = {".gitignore", ".git", "package-lock.json", "yarn.lock", "poetry.lock", "uv.lock", "Cargo.lock"}


def matches(path: str, globs: Iterable[str]) -> bool:
    name = PurePosixPath(path).name
    return any(fnmatch.fnmatch(name, g) or fnmatch.fnmatch(path, g) for g in globs)


class GitIgnore:
    """The ``.gitignore`` files of one folder tree, each applying below its own folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.specs: dict[Path, pathspec.GitIgnoreSpec] = {}

    def load(self, folder: Path) -> None:
        try:
            lines = (folder / ".gitignore").read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            self.specs.pop(folder, None)
            return
        self.specs[folder] = pathspec.GitIgnoreSpec.from_lines(lines)

    def ignored(self, path: Path, is_dir: bool = False) -> bool:
        if ".git" in path.relative_to(self.root).parts:
            return True
        for folder in (path.parent, *path.parent.parents):
            spec = self.specs.get(folder)
            if spec is not None:
                rel = path.relative_to(folder).as_posix() + ("/" if is_dir else "")
                if spec.match_file(rel):
                    return True
            if folder == self.root:
                break
        return False


class WorkspaceFiles:
    """The wanted source files under one folder tree."""

    def __init__(self, root: Path, skip_globs: tuple[str, ...]) -> None:
        self.root = root.resolve()
        self.skip_globs = skip_globs
        self.gitignore = GitIgnore(self.root)

    def wanted(self, path: Path, is_dir: bool = False, folders_checked: bool = False) -> bool:
        """Not ignored or secret, judged on the path and on every folder above it up to the root
        (an event for a file inside a skipped folder must not bring it in).  ``folders_checked``:
        the folders above were judged already (the scan only walks into wanted folders)."""
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            return False
        # Globs match below the root (a project that lives in, say, ~/secret-work/ is still indexed).
        if path.name in NEVER_INDEX or matches(rel.as_posix(), self.skip_globs):
            return False
        if not folders_checked:
            for i in range(1, len(rel.parts)):
                folder = PurePosixPath(*rel.parts[:i])
                if matches(folder.as_posix(), self.skip_globs):
                    return False
                if self.gitignore.ignored(self.root / folder, is_dir=True):
                    return False
        return not self.gitignore.ignored(path, is_dir)

    @staticmethod
    def is_source(path: Path) -> bool:
        return path.suffix.lower() in SOURCE_SUFFIXES or path.name in ("Makefile", "Dockerfile", "Justfile")

    def walk(self) -> Iterator[Path]:
        """Every source file under the root that is wanted (not ignored, not secret), in a stable order;
        a secret file is judged by its path and never opened."""
        self.gitignore.specs.clear()
        for folder, dirs, names in os.walk(self.root):
            here = Path(folder)
            if ".gitignore" in names:
                self.gitignore.load(here)
            dirs[:] = sorted(d for d in dirs if self.wanted(here / d, is_dir=True, folders_checked=True))
            for name in sorted(names):
                path = here / name
                if self.is_source(path) and self.wanted(path, folders_checked=True):
                    yield path
