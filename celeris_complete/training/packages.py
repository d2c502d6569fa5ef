"""The packages whose Python sources join the standard library in the training corpus.

Exactly the packages an issue named, at pinned versions: wheels fetched with ``pip download
--no-deps`` into a cache outside the repository, their ``.py`` files unpacked once, and their
licences read from the wheels' metadata.  torch and transformers are taken as installed in this
environment (the registry's default torch build is several GB).  Code outside this list is what
the benchmarks evaluate on: it must never be added here.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from email.parser import Parser
from pathlib import Path

from celeris_complete.errors import CelerisError

PINNED: tuple[tuple[str, str], ...] = (
    ("aiohttp", "3.14.5"), ("alembic", "1.20.1"), ("ansible-core", "2.19.14"), ("astroid", "4.3.4"),
    ("attrs", "26.1.0"), ("beautifulsoup4", "4.15.0"), ("black", "26.10.1"), ("bokeh", "3.9.2"),
    ("celery", "5.7.0"), ("click", "8.5.1"), ("dask", "2026.8.0"), ("django", "5.2.19"),
    ("docutils", "0.23"), ("fabric", "3.2.3"), ("fastapi", "0.165.0"), ("flask", "3.1.3"),
    ("httpx", "0.28.1"), ("hypothesis", "6.170.17"), ("invoke", "3.0.3"), ("isort", "9.0.2"),
    ("jinja2", "3.1.6"), ("jsonschema", "4.26.0"), ("kombu", "5.7.0"), ("markdown", "3.11.3"),
    ("matplotlib", "3.11.2"), ("more-itertools", "11.2.1"), ("mypy", "2.4.1"), ("networkx", "3.6.1"),
    ("nltk", "3.10.4"), ("numpy", "2.4.6"), ("packaging", "26.4"), ("pandas", "3.1.1"),
    ("paramiko", "5.1.0"), ("pexpect", "4.9.0"), ("pip", "26.3"), ("psutil", "7.2.2"),
    ("pydantic", "2.14.4"), ("pygments", "2.21.0"), ("pylint", "4.1.4"), ("pyserial", "3.5"),
    ("pytest", "9.2.0"), ("pyyaml", "6.0.4"), ("redis", "8.1.0"), ("requests", "2.34.2"),
    ("rich", "15.0.0"), ("scikit-learn", "1.9.1"), ("scipy", "1.17.1"), ("scrapy", "2.19.0"),
    ("seaborn", "0.13.2"), ("setuptools", "84.2.1"), ("sphinx", "9.0.4"), ("sqlalchemy", "2.1.9"),
    ("starlette", "1.10.0"), ("statsmodels", "0.15.0"), ("sympy", "1.14.0"), ("textual", "8.2.8"),
    ("tomli", "2.5.0"), ("tornado", "6.6.1"), ("tox", "4.67.15"), ("twisted", "26.10.0"),
    ("typer", "0.29.2"), ("urllib3", "2.8.0"), ("virtualenv", "21.15.11"), ("watchdog", "7.1.0"),
    ("werkzeug", "3.1.9"), ("xarray", "2026.9.0"),
)  # fmt: skip
INSTALLED = ("torch", "transformers")  # their .py files as installed here


@dataclass(frozen=True)
class Source:
    """One corpus root: a package's unpacked sources (or the standard library)."""

    package: str
    version: str
    licence: str
    root: Path

    def row(self) -> dict:
        return {**asdict(self), "root": str(self.root), "name": self.root.name}


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "celeris-complete" / "corpus"


def _norm(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


def licence_of(metadata: str) -> str:
    """A package's licence from its core metadata: the SPDX expression, else the licence field's first
    line, else the licence classifiers."""
    msg = Parser().parsestr(metadata, headersonly=True)
    if msg.get("License-Expression"):
        return msg["License-Expression"].strip()
    field = (msg.get("License") or "").strip().splitlines()
    if field and len(field[0]) <= 40 and field[0].upper() != "UNKNOWN" and "copyright" not in field[0].lower():
        return field[0]  # a name, not the licence's text
    classifiers = [c.split("::")[-1].strip() for c in msg.get_all("Classifier") or [] if c.startswith("License ::")]
    return "; ".join(classifiers) or "unknown"


def unpack_wheel(wheel: Path, dest: Path) -> str:
    """The wheel's .py files into ``dest`` (once: a marker file says it is complete); returns its licence.
    Unpacked beside ``dest`` and renamed into place, so processes that unpack at once (torchrun) never
    see a half-written folder."""
    marker = dest / ".source.json"
    if marker.exists():
        return json.loads(marker.read_text())["licence"]
    tmp = dest.with_name(f"{dest.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    licence = "unknown"
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            name = info.filename
            if name.endswith(".dist-info/METADATA"):
                licence = licence_of(zf.read(info).decode("utf-8", "replace"))
            parts = Path(name).parts
            if not name.endswith(".py") or ".." in parts or name.startswith("/"):
                continue
            if parts[0].endswith((".dist-info", ".data")):
                continue
            target = tmp / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))
    (tmp / ".source.json").write_text(json.dumps({"wheel": wheel.name, "licence": licence}))
    if dest.exists() and not marker.exists():
        shutil.rmtree(dest)  # an unfinished unpacking of an earlier version of this code
    try:
        tmp.rename(dest)
    except OSError:  # another process got there first
        shutil.rmtree(tmp, ignore_errors=True)
    return licence


def find_wheel(dist: Path, name: str, version: str) -> Path | None:
    for w in dist.glob("*.whl"):
        parts = w.name.split("-")
        if _norm(parts[0]) == _norm(name) and parts[1] == version:
            return w
    return None


def download(pinned: tuple[tuple[str, str], ...], dist: Path, pip_args: tuple[str, ...] = ()) -> None:
    """Fetch the wheels not yet in ``dist`` with one ``pip download --no-deps`` call."""
    missing = [f"{n}=={v}" for n, v in pinned if find_wheel(dist, n, v) is None]
    if not missing:
        return
    dist.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dist.parent, prefix=".download-") as tmp:  # then moved in whole
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", tmp]
        done = subprocess.run([*cmd, *pip_args, *missing], capture_output=True, text=True)
        if done.returncode != 0:
            tail = "\n".join(done.stderr.strip().splitlines()[-5:])
            raise CelerisError(f"pip could not download the corpus packages ({len(missing)} missing):\n{tail}")
        for wheel in Path(tmp).glob("*.whl"):
            os.replace(wheel, dist / wheel.name)


def installed_source(name: str) -> Source:
    """An installed distribution's top-level package directory, e.g. site-packages/torch."""
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError as e:
        raise CelerisError(f"{name} is not installed in this environment (pip install -e '.[dev]')") from e
    root = Path(str(dist.locate_file(_norm(name))))
    if not root.is_dir():
        raise CelerisError(f"{name}: its package directory {root} is missing")
    return Source(name, dist.version, licence_of(dist.read_text("METADATA") or ""), root)


def fetch_sources(
    cache: Path | None = None,
    pinned: tuple[tuple[str, str], ...] = PINNED,
    installed: tuple[str, ...] = INSTALLED,
    pip_args: tuple[str, ...] = (),
    progress: Callable[[str], None] = lambda m: None,
) -> list[Source]:
    """Every package's sources, downloaded and unpacked where missing: one root each."""
    cache = cache or cache_dir()
    dist = cache / "dist"
    download(pinned, dist, pip_args)
    sources = []
    for name, version in pinned:
        wheel = find_wheel(dist, name, version)
        if wheel is None:
            raise CelerisError(f"{name}=={version}: no wheel in {dist} after the download")
        root = cache / "src" / f"{_norm(name)}-{version}"
        licence = unpack_wheel(wheel, root)
        sources.append(Source(name, version, licence, root))
        progress(f"{name} {version}: {licence}")
    sources.extend(installed_source(name) for name in installed)
    return sources
