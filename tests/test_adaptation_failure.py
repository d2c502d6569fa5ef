"""A background adaptation whose process dies: reported once, with why, and not started again in a loop."""

import os
import signal
import time
from pathlib import Path

import pytest

from lsp.adaptation import Adaptation
from tests.test_adapt import make_repo


def wait_state(a: Adaptation, states: tuple[str, ...], timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while a.state not in states:
        if time.monotonic() > end:
            raise TimeoutError(f"adaptation still {a.state!r} after {timeout} s, not {states}")
        time.sleep(0.05)


def wait_reports(reports: list[str], n: int, timeout: float = 60) -> None:
    """The supervisor thread publishes the state, then reports: wait for the report, not only the state."""
    end = time.monotonic() + timeout
    while len(reports) < n:
        if time.monotonic() > end:
            raise TimeoutError(f"{len(reports)} failure report(s) after {timeout} s, not {n}")
        time.sleep(0.05)


def test_a_child_that_fails_is_reported_once_and_not_restarted(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repo = make_repo(tmp_path / "repo")
    reports = []
    a = Adaptation(lambda path: None, on_failed=reports.append)
    missing = str(tmp_path / "no-such-model")
    log_file = tmp_path / "adapt.log"
    a.start(repo, missing, 0.1, log_file, memory_mb=1024)
    first = a.proc
    wait_state(a, ("failed",))
    wait_reports(reports, 1)
    assert len(reports) == 1 and "exited with status" in reports[0]
    assert "no-such-model" in reports[0] and str(log_file) in reports[0]  # the child's own error, and its log
    for _ in range(3):  # the settings come again (a configuration change, a new folder): no new process
        a.start(repo, missing, 0.1, log_file, memory_mb=1024)
        assert a.proc is first and a.state == "failed"
    assert len(reports) == 1
    a.start(repo, missing, 0.2, log_file, memory_mb=1024)  # other settings: a new attempt
    assert a.proc is not first
    wait_state(a, ("failed",))
    wait_reports(reports, 2)
    assert len(reports) == 2


def training(model_dir, tmp_path, monkeypatch) -> tuple[Adaptation, list[str]]:
    """An adaptation of a small repository for 30 minutes (it is ended before), and its failure reports."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    reports = []
    a = Adaptation(lambda path: None, on_failed=reports.append)
    a.start(make_repo(tmp_path / "repo"), str(model_dir), 30, tmp_path / "adapt.log")
    return a, reports


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_child_killed_by_the_system_is_reported_as_such(tiny_model_dir, tmp_path, monkeypatch):
    a, reports = training(tiny_model_dir, tmp_path, monkeypatch)
    assert a.state == "training"
    os.kill(a.proc.pid, signal.SIGKILL)  # what the out-of-memory killer does
    wait_state(a, ("failed",))
    wait_reports(reports, 1)
    assert reports == [a.detail] and "killed (SIGKILL)" in a.detail and "adapt_memory_mb" in a.detail


def test_stopping_on_purpose_is_no_failure(tiny_model_dir, tmp_path, monkeypatch):
    a, reports = training(tiny_model_dir, tmp_path, monkeypatch)
    proc = a.proc
    a.stop()
    assert proc.poll() is not None and a.state == "off"
    a.supervisor.join(timeout=60)
    assert not a.supervisor.is_alive(), "the supervisor never saw the child end"
    assert reports == [] and a.state == "off"


def test_the_memory_budget_reaches_the_child(tmp_path, monkeypatch):
    """The setting's budget is on the child's command line (`celeris-complete adapt --memory-mb`)."""
    seen = {}

    class Recorded:
        pid = 1

        def __init__(self, command, **kwargs):
            seen["command"] = command

        def poll(self):
            return 0

    monkeypatch.setattr("lsp.adaptation.subprocess.Popen", Recorded)
    monkeypatch.setattr("lsp.adaptation.threading.Thread.start", lambda self: None)
    a = Adaptation(lambda path: None)
    a.start(Path(tmp_path), "", 1.0, None, memory_mb=1536.0)
    assert seen["command"][-2:] == ["--memory-mb", "1536.0"]
