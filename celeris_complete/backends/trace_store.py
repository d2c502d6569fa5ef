"""Traced graphs kept on disk (``traced.py``'s), so that a model is traced once per machine and not at
every start: tracing the shipped model costs about 4.5 s of CPU, loading its graphs about 0.5 s.

One folder per model and way of running it: the weights' digest, the quantization, the device, and
what made the graphs (torch's and Python's versions, the source of the model and of the tracer), so a
change to any of them traces anew. Loaded graphs are checked against the eager model as traced ones
are (``TracedModel``); a folder whose graphs do not load or do not reproduce the model is traced again
and replaced. The folder is ``$XDG_CACHE_HOME/celeris-complete/traced`` (``~/.cache`` without it);
the setting ``trace_cache`` names another, or ``off``. Where it cannot be written, the model is traced
at every start, as without it."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import threading
import time
import warnings
from pathlib import Path

import torch

from celeris_complete.model.directory import weights_digest

log = logging.getLogger(__name__)

FORMAT = "1"  # part of the key: a change to how graphs are stored makes them anew
KEEP = 4  # models' graphs kept; the least recently used go first
STALE_S = 3600  # a half-written folder this old was left by a process that died
NAMES = ("step", "fresh", "extend")
MAKERS = ("model/network.py", "model/diffusion.py", "backends/traced.py")  # (within the package)


def default_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "celeris-complete" / "traced"


def root(chosen: str) -> Path | None:
    """Where traced graphs are kept (the setting ``trace_cache``; None: nowhere)."""
    if chosen.strip().lower() in ("off", "none", "false", "no", "0"):
        return None
    return Path(chosen).expanduser() if chosen.strip() else default_root()


def _makers() -> bytes:
    """The source of what the graphs are made from: the model and the tracer (read, not imported)."""
    package = Path(__file__).resolve().parent.parent
    return b"".join((package / name).read_bytes() for name in MAKERS)


class TraceStore:
    """The traced graphs of one model, run one way, in ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @classmethod
    def for_model(cls, weights: Path, quant: str, device: str, chosen: str = "") -> TraceStore | None:
        base = root(chosen)
        if base is None:
            return None
        try:
            digest = weights_digest(weights)[:16]
            made_by = hashlib.sha256(
                _makers() + f"{torch.__version__} {sys.version_info[:2]} {FORMAT}".encode()
            ).hexdigest()[:12]
        except OSError as exc:
            log.info("traced graphs not kept (%s)", exc)
            return None
        return cls(base / f"{digest}-{quant}-{device}-{made_by}")

    def paths(self) -> dict[str, Path]:
        return {name: self.folder / f"{name}.pt" for name in NAMES}

    def load(self, device: str) -> dict | None:
        """The graphs, or None where there are none (or they do not load)."""
        paths = self.paths()
        if not all(p.is_file() for p in paths.values()):
            return None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch's notice that TorchScript is deprecated
                graphs = {name: torch.jit.load(str(p), map_location=device) for name, p in paths.items()}
        except Exception as exc:  # a truncated or foreign file: removed, traced again and kept anew
            log.warning("traced graphs in %s do not load (%s); tracing again", self.folder, exc)
            shutil.rmtree(self.folder, ignore_errors=True)
            return None
        try:
            os.utime(self.folder)  # recently used (what eviction keeps)
        except OSError:
            pass
        return graphs

    def save(self, graphs: dict, replace: bool = False) -> None:
        """Keep ``graphs`` (written beside the folder, then renamed into place: a reader sees all of them
        or none). An existing folder is left as it is unless ``replace`` (its graphs were broken)."""
        tmp = self.folder.with_name(f"{self.folder.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        try:
            tmp.mkdir(parents=True, exist_ok=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for name, path in self.paths().items():
                    torch.jit.save(graphs[name], str(tmp / path.name))
            if self.folder.exists():
                if not replace:
                    return  # another process kept the same graphs first
                shutil.rmtree(self.folder, ignore_errors=True)
            os.replace(tmp, self.folder)
        except Exception as exc:  # read-only, full or missing (torch says so as RuntimeError): traced at
            # every start, as without a store; the graphs just traced are used all the same
            log.info("traced graphs not kept in %s (%s)", self.folder, exc)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self.evict()

    def evict(self) -> None:
        """At most ``KEEP`` models' graphs, the most recently used; half-written folders of dead processes
        go too."""
        try:
            folders = [p for p in self.folder.parent.iterdir() if p.is_dir()]
            now = time.time()
            kept = sorted((p for p in folders if ".tmp-" not in p.name), key=lambda p: p.stat().st_mtime, reverse=True)
            old = kept[KEEP:] + [p for p in folders if ".tmp-" in p.name and now - p.stat().st_mtime > STALE_S]
        except OSError:
            return
        for path in old:
            shutil.rmtree(path, ignore_errors=True)
