"""The training corpus: source files gathered, filtered, deduplicated and listed in a manifest."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from .errors import CelerisError

# Generated tables and data modules teach a small model to emit tables (seen here: completions
# that were runs of "LATIN SMALL LETTER").  Excluded by path, then by content.
DEFAULT_EXCLUDES = (
    "*/site-packages/*",
    "*/__pycache__/*",
    "encodings/*",
    "*/encodings/*",
    "pydoc_data/*",
    "*/pydoc_data/*",
    "*/idlelib/idle_test/*",
    "*/lib2to3/tests/data/*",
    "*/test/*data*/*",
    "*/test/encoded_modules/*",
    "*/test/test_unicode*",
    "*/test/test_codecs*",
    "*/test/test_codecmaps*",
    "*/test/test_normalization*",
    "*/test/test_multibytecodec*",
    "*/test/cjkencodings/*",
    "*/test/badsyntax*",
    "*/test/bad_coding*",
    "stringprep.py",
    "*/stringprep.py",
    "*unicodedata*",
    "*/_pydecimal.py",
    "*/tests/data/*",
)
MAX_FILE_BYTES = 400_000
MAX_LINE_CHARS = 400
VALIDATION_EVERY = 40  # one file in 40 (by content hash) is held out for validation

_STRING_TABLE_LINE = re.compile(r"""^\s*[ubrUBR]*(['"]).*\1\s*[,)]?\s*(#.*)?$""")
_HEX_OR_NUMBER_ROW = re.compile(r"^[\s\d,xXa-fA-FlL()+\-]*$")


@dataclass(frozen=True)
class CorpusFile:
    path: Path
    relpath: str
    sha256: str
    text: str

    def in_validation(self, every: int = VALIDATION_EVERY) -> bool:
        """Held out for validation: one file in ``every``, chosen by content hash."""
        return int(self.sha256[:8], 16) % every == 0


def default_roots() -> list[Path]:
    return [Path(sysconfig.get_paths()["stdlib"])]


def looks_generated(text: str) -> str | None:
    """Why a file looks like generated code or a data table, or None when it looks like code."""
    lines = text.splitlines()
    if not lines:
        return "empty"
    if any(len(line) > MAX_LINE_CHARS for line in lines):
        return "very long lines"
    code_lines = [line for line in lines if line.strip()]
    if len(code_lines) >= 40:
        strings = sum(1 for line in code_lines if _STRING_TABLE_LINE.match(line))
        if strings / len(code_lines) > 0.35:
            return "string table"
        numbers = sum(1 for line in code_lines if _HEX_OR_NUMBER_ROW.match(line))
        if numbers / len(code_lines) > 0.3:
            return "number table"
    if text.count("\\x") + text.count("\\u") > max(200, len(text) // 50):
        return "escaped data"
    return None


def _excluded(relpath: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatch(relpath, p) or fnmatch.fnmatch("/" + relpath, p) for p in patterns)


def gather(
    roots: list[Path],
    excludes: tuple[str, ...] = DEFAULT_EXCLUDES,
    suffixes: tuple[str, ...] = (".py",),
) -> list[CorpusFile]:
    """Every usable source file under the roots, deduplicated by content hash, in a stable order."""
    seen: set[str] = set()
    files: list[CorpusFile] = []
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            raise CelerisError(f"corpus directory not found: {root}")
        for path in sorted(root.rglob("*")):
            if path.suffix not in suffixes or not path.is_file():
                continue
            relpath = f"{root.name}/{path.relative_to(root).as_posix()}"
            if _excluded(relpath, excludes):
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if not data or len(data) > MAX_FILE_BYTES:
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if looks_generated(text):
                continue
            digest = hashlib.sha256(data).hexdigest()
            if digest in seen:
                continue
            seen.add(digest)
            files.append(CorpusFile(path, relpath, digest, text))
    if not files:
        raise CelerisError(
            f"the corpus is empty: no usable {', '.join(suffixes)} files under {', '.join(map(str, roots))}"
        )
    return files


def write_manifest(files: list[CorpusFile], path: Path, every: int = VALIDATION_EVERY) -> None:
    rows = [
        {
            "path": f.relpath,
            "sha256": f.sha256,
            "bytes": len(f.text.encode("utf-8")),
            "split": "validation" if f.in_validation(every) else "train",
        }
        for f in files
    ]
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps({"files": rows}, indent=0) + "\n", encoding="utf-8")
    tmp.replace(path)
