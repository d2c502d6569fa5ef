"""The corpus beyond Python: an explicit allowlist of packages that ship their hand-written sources.

Each entry names its registry (npm, Debian), its pinned version, its licence, the folder in its archive
that is the package's root and which files there are sources (``registries.py`` fetches and unpacks
them: never compiled, bundled, minified or vendored files, nor tests). ``corpus.gather`` then applies the
corpus's own filters (generated files, long lines, data tables; one copy of each file) as for Python,
and the manifest lists every file with its package, version, licence and language.

Nothing outside this list is trained on, and never a package a benchmark evaluates on (`bench repo`'s,
``bench/repo_languages.py``; ``tests/test_corpus_sources.py`` checks both lists, and that no file of one
is in the other).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from celeris_complete.errors import CelerisError
from celeris_complete.training.corpus import DEFAULT_EXCLUDES, CorpusFile, default_roots, gather
from celeris_complete.training.packages import Source
from celeris_complete.training.packages import cache_dir as packages_cache_dir
from celeris_complete.training.registries import fetch_debian, fetch_npm

# The suffixes of each language's sources (as checks/languages.py has them; a test keeps them equal).
SUFFIXES: dict[str, tuple[str, ...]] = {
    "typescript": (".ts", ".mts", ".cts", ".tsx"),
    "javascript": (".js", ".mjs", ".cjs", ".jsx"),
    "go": (".go",),
    "rust": (".rs",),
}
TESTS = ("test/*", "tests/*", "*/test/*", "*/tests/*", "*/__tests__/*", "*.test.*", "*.spec.*", "benches/*",
         "*/benches/*", "tests.rs", "*/tests.rs", "test.rs", "*/test.rs", "_*/*", "*/_*/*")  # fmt: skip


@dataclass(frozen=True)
class Allowed:
    language: str  # a key of SUFFIXES
    registry: str  # "npm" or "debian"
    name: str
    version: str  # pinned: another version is another corpus
    licence: str
    under: str  # the folder in the archive that is the package's root
    include: tuple[str, ...] = ("*",)  # globs under ``under`` (fnmatch: ``*`` crosses folders)
    exclude: tuple[str, ...] = TESTS  # globs under ``under`` left out besides registries.NEVER


def _npm(language: str, name: str, version: str, licence: str, *include: str, exclude: tuple[str, ...] = ()):
    return Allowed(language, "npm", name, version, licence, "package", include, TESTS + exclude)


def _go(name: str, version: str, licence: str, path: str, exclude: tuple[str, ...] = ()) -> Allowed:
    return Allowed("go", "debian", name, version, licence, f"usr/share/gocode/src/{path}", ("*",), TESTS + exclude)


def _crate(name: str, crate: str, version: str, licence: str, exclude: tuple[str, ...] = ()) -> Allowed:
    """``librust-<name>-dev`` at Debian's ``version``, its sources in ``usr/share/cargo/registry/<crate>/src``."""
    return Allowed("rust", "debian", f"librust-{name}-dev", version, licence, f"usr/share/cargo/registry/{crate}",
                   ("src/*",), TESTS + exclude)  # fmt: skip


# Vetted 2026-12-07 (docs/design/issue45_languages_plan.md, section 7): each ships hand-written sources
# where named; npm packages that ship only compiled output (date-fns, fp-ts, kysely, hono, acorn, yargs,
# ...) are not here. Notes: rayon's two files adapted from itertools (a bench package) and webpack's own
# semver code are left out; packages that merely import a bench package (immer, prosemirror-model, qs,
# go-toml) are kept.
ALLOWED: tuple[Allowed, ...] = (
    # TypeScript (npm)
    _npm("typescript", "zod", "4.6.7", "MIT", "src/v4/classic/*", "src/v4/core/*", "src/v4/mini/*"),
    _npm("typescript", "rxjs", "7.8.2", "Apache-2.0", "src/*"),
    _npm("typescript", "@reduxjs/toolkit", "2.16.0", "MIT", "src/*"),
    _npm("typescript", "effect", "3.22.4", "MIT", "src/*"),
    _npm("typescript", "@effect/platform", "0.97.2", "MIT", "src/*",
         exclude=("src/internal/httpApiScalar.ts", "src/internal/httpApiSwagger.ts")),
    _npm("typescript", "chevrotain", "13.2.0", "Apache-2.0", "src/*"),
    _npm("typescript", "@tiptap/core", "3.35.0", "MIT", "src/*"),
    _npm("typescript", "@grpc/grpc-js", "1.14.7", "Apache-2.0", "src/*", exclude=("src/generated/*",)),
    # JavaScript (npm)
    _npm("javascript", "eslint", "10.16.0", "MIT", "lib/*"),
    _npm("javascript", "webpack", "5.113.0", "MIT", "lib/*", exclude=("lib/sharing/semver.js",)),
    _npm("javascript", "three", "0.187.0", "MIT", "src/*"),
    _npm("javascript", "mocha", "12.0.3", "MIT", "lib/*"),
    _npm("javascript", "express", "5.3.0", "MIT", "lib/*"),
    _npm("javascript", "koa", "3.3.0", "MIT", "lib/*"),
    _npm("javascript", "ws", "8.23.1", "MIT", "lib/*"),
    _npm("javascript", "commander", "15.1.0", "MIT", "lib/*"),
    _npm("javascript", "debug", "4.4.3", "MIT", "src/*"),
    _npm("javascript", "chalk", "6.0.1", "MIT", "source/*", exclude=("source/vendor/*",)),
    _npm("javascript", "jquery", "4.1.0", "MIT", "src/*", exclude=("src/wrapper*",)),
    _npm("javascript", "preact", "11.2.0", "MIT", "src/*", "compat/src/*", "hooks/src/*", "debug/src/*",
         "devtools/src/*", "jsx-runtime/src/*", "test-utils/src/*"),
    _npm("javascript", "body-parser", "2.4.0", "MIT", "lib/*"),
    _npm("javascript", "morgan", "1.12.1", "MIT", "index.js"),
    # Go (Debian): the toolchain's own sources, then libraries
    Allowed("go", "debian", "golang-1.19-src", "1.19.8-2", "BSD-3-Clause", "usr/share/go-1.19/src", ("*",), TESTS),
    _go("golang-github-spf13-cobra-dev", "1.6.1-1", "Apache-2.0", "github.com/spf13/cobra"),
    _go("golang-github-gorilla-mux-dev", "1.8.0-1", "BSD-3-Clause", "github.com/gorilla/mux"),
    _go("golang-github-sirupsen-logrus-dev", "1.9.0-1", "MIT", "github.com/sirupsen/logrus"),
    _go("golang-github-stretchr-testify-dev", "1.8.1-1", "MIT", "github.com/stretchr/testify"),
    _go("golang-github-google-go-cmp-dev", "0.5.9-1", "BSD-3-Clause", "github.com/google/go-cmp"),
    _go("golang-github-gin-gonic-gin-dev", "1.8.1-1", "MIT", "github.com/gin-gonic/gin"),
    _go("golang-github-go-chi-chi-dev", "5.0.7-1", "MIT", "github.com/go-chi/chi"),
    _go("golang-github-spf13-viper-dev", "1.10.1-1", "MIT", "github.com/spf13/viper"),
    _go("golang-golang-x-tools-dev", "1:0.5.0+ds-1", "BSD-3-Clause", "golang.org/x/tools"),
    _go("golang-golang-x-net-dev", "1:0.7.0+dfsg-1", "BSD-3-Clause", "golang.org/x/net"),
    _go("golang-gopkg-yaml.v3-dev", "3.0.1-3", "Apache-2.0 AND MIT", "gopkg.in/yaml.v3"),
    _go("golang-github-prometheus-client-golang-dev", "1.14.0-3", "Apache-2.0", "github.com/prometheus/client_golang"),
    # Rust (Debian): the standard library's sources, then crates
    Allowed("rust", "debian", "rust-src", "1.63.0+dfsg1-2", "MIT OR Apache-2.0", "usr/src/rustc-1.63.0/library",
            ("*",), TESTS + ("stdarch/crates/intrinsic-test/*", "stdarch/crates/stdarch-gen/*",
                             "stdarch/crates/stdarch-verify/*", "*/neon/generated.rs")),
    _crate("serde", "serde-1.0.152", "1.0.152-2", "MIT OR Apache-2.0"),
    _crate("serde-json", "serde_json-1.0.87", "1.0.87-1", "MIT OR Apache-2.0"),
    _crate("tokio", "tokio-1.24.2", "1.24.2-1", "MIT"),
    _crate("regex", "regex-1.7.1", "1.7.1-1", "MIT OR Apache-2.0"),
    _crate("anyhow", "anyhow-1.0.69", "1.0.69-1", "MIT OR Apache-2.0"),
    _crate("clap", "clap-4.0.32", "4.0.32-1", "MIT OR Apache-2.0"),
    _crate("rand", "rand-0.8.5", "0.8.5-1", "MIT OR Apache-2.0"),
    _crate("syn", "syn-1.0.107", "1.0.107-1", "MIT OR Apache-2.0"),
    _crate("nom", "nom-7.1.1", "7.1.1-1", "MIT"),
    _crate("hashbrown", "hashbrown-0.12.3", "0.12.3-1", "MIT OR Apache-2.0"),
    _crate("rayon", "rayon-1.6.1", "1.6.1-1", "MIT OR Apache-2.0",
           exclude=("src/iter/interleave.rs", "src/iter/update.rs")),
    _crate("bytes", "bytes-1.2.1", "1.2.1-1", "MIT"),
    _crate("log", "log-0.4.17", "0.4.17-3", "MIT OR Apache-2.0"),
    _crate("chrono", "chrono-0.4.23", "0.4.23-2", "MIT OR Apache-2.0"),
    _crate("url", "url-2.3.1", "2.3.1-1", "MIT OR Apache-2.0"),
    _crate("indexmap", "indexmap-1.9.2", "1.9.2-1", "MIT OR Apache-2.0"),
    _crate("smallvec", "smallvec-1.9.0", "1.9.0-1", "MIT OR Apache-2.0"),
    _crate("futures-util", "futures-util-0.3.21", "0.3.21-1", "MIT OR Apache-2.0"),
    _crate("hyper", "hyper-0.14.19", "0.14.19-1", "MIT"),
    _crate("http", "http-0.2.7", "0.2.7-1", "MIT OR Apache-2.0"),
    _crate("tracing", "tracing-0.1.37", "0.1.37-1", "MIT"),
    _crate("thiserror", "thiserror-1.0.38", "1.0.38-1", "MIT OR Apache-2.0"),
    _crate("once-cell", "once_cell-1.17.0", "1.17.0-1", "MIT OR Apache-2.0"),
    _crate("memchr", "memchr-2.5.0", "2.5.0-1", "Unlicense OR MIT"),
    _crate("aho-corasick", "aho-corasick-0.7.19", "0.7.19-1", "Unlicense OR MIT"),
    _crate("parking-lot", "parking_lot-0.12.1", "0.12.1-1", "MIT OR Apache-2.0"),
    _crate("walkdir", "walkdir-2.3.2", "2.3.2-1", "Unlicense OR MIT"),
    _crate("glob", "glob-0.3.0", "0.3.0-1", "MIT OR Apache-2.0"),
    _crate("base64", "base64-0.13.0", "0.13.0-1", "MIT OR Apache-2.0"),
    _crate("proc-macro2", "proc-macro2-1.0.47", "1.0.47-1", "MIT OR Apache-2.0"),
    _crate("quote", "quote-1.0.21", "1.0.21-1", "MIT OR Apache-2.0"),
)  # fmt: skip


def cache_dir() -> Path:
    """Beside the Python packages' cache (``$XDG_CACHE_HOME/celeris-complete/corpus``)."""
    return packages_cache_dir() / "languages"


def fetch_allowed(
    languages: tuple[str, ...] | None = None,
    cache: Path | None = None,
    progress: Callable[[str], None] = lambda m: None,
) -> list[tuple[Allowed, Source]]:
    """Every allowed package of ``languages`` (default: all) fetched and unpacked where missing: its
    entry and its corpus root."""
    cache = cache or cache_dir()
    out = []
    for entry in ALLOWED:
        if languages is not None and entry.language not in languages:
            continue
        fetch = fetch_npm if entry.registry == "npm" else fetch_debian
        root = fetch(cache, entry, SUFFIXES[entry.language], "the corpus")
        out.append((entry, Source(entry.name, entry.version, entry.licence, root)))
        progress(f"{entry.language} {entry.name} {entry.version}: {entry.licence}")
    return out


def language_files(language: str, progress: Callable[[str], None] = lambda m: None) -> list[CorpusFile]:
    """The corpus's files of one language as training gathers them (Python: the standard library; another
    language: its allowed packages, fetched where missing), deduplicated, in a stable order."""
    if language == "python":
        return gather(default_roots(), DEFAULT_EXCLUDES, (".py",))
    if language not in SUFFIXES:
        raise CelerisError(f"no corpus for {language!r}: choose from python, {', '.join(SUFFIXES)}")
    roots = [source.root for _, source in fetch_allowed((language,), progress=progress)]
    return gather(roots, DEFAULT_EXCLUDES, SUFFIXES[language])
