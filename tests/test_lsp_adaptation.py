"""The language server adapting its model to the workspace in the background (setting `adapt`)."""

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest

from lsp.adaptation import Adaptation
from tests.lsp_session import Session, run
from tests.test_adapt import make_repo
from tests.test_lsp import field

CODE = "import os\n\ndef walk(root):\n    for name in os.listdir(root):\n        "


def niceness(pid: int) -> int:
    """The nice value of ``pid`` (field 19 of its /proc stat)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def process_state(pid: int) -> str | None:
    """The kernel's one-letter state of ``pid`` (T: stopped), or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state = stat.rsplit(")", 1)[1].split()[0]
    return None if state == "Z" else state


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


async def adaptation(s: Session) -> dict:
    return field(await s.status(), "adaptation")


async def wait_adaptation(s: Session, states: tuple[str, ...], timeout: float = 180) -> dict:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        a = await adaptation(s)
        if field(a, "state") in states:
            return a
        await asyncio.sleep(0.2)
    raise TimeoutError(f"adaptation never reached {states}: {a}")


def wait_gone(pid: int, timeout: float = 15) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if process_state(pid) is None:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_adapts_in_the_background_pauses_while_typing_and_switches_after_the_check(
    tiny_model_dir, tmp_path, monkeypatch
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repo = make_repo(tmp_path / "repo")
    main = repo / "pkg" / "main.py"
    main.write_text(CODE)

    async def scenario():
        s = Session(tiny_model_dir, folders=[repo], init_options={"adapt": True, "adapt_minutes": 0.1})
        await s.start()
        s.open(main.as_uri(), CODE)
        typing = asyncio.Event()
        typing.set()

        async def keep_typing() -> None:
            while typing.is_set():
                await s.inline(main.as_uri(), 4, 8)
                await asyncio.sleep(0.1)

        # Completion requests, one after another from (about) the child's start: each pauses it, or pauses
        # it again if the server's idle time (1 s) let it go on, so it cannot end before it is seen paused.
        typist = asyncio.create_task(keep_typing())
        try:
            end, pid = time.monotonic() + 120, None
            while pid is None:
                a = await adaptation(s)
                state, running = field(a, "state"), field(a, "pid")
                assert state in ("off", "training"), f"adapting ended while completions were requested: {a}"
                if running and field(a, "paused") and field(a, "pauses") >= 1 and process_state(running) == "T":
                    pid = running  # stopped (SIGSTOP) while the user types
                    # and below the server's priority (the server's is this process's)
                    assert niceness(pid) == min(19, os.nice(0) + 10), (niceness(pid), os.nice(0))
                assert time.monotonic() < end, f"the training process was not seen paused in 120 s of typing: {a}"
                await asyncio.sleep(0.05)
        finally:
            typing.clear()
            await typist
        end = time.monotonic() + 60  # typing stopped: it goes on after the idle time
        while field(a := await adaptation(s), "paused") or process_state(pid) == "T":
            assert time.monotonic() < end, f"the training process was still paused 60 s after typing stopped: {a}"
            await asyncio.sleep(0.1)
        a = await wait_adaptation(s, ("ready", "rejected", "failed"))
        assert field(a, "state") != "failed", a
        check = field(a, "check")
        model_dir = tmp_path / "cache"
        status = await s.status()
        adapted = field(status, "model")
        if field(a, "state") == "ready":
            assert field(check, "passed") and "celeris-complete/adapt/" in adapted and adapted.endswith("/model")
            assert Path(adapted).resolve().is_relative_to(model_dir.resolve())
        else:
            assert not field(check, "passed") and adapted == str(tiny_model_dir)
        figures = [field(field(check, k), "content_acc") for k in ("base", "adapted")]
        assert all(0 <= f <= 1 for f in figures)
        result = await s.inline(main.as_uri(), 4, 8)  # the server answers with whichever model it has
        assert result is not None
        await s.stop()

    run(scenario())


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_the_training_process_ends_with_the_server(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repo = make_repo(tmp_path / "repo")

    async def scenario():
        pids = []
        for kill in (False, True):
            s = Session(tiny_model_dir, folders=[repo], init_options={"adapt": True, "adapt_minutes": 30})
            await s.start()
            pid = field(await wait_adaptation(s, ("training",), timeout=30), "pid")
            if kill:  # the server dies without a word: the child notices its parent is gone
                os.kill(parent_of(pid), signal.SIGKILL)
                await s.client.stop()
            else:
                await s.stop()
            pids.append(pid)
            assert wait_gone(pid), f"adaptation process {pid} outlived the server (kill={kill})"
        assert (Path(os.environ["XDG_CACHE_HOME"]) / "celeris-complete" / "adapt").is_dir()  # never in the repo
        assert not any(p.name in (".work", "check.json") for p in repo.rglob("*"))

    run(scenario())


def write_check(model_dir: Path, passed: bool) -> None:
    model_dir.mkdir(parents=True)
    figures = {"base": {"content_acc": 0.2}, "adapted": {"content_acc": 0.3 if passed else 0.1}}
    (model_dir / "check.json").write_text(json.dumps({"passed": passed, **figures}))


@pytest.mark.parametrize("passed", [True, False])
def test_the_switch_follows_the_check(tmp_path, monkeypatch, passed):
    from celeris_complete.training.adapt import adapt_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    switched = []
    a = Adaptation(switched.append)
    a.workspace = tmp_path / "repo"
    write_check(adapt_dir(a.workspace) / "model", passed)
    a._finished(0)
    assert a.state == ("ready" if passed else "rejected")
    assert switched == ([adapt_dir(a.workspace) / "model"] if passed else [])


def test_a_failed_run_or_load_keeps_the_current_model(tmp_path, monkeypatch):
    from celeris_complete.training.adapt import adapt_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def broken(path):
        raise RuntimeError("corrupt weights")

    a = Adaptation(broken)
    a.workspace = tmp_path / "repo"
    a._finished(1)
    assert a.state == "failed" and "status 1" in a.detail
    a._finished(0)  # exited well but wrote no check
    assert a.state == "failed" and "no check" in a.detail
    write_check(adapt_dir(a.workspace) / "model", True)
    a._finished(0)
    assert a.state == "failed" and "corrupt weights" in a.detail
