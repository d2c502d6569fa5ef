"""A test hook, for server processes that tests start: holds the model worker while the test says so.

Python imports ``sitecustomize`` at start-up from ``sys.path``; the tests that need the hook put this
folder on ``PYTHONPATH`` and name a folder in ``SERVER_HOLD_DIR`` (Ray's workers inherit both, so
it reaches Ray Serve's replicas too).  Without that variable it does nothing.

A request whose prompt holds ``# celeris-test-hold TOKEN`` (``tests.test_serve.hold_prompt``) leaves
the file ``arrived.TOKEN.PID`` when the server queues it (the process that got it), then, once the
model worker takes it, ``held.TOKEN.PID``, and the worker waits there (it takes nothing else) until
the file ``release`` exists; so a test can fill the queue behind it with nothing racing it.  The wait
ends by itself after ``HOLD_LIMIT_S``, so that a test that fails never leaves a server stuck.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import re
import sys
import time
from pathlib import Path

HOLD_DIR = os.environ.get("SERVER_HOLD_DIR")
MARK = re.compile(r"# celeris-test-hold (\w+)")
HOLD_LIMIT_S = 600.0


def _token(job) -> str | None:
    found = MARK.search(job.prefix or "")
    return found.group(1) if found else None


def _touch(name: str) -> None:
    path = Path(HOLD_DIR, name)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(str(time.time()))
    tmp.replace(path)


def _hold(job) -> None:
    token = _token(job)
    if token is None:
        return
    _touch(f"held.{token}.{os.getpid()}")
    release = Path(HOLD_DIR, "release")
    end = time.monotonic() + HOLD_LIMIT_S
    while not release.exists() and time.monotonic() < end:
        time.sleep(0.01)


def _patch_queue(module) -> None:
    scheduler = module.Scheduler
    submit, complete = scheduler.submit, scheduler._complete

    def held_submit(self, job):
        submit(self, job)  # QueueFull: not queued, nothing to say
        token = _token(job)
        if token is not None:
            _touch(f"arrived.{token}.{os.getpid()}")

    def held_complete(self, job):
        _hold(job)
        return complete(self, job)

    scheduler.submit, scheduler._complete = held_submit, held_complete


def _patch_batch(module) -> None:
    join = module.BatchScheduler._join

    def held_join(self, job):
        _hold(job)
        return join(self, job)

    module.BatchScheduler._join = held_join


PATCHES = {"celeris_complete.serve.scheduler": _patch_queue, "celeris_complete.serve.batch": _patch_batch}


class _Finder(importlib.abc.MetaPathFinder):
    """Patches the two modules right after they are first imported."""

    def find_spec(self, name, path, target=None):
        patch = PATCHES.get(name)
        if patch is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        loader_exec = spec.loader.exec_module

        def exec_module(module):
            loader_exec(module)
            patch(module)

        spec.loader.exec_module = exec_module
        return spec


if HOLD_DIR:
    sys.meta_path.insert(0, _Finder())
