"""Adapting the model to the workspace while the server goes on answering with the current one.

`celeris-complete adapt` runs as a child process at low priority (it trains a copy of the model on the
workspace's files, then compares it with the base model on held-out workspace files). While the user
types, the child is paused (SIGSTOP) and it resumes after ``idle_s`` without completion requests, so
training never competes with a completion for the CPU. When the child has finished and its check
passed, ``on_ready(model_dir)`` is called (from a worker thread): the server loads the adapted model
beside the current one and swaps them in one assignment.  When the child fails (it exits with an
error, or is killed: by the out-of-memory killer, say), ``on_failed(message)`` is called once, and the
same adaptation is not started again in this server: only other settings (model, minutes, memory) or a
new workspace start another.
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
    def __init__(
        self,
        on_ready: Callable[[Path], None],
        idle_s: float = 1.0,
        on_failed: Callable[[str], None] | None = None,
    ) -> None:
        self.on_ready = on_ready
        self.on_failed = on_failed
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
        self._failed: tuple | None = None  # what the adaptation that failed was started with
        self._started: tuple | None = None
        self.log_file: Path | None = None
        self.supervisor: threading.Thread | None = None  # watches the child until it ends

    def start(
        self,
        workspace: Path,
        base_model: str,
        minutes: float,
        log_file: Path | None = None,
        memory_mb: float | None = None,
    ) -> None:
        """Start adapting to ``workspace`` (a second call while one runs does nothing, nor one with the same
        arguments as an adaptation that failed: it is not retried in a loop)."""
        key = (str(workspace), base_model, minutes, memory_mb)
        with self._lock:
            if self.proc is not None and self.proc.poll() is None:
                return
            if key == self._failed:
                return
            command = [sys.executable, "-m", "celeris_complete.cli", "adapt", str(workspace)]
            command += ["--minutes", str(minutes), "--parent-pid", str(os.getpid())]
            if memory_mb is not None:
                command += ["--memory-mb", str(memory_mb)]
            if base_model:
                command += ["--model", base_model]
            out = open(log_file, "ab") if log_file else subprocess.DEVNULL  # noqa: SIM115 (the child owns it)
            try:
                self.proc = subprocess.Popen(
                    command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, close_fds=True
                )
            except OSError as exc:
                self._started = key
                self._fail(f"could not start adapting: {exc}")
                return
            finally:
                if log_file:
                    out.close()
            lower_priority(self.proc.pid)  # from its first instruction: completions come first
            self.workspace, self.state, self.detail, self.check = workspace, "training", "", None
            self._started, self.log_file = key, log_file
            log.info("adapting the model to %s (pid %d, %s minutes)", workspace, self.proc.pid, minutes)
        self.supervisor = threading.Thread(target=self._supervise, name="celeris-adapt", daemon=True)
        self.supervisor.start()

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
        if self.state == "training":  # first: the supervisor must not take the end for a failure
            self.state, self.detail = "off", "stopped"
        self._resume()
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()

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
        if proc is self.proc and self.state == "training":  # not stopped on purpose, no other run since
            self._finished(proc.returncode)

    def _finished(self, code: int) -> None:
        from celeris_complete.training.adapt import CHECK_FILE, adapt_dir

        self.paused = False
        if code != 0:
            self._fail(self._exit_reason(code))
            return
        model_dir = adapt_dir(self.workspace) / "model"
        try:
            self.check = json.loads((model_dir / CHECK_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            self._fail(f"no check of the adapted model: {exc}")
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
            self._fail(f"the adapted model failed to load: {exc}")
            return
        self.state = "ready"
        log.info("switched to the adapted model %s (%s)", model_dir, self.detail)

    def _exit_reason(self, code: int) -> str:
        """Why the child ended, with the last line it wrote (its error) where there is one."""
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            reason = f"celeris-complete adapt was killed ({name})"
            if -code == getattr(signal, "SIGKILL", 9):
                reason += ": most likely by the system for lack of memory (lower the setting adapt_memory_mb)"
        else:
            reason = f"celeris-complete adapt exited with status {code}"
        last = ""
        if self.log_file is not None:
            try:
                lines = self.log_file.read_text(encoding="utf-8", errors="replace").strip().splitlines()
                last = lines[-1].strip()[:300] if lines else ""
            except OSError:
                pass
        if last:
            reason += f" ({last})"
        if self.log_file is not None:
            reason += f"; log: {self.log_file}"
        return reason

    def _fail(self, detail: str) -> None:
        """Failed: reported once, and not started again with the same arguments."""
        self.state, self.detail = "failed", detail
        self._failed = self._started
        log.error("adaptation failed: %s", detail)
        if self.on_failed is not None:
            try:
                self.on_failed(detail)
            except Exception:  # reporting never takes the server down
                log.exception("reporting the failed adaptation")


LOWER_PRIORITY = 10  # the training child's niceness above the server's


def lower_priority(pid: int) -> None:
    """The process ``pid`` at ``LOWER_PRIORITY`` below this one (where the system has priorities)."""
    try:
        os.setpriority(os.PRIO_PROCESS, pid, min(19, os.getpriority(os.PRIO_PROCESS, 0) + LOWER_PRIORITY))
    except (OSError, AttributeError):  # gone already, not allowed, or no such call (Windows)
        pass
