"""Adapting the model to the workspace while the server goes on answering with the current one.

`celeris-complete adapt` runs as a child process at low priority (it trains a copy of the model on the
workspace's files, then compares it with the base model on held-out workspace files). While the user
types, the child is paused (SIGSTOP) and it resumes after ``idle_s`` without completion requests, so
training never competes with a completion for the CPU. When the child has finished and its check
passed, ``on_ready(model_dir)`` is called (from a worker thread): the server loads the adapted model
beside the current one and swaps them in one assignment.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

CAN_PAUSE = hasattr(signal, "SIGSTOP")


class Adaptation:
    def __init__(self, on_ready: Callable[[Path], None], idle_s: float = 1.0) -> None:
        self.on_ready = on_ready
        self.idle_s = idle_s
        self.state = "off"  # off, training, rejected, failed, ready
        self.detail = ""
        self.workspace: Path | None = None
        self.proc: subprocess.Popen | None = None
        self.check: dict | None = None
        self.paused = False
        self.pauses = 0
        self._last_request = 0.0
        self._lock = threading.Lock()
        self._wake = threading.Event()

    def start(self, workspace: Path, base_model: str, minutes: float, log_file: Path | None = None) -> None:
        """Start adapting to ``workspace`` (once per server: a second call while one runs does nothing)."""
        with self._lock:
            if self.proc is not None and self.proc.poll() is None:
                return
            command = [sys.executable, "-m", "celeris_complete.cli", "adapt", str(workspace)]
            command += ["--minutes", str(minutes), "--parent-pid", str(os.getpid())]
            if base_model:
                command += ["--model", base_model]
            out = open(log_file, "ab") if log_file else subprocess.DEVNULL  # noqa: SIM115 (the child owns it)
            try:
                self.proc = subprocess.Popen(
                    command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, close_fds=True
                )
            except OSError as exc:
                self.state, self.detail = "failed", f"could not start adapting: {exc}"
                log.error(self.detail)
                return
            finally:
                if log_file:
                    out.close()
            self.workspace, self.state, self.detail, self.check = workspace, "training", "", None
            log.info("adapting the model to %s (pid %d, %s minutes)", workspace, self.proc.pid, minutes)
        threading.Thread(target=self._supervise, name="celeris-adapt", daemon=True).start()

    def typing(self) -> None:
        """A completion request: pause the child until the user has been idle for ``idle_s``."""
        self._last_request = time.monotonic()
        proc = self.proc
        if not CAN_PAUSE or proc is None or self.paused or proc.poll() is not None:
            return
        try:
            os.kill(proc.pid, signal.SIGSTOP)
        except OSError:
            return
        self.paused = True
        self.pauses += 1
        self._wake.set()

    def stop(self) -> None:
        """End the child (its last checkpoint stays: the next start goes on from it)."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        self._resume()
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
        if self.state == "training":
            self.state, self.detail = "off", "stopped"

    def status(self) -> dict:
        return {
            "state": self.state,
            "detail": self.detail,
            "workspace": str(self.workspace) if self.workspace else None,
            "pid": self.proc.pid if self.proc is not None and self.proc.poll() is None else None,
            "paused": self.paused,
            "pauses": self.pauses,
            "check": self.check,
        }

    def _resume(self) -> None:
        proc = self.proc
        if self.paused and proc is not None:
            try:
                os.kill(proc.pid, signal.SIGCONT)
            except OSError:
                pass
            self.paused = False

    def _supervise(self) -> None:
        proc = self.proc
        assert proc is not None
        while proc.poll() is None:
            if self.paused:
                wait = self._last_request + self.idle_s - time.monotonic()
                if wait <= 0:
                    self._resume()
                else:
                    time.sleep(min(wait, 0.5))
                    continue
            self._wake.wait(timeout=1.0)
            self._wake.clear()
        self._finished(proc.returncode)

    def _finished(self, code: int) -> None:
        from celeris_complete.adapt import CHECK_FILE, adapt_dir

        self.paused = False
        if code != 0:
            self.state, self.detail = "failed", f"celeris-complete adapt exited with status {code}"
            log.error("%s (see the server log)", self.detail)
            return
        model_dir = adapt_dir(self.workspace) / "model"
        try:
            self.check = json.loads((model_dir / CHECK_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            self.state, self.detail = "failed", f"no check of the adapted model: {exc}"
            log.error(self.detail)
            return
        base, adapted = self.check["base"]["content_acc"], self.check["adapted"]["content_acc"]
        if not self.check.get("passed"):
            self.state = "rejected"
            self.detail = f"held-out workspace files: adapted {adapted} < base {base}; keeping the base model"
            log.warning("adaptation %s", self.detail)
            return
        self.detail = f"held-out workspace files: adapted {adapted} >= base {base}"
        try:
            self.on_ready(model_dir)
        except Exception as exc:  # a broken result never takes the server down
            self.state, self.detail = "failed", f"the adapted model failed to load: {exc}"
            log.error(self.detail)
            return
        self.state = "ready"
        log.info("switched to the adapted model %s (%s)", model_dir, self.detail)
