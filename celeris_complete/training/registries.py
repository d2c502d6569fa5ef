"""Where the sources of packages outside PyPI come from: npm tarballs and Debian archives (PyPI's wheels:
``packages.py``), fetched once into a cache, and of each only the members its globs name unpacked.

A package is anything with ``name``, ``version``, ``include`` (globs, relative to ``under``) and ``under``
(the folder in the archive that is the package's root: npm's ``package``, a Debian ``-dev`` package's
``usr/share/gocode/src/<import path>`` or ``usr/share/cargo/registry/<crate>-<version>``): the corpus's
allowlist (``sources.py``) and `bench repo`'s packages (``bench/repo_languages.py``). What an archive
ships beside its sources is never unpacked (``NEVER``): compiled ``dist/`` and ``build/`` output,
declarations (``.d.ts``), source maps (their ``sourcesContent`` holds the source), minified and bundled
files, vendored dependencies, tests and their data.
"""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Protocol

from celeris_complete.errors import CelerisError

REPO = Path(__file__).resolve().parents[2]
NPM = REPO / "scripts" / "npm"  # npm on the Node of the virtual environment (make test sets it up)
NEVER = ("*.d.ts", "*.map", "*.min.js", "*.min.mjs", "*/dist/*", "dist/*", "*/build/*", "build/*", "*/node_modules/*",
         "*.bundle.js", "*_test.go", "*/testdata/*", "testdata/*", "*/vendor/*", "vendor/*")  # fmt: skip


class Archived(Protocol):
    name: str
    version: str
    include: tuple[str, ...]
    under: str


def wanted(member: str, package: Archived, suffixes: tuple[str, ...], never: tuple[str, ...] = NEVER) -> bool:
    """Whether an archive member (its path under ``package.under``) is one of the package's sources."""
    return (
        member.endswith(suffixes)
        and any(fnmatch.fnmatch(member, glob) for glob in package.include)
        and not any(fnmatch.fnmatch(member, glob) for glob in never)
    )


def unpack_sources(tarball: Path, package: Archived, suffixes: tuple[str, ...], dest: Path) -> int:
    """The package's sources from an npm tarball into ``dest`` (paths under ``package/``); how many."""
    with tarfile.open(tarball) as tar:
        return _unpack(tar, package, suffixes, dest)


def _unpack(tar: tarfile.TarFile, package: Archived, suffixes: tuple[str, ...], dest: Path) -> int:
    """The members under ``package.under`` that ``wanted`` names, into ``dest``; how many (a stream: members
    are read in order, as ``dpkg-deb --fsys-tarfile`` writes them)."""
    root = package.under.strip("/") + "/"
    never = NEVER + tuple(getattr(package, "exclude", ()))
    count = 0
    for member in tar:
        name = member.name.removeprefix("./")
        if not member.isfile() or not name.startswith(root):
            continue
        name = name[len(root) :]
        if ".." in Path(name).parts or not wanted(name, package, suffixes, never):
            continue
        data = tar.extractfile(member)
        if data is None:
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.read())
        count += 1
    return count


def fetch_npm(cache: Path, package: Archived, suffixes: tuple[str, ...], who: str = "celeris-complete") -> Path:
    """The folder holding the package's sources: ``npm pack`` once into ``cache/dist``, unpacked once."""
    root = cache / "src" / f"{package.name.replace('/', '+')}-{package.version}"
    if (root / ".unpacked").exists():
        return root
    dist = cache / "dist"
    dist.mkdir(parents=True, exist_ok=True)
    tarball = dist / f"{package.name.lstrip('@').replace('/', '-')}-{package.version}.tgz"
    if not tarball.exists():
        if not NPM.exists():
            raise CelerisError(f"{NPM} is missing: `make test` sets npm up")
        spec = f"{package.name}@{package.version}"
        run = subprocess.run([str(NPM), "pack", spec, "--silent", "--pack-destination", str(dist)],
                             capture_output=True, text=True, timeout=300)  # fmt: skip
        if run.returncode != 0 or not tarball.exists():
            raise CelerisError(f"{who} could not fetch {spec} from npm: {run.stderr.strip()[-400:]}")
    if unpack_sources(tarball, package, suffixes, root) == 0:
        raise CelerisError(f"{package.name} {package.version}: no source file matches {package.include}")
    (root / ".unpacked").touch()
    return root


def fetch_debian(cache: Path, package: Archived, suffixes: tuple[str, ...], who: str = "celeris-complete") -> Path:
    """The folder holding the package's sources: ``apt-get download NAME=VERSION`` once into ``cache/dist``
    (the pinned version: another would change what is measured or trained on), its sources unpacked once."""
    root = cache / "src" / f"{package.name}-{package.version}"
    if (root / ".unpacked").exists():
        return root
    dist = cache / "dist"
    dist.mkdir(parents=True, exist_ok=True)
    pattern = f"{package.name}_{package.version.replace(':', '%3a')}_*.deb"
    found = sorted(dist.glob(pattern))
    if not found:
        if shutil.which("apt-get") is None:
            raise CelerisError(f"{package.name}: {who} fetches it with apt-get (Debian), which is missing here")
        spec = f"{package.name}={package.version}"
        run = subprocess.run(["apt-get", "download", "-q", spec], cwd=dist, capture_output=True, text=True,
                             timeout=600)  # fmt: skip
        found = sorted(dist.glob(pattern))
        if run.returncode != 0 or not found:
            raise CelerisError(
                f"{who} could not fetch {spec} from Debian (`apt-get update` first?): {run.stderr.strip()[-400:]}"
            )
    if shutil.which("dpkg-deb") is None:
        raise CelerisError(f"{package.name}: {who} unpacks it with dpkg-deb (Debian), which is missing here")
    with subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(found[-1])], stdout=subprocess.PIPE) as unpack:
        with tarfile.open(fileobj=unpack.stdout, mode="r|") as tar:
            count = _unpack(tar, package, suffixes, root)
    if unpack.returncode != 0 or count == 0:
        raise CelerisError(f"{package.name} {package.version}: no source file under {package.under} in {found[-1]}")
    (root / ".unpacked").touch()
    return root


def dep5_licence(copyright_text: str) -> str:
    """The licence of the ``Files: *`` stanza of a DEP-5 ``copyright`` file ("" where it has none)."""
    for stanza in copyright_text.replace("\r\n", "\n").split("\n\n"):
        fields = {}
        for line in stanza.split("\n"):
            key, colon, value = line.partition(":")
            if colon and key and not key[0].isspace():
                fields[key.strip().lower()] = value.strip()
        if fields.get("files") == "*" and fields.get("license"):
            return fields["license"]
    return ""


def debian_licence(deb: Path, package: str) -> str:
    """The licence a Debian archive's ``copyright`` file gives its ``Files: *`` ("" if it says none)."""
    wanted_member = f"usr/share/doc/{package}/copyright"
    with subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE) as unpack:
        with tarfile.open(fileobj=unpack.stdout, mode="r|") as tar:
            for member in tar:
                if member.name.removeprefix("./") == wanted_member and member.isfile():
                    data = tar.extractfile(member)
                    return dep5_licence(data.read().decode("utf-8", "replace")) if data else ""
    return ""
