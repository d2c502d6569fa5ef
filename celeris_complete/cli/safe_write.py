"""Writing a file back without ever leaving it half-written: what `infill --in-place` does.

The new text goes to a temporary file in the same folder, is flushed to disk, takes the file's
permissions and is renamed over it (a rename is atomic: a reader, or a crash, sees the old file or
the new one, never a mix). The original is kept as a backup the same way, and a file that changed on
disk since it was read is refused rather than overwritten.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from celeris_complete.errors import CelerisError


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # not every platform opens folders
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(target: Path, data: bytes, mode_from: Path | None = None) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode_from is not None:
            shutil.copymode(mode_from, tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_folder(target.parent)


def replace_file(path: Path, original: bytes, data: bytes, backup: Path) -> None:
    """Put ``data`` in ``path`` whose content was ``original`` when read, keeping that in ``backup``."""
    try:
        now = path.read_bytes()
    except OSError as exc:
        raise CelerisError(f"{path}: cannot be read again before writing ({exc.strerror}); nothing written") from None
    if now != original:
        raise CelerisError(f"{path}: changed on disk while it was being completed; nothing written")
    try:
        atomic_write(backup, original, mode_from=path)
        atomic_write(path, data, mode_from=path)
    except OSError as exc:
        raise CelerisError(f"{path}: could not be written ({exc.strerror}); the file is as it was") from None
