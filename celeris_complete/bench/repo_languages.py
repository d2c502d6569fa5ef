"""The languages `bench repo` completes in: for each, its packages (pinned; none in the training corpus),
the registry they come from and how they are fetched into the cache, which of their files are
hand-written sources, what starts a comment line (no site there), and the language id the editor sends.

Python's packages are wheels from PyPI (``fetch_package``). TypeScript's and JavaScript's are npm
tarballs, Go's and Rust's Debian packages that ship their sources (``/usr/share/gocode/src/...``,
``/usr/share/cargo/registry/...``), fetched by ``training/registries.py`` as the corpus's are: only the
members the package's globs name are unpacked. What an archive ships beside its sources never is:
compiled ``dist/`` files, declarations (``.d.ts``), source maps (whose ``sourcesContent`` holds the very
source under test) and minified files would hand drafts and snippets the answer; Go's tests
(``_test.go``) are left out as Python's wheels leave theirs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from celeris_complete.errors import CelerisError
from celeris_complete.training.packages import cache_dir as corpus_cache_dir
from celeris_complete.training.packages import download, find_wheel, unpack_wheel
from celeris_complete.training.registries import fetch_debian, fetch_npm

C_LIKE = ("//", "/*", "*")  # a line starting with one of these (after its indentation) is a comment


@dataclass(frozen=True)
class BenchPackage:
    name: str
    version: str
    licence: str
    include: tuple[str, ...] = ()  # npm, Debian: the archive's members (under ``under``) that are sources
    under: str = "package"  # the folder in the archive that is the package's root (npm's is package/)


@dataclass(frozen=True)
class BenchLanguage:
    name: str
    language_id: str  # what the editor sends in didOpen
    suffixes: tuple[str, ...]
    comments: tuple[str, ...]
    registry: str  # "pypi", "npm" or "debian"
    packages: tuple[BenchPackage, ...]


LANGUAGES: dict[str, BenchLanguage] = {
    "python": BenchLanguage(
        "python", "python", (".py",), ("#",), "pypi",
        (BenchPackage("toolz", "1.2.0", "BSD-3-Clause"), BenchPackage("sqlparse", "0.6.1", "BSD-3-Clause"),
         BenchPackage("tabulate", "0.10.0", "MIT"), BenchPackage("tomlkit", "0.15.2", "MIT"),
         BenchPackage("humanize", "4.17.0", "MIT")),
    ),
    "typescript": BenchLanguage(
        "typescript", "typescript", (".ts",), C_LIKE, "npm",
        (BenchPackage("immer", "11.2.14", "MIT", ("src/*",)), BenchPackage("mobx", "7.1.3", "MIT", ("src/*",)),
         BenchPackage("@trpc/server", "11.25.2", "MIT", ("src/*",)),
         BenchPackage("@tanstack/query-core", "5.108.4", "MIT", ("src/*",)),
         BenchPackage("prosemirror-model", "1.25.13", "MIT", ("src/*",))),
    ),
    "javascript": BenchLanguage(
        "javascript", "javascript", (".js",), C_LIKE, "npm",
        (BenchPackage("semver", "7.8.6", "ISC", ("classes/*", "functions/*", "internal/*", "ranges/*")),
         BenchPackage("qs", "6.17.1", "BSD-3-Clause", ("lib/*",)),
         BenchPackage("handlebars", "4.7.10", "MIT", ("lib/*",)),
         BenchPackage("moment", "2.31.0", "MIT", ("src/lib/*",)),
         BenchPackage("underscore", "1.13.8", "MIT", ("modules/*",))),
    ),
    "go": BenchLanguage(
        "go", "go", (".go",), C_LIKE, "debian",
        tuple(BenchPackage(name, version, licence, ("*",), f"usr/share/gocode/src/github.com/{path}")
              for name, version, licence, path in (
                  ("golang-github-dustin-go-humanize-dev", "1.0.0-3", "MIT", "dustin/go-humanize"),
                  ("golang-github-pelletier-go-toml-dev", "1.9.4-1", "MIT", "pelletier/go-toml"),
                  ("golang-github-olekukonko-tablewriter-dev", "0.0.5-2", "MIT", "olekukonko/tablewriter"),
                  ("golang-github-thoas-go-funk-dev", "0.9.3-1", "MIT", "thoas/go-funk"),
                  ("golang-github-urfave-cli-dev", "1.22.9-2", "MIT", "urfave/cli"))),
    ),
    "rust": BenchLanguage(
        "rust", "rust", (".rs",), C_LIKE, "debian",
        tuple(BenchPackage(name, version, licence, ("src/*",), f"usr/share/cargo/registry/{crate}")
              for name, version, licence, crate in (
                  ("librust-itertools-dev", "0.10.3-1", "MIT OR Apache-2.0", "itertools-0.10.3"),
                  ("librust-toml-dev", "0.5.11-1", "MIT OR Apache-2.0", "toml-0.5.11"),
                  ("librust-humantime-dev", "2.1.0-1+b1", "MIT OR Apache-2.0", "humantime-2.1.0"),
                  ("librust-prettytable-rs-dev", "0.10.0-1", "BSD-3-Clause", "prettytable-rs-0.10.0"),
                  ("librust-semver-dev", "1.0.14-1", "MIT OR Apache-2.0", "semver-1.0.14"))),
    ),
}  # fmt: skip


def cache_dir() -> Path:
    """Beside the corpus packages' cache (``$XDG_CACHE_HOME/celeris-complete/``)."""
    return corpus_cache_dir().parent / "bench-repo"


def fetch_package(name: str, version: str) -> Path:
    """The folder holding the package's ``.py`` files, downloaded and unpacked once (as the corpus
    packages are: ``corpus_packages``)."""
    cache = cache_dir()
    pip_args = ("--retries", "1", "--timeout", "30", "--disable-pip-version-check")
    try:
        download(((name, version),), cache / "dist", pip_args)
    except CelerisError as exc:
        raise CelerisError(
            f"bench repo could not download {name}=={version} (no network, or the package index unreachable?): {exc}"
        ) from None
    wheel = find_wheel(cache / "dist", name, version)
    if wheel is None:
        raise CelerisError(f"{name}=={version}: no wheel in {cache / 'dist'} after the download")
    root = cache / "src" / f"{name}-{version}"
    unpack_wheel(wheel, root)
    return root


def fetch_source(language: str, name: str, version: str) -> Path:
    """The folder holding a package's sources in ``language`` (fetched once into the cache)."""
    lang = LANGUAGES[language]
    if lang.registry == "pypi":
        return fetch_package(name, version)
    package = next(p for p in lang.packages if (p.name, p.version) == (name, version))
    fetch = fetch_npm if lang.registry == "npm" else fetch_debian
    return fetch(cache_dir(), package, lang.suffixes, "bench repo")


def python_files(root: Path) -> dict[str, str]:
    """Path in the package -> text, for every UTF-8 ``.py`` file under ``root``."""
    return source_files(root, (".py",))


def source_files(root: Path, suffixes: tuple[str, ...]) -> dict[str, str]:
    """Path in the package -> text, for every UTF-8 file under ``root`` with one of ``suffixes``."""
    out = {}
    for path in sorted(p for p in root.rglob("*") if p.suffix in suffixes and p.is_file()):
        try:
            out[path.relative_to(root).as_posix()] = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    return out


def bench_file_hashes(languages: tuple[str, ...]) -> set[str]:
    """The sha256 of every source file of `bench repo`'s packages in ``languages`` (fetched where missing):
    what a corpus must not hold (``corpus --languages`` drops and names any such file)."""
    import hashlib

    out = set()
    for language in languages:
        lang = LANGUAGES[language]
        for package in lang.packages:
            root = fetch_source(language, package.name, package.version)
            out.update(
                hashlib.sha256((root / path).read_bytes()).hexdigest() for path in source_files(root, lang.suffixes)
            )
    return out
