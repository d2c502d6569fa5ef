"""The second tier (escalate_endpoint): the language server asks it when the local answer is below its
threshold, later for a keystroke (never keeping it waiting) and within escalate_budget_ms for a request
the user made; tested with a real `celeris-complete serve` as the tier (its FIM and chat APIs) and with
a local server made to misbehave (slow, not JSON, busy, down): the local answer stands, each kind of
failure is reported once, and a failing tier rests instead of being asked on every keystroke."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from pathlib import Path

import pytest
from lsprotocol import types

from celeris_complete.config import load_settings
from celeris_complete.engine.tiers import LONGEST_BACKOFF_S, BackOff
from celeris_lsp.escalation import Escalation
from tests.lsp_session import Session, run
from tests.second_tier import Endpoint
from tests.test_serve import Served, refused_port

TEXT = "import os\n\n\ndef list_dir(path):\n    return os.\n"
PLACE = (4, 14)  # after "return os."
OTHER = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return \n"
OTHER_PLACE = (5, 11)


def get(obj, key: str):
    return obj[key] if isinstance(obj, dict) else getattr(obj, key)


async def wait_for(condition, what: str, timeout: float = 120.0):
    """Until ``condition()`` holds (checked every 20 ms), or fail clearly after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"not within {timeout} s: {what}")


async def settled(s: Session) -> None:
    """Until no tier request is in flight."""
    end = time.monotonic() + 60
    while time.monotonic() < end:
        if get(get(await s.status(), "tier"), "in_flight") == 0:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("a tier request never ended")


async def rested(s: Session) -> None:
    """Until the tier has failed at least once and rests no more (its back-off over)."""
    end = time.monotonic() + 60
    while time.monotonic() < end:
        tier = get(await s.status(), "tier")
        if get(tier, "failed") and get(tier, "resting_s") == 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the tier never failed, or never stopped resting")


async def configure(s: Session, new: dict) -> None:
    """New settings, once the server reports them."""
    s.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=new))
    end = time.monotonic() + 60
    while time.monotonic() < end:
        settings = get(await s.status(), "settings")
        if all(get(settings, k) == v for k, v in new.items()):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the server did not take {new}")


def test_back_off_doubles_to_its_longest_and_a_success_ends_it():
    now = [0.0]
    b = BackOff(clock=lambda: now[0])
    assert b.ready()
    rests = []
    for _ in range(8):
        b.failed()
        rests.append(b.remaining_s)
        now[0] += b.remaining_s
    assert rests[:5] == [1.0, 2.0, 4.0, 8.0, 16.0] and rests[-1] == LONGEST_BACKOFF_S
    b.failed()
    assert not b.ready()
    b.succeeded()
    assert b.ready() and b.remaining_s == 0.0


@pytest.fixture(scope="module")
def tier_server(shipped_model_dir, tmp_path_factory):
    s = Served(
        tmp_path_factory.mktemp("tier") / "server.log", "--model", str(shipped_model_dir), "--log-level", "warning"
    )
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


@pytest.mark.parametrize("api", ["fim", "chat"])
def test_unsure_answers_are_asked_of_the_second_tier_and_shown_when_they_come(
    shipped_model_dir, tier_server, api, tmp_path
):
    uri, other = (tmp_path / "a.py").as_uri(), (tmp_path / "b.py").as_uri()
    # min_confidence 1: every local answer is unsure, so every one goes to the tier.
    options = {"mode": "line", "budget_ms": 60000, "min_confidence": 1.0, "escalate_endpoint": tier_server.url,
               "escalate_api": api, "escalate_budget_ms": 30000}  # fmt: skip

    async def go():
        s = Session(shipped_model_dir, init_options=options)
        await s.start()
        try:
            s.open(uri, TEXT)
            automatic = await s.inline(uri, *PLACE)
            note = s.timings[-1]
            assert not automatic.items and note.hidden and note.escalating is True and note.tier == "local"
            await wait_for(lambda: s.escalated, "celeris/escalated after a quiet keystroke")
            (came,) = s.escalated
            assert get(came, "uri") == uri and get(came, "version") == 1 and get(came, "text").strip()
            assert (get(get(came, "position"), "line"), get(get(came, "position"), "character")) == PLACE
            # The client asks again where the cursor still is: the tier's answer, from the typing cache.
            again = await s.inline(uri, *PLACE)
            assert [i.insert_text for i in again.items] == [get(came, "text")]
            assert s.timings[-1].source == "typing-cache" and s.timings[-1].tier == "escalated"
            # A request the user made waits for the tier: its answer first, the local ones after it.
            s.open(other, OTHER)
            invoked = await s.inline(other, *OTHER_PLACE, invoked=True)
            note = s.timings[-1]
            assert invoked.items and note.tier == "escalated" and note.hidden is None
            status = await s.status()
            tier = get(status, "tier")
            assert get(tier, "endpoint") == tier_server.url and get(tier, "answered") == 2 and get(tier, "failed") == 0
            assert not s.messages
        finally:
            await s.stop()

    run(go())


def unsure_everywhere(endpoint: str) -> dict:
    """Settings under which every local answer is unsure (asked of ``endpoint``, 400 ms for the user's)."""
    return {"mode": "line", "budget_ms": 60000, "min_confidence": 1.0, "escalate_endpoint": endpoint,
            "escalate_budget_ms": 400}  # fmt: skip


class SlowToSayWho(Endpoint):
    """A tier whose ``GET /v1/models`` takes longer than the budget; completions answer at once."""

    def do_GET(self) -> None:
        time.sleep(1.5)
        super().do_GET()

    def do_POST(self) -> None:
        self.body()
        self.send({"choices": [{"index": 0, "text": "path.join(path)"}]})


def test_a_tier_slow_to_say_who_it_is_still_answers_the_first_request(shipped_model_dir, tmp_path):
    """The server is asked about itself when the tier is configured, not within the first request's
    400 ms (broken once: asked within it -> the first request times out and nothing comes)."""
    provider, endpoint = SlowToSayWho.start()
    uri = (tmp_path / "a.py").as_uri()
    options = unsure_everywhere(endpoint)

    async def go():
        s = Session(shipped_model_dir, init_options=options)
        await s.start()
        try:
            s.open(uri, TEXT)
            assert not (await s.inline(uri, *PLACE)).items and s.timings[-1].escalating is True
            await wait_for(lambda: s.escalated, "the tier's answer to the first request")
            assert get(s.escalated[0], "text") == "path.join(path)" and not s.messages
        finally:
            await s.stop()

    try:
        run(go())
    finally:
        provider.shutdown()


class NeverSaysWho(Endpoint):
    """A tier that accepts the connection and never answers ``GET /v1/models`` (until ``release``)."""

    asked = threading.Event()
    release = threading.Event()

    def do_GET(self) -> None:
        NeverSaysWho.asked.set()
        NeverSaysWho.release.wait(60)
        super().do_GET()


def test_asking_the_tier_about_itself_never_holds_up_the_end_of_a_session():
    """The warm-up is given up when the session ends (broken once: not given up -> its thread waits for
    the answer, 15 s, and the server's exit with it)."""
    provider, endpoint = NeverSaysWho.start()
    try:
        settings = load_settings({"escalate_endpoint": endpoint}, environ={}, user_file=Path("/nonexistent"))
        escalation = Escalation(settings, warn=lambda message: None)
        assert NeverSaysWho.asked.wait(60), "the tier was never asked about itself"
        escalation.stop()
        for thread in list(escalation.thread._threads):
            thread.join(timeout=5)
            assert not thread.is_alive(), "the tier's thread still waits for the tier after the session ended"
    finally:
        NeverSaysWho.release.set()
        provider.shutdown()


class Misbehaving(Endpoint):
    """A tier made to misbehave: ``how`` is "hold" (answers once ``release`` is set), "garbage" (not
    JSON) or "busy" (429); every completion request is counted."""

    how = "garbage"
    posts: list[float] = []
    release = threading.Event()

    def do_POST(self) -> None:
        self.body()
        Misbehaving.posts.append(time.monotonic())
        if Misbehaving.how == "hold":
            Misbehaving.release.wait(60)
            self.send({"choices": [{"index": 0, "text": "path.join(path)"}]})
        elif Misbehaving.how == "busy":
            self.send({"error": {"message": "slow down"}}, 429)
        else:
            self.send(b"<html>not a completion</html>", kind="text/html")


def asks_allowed(elapsed_s: float) -> int:
    """Tier requests a back-off allows within ``elapsed_s`` of the first failure (1, 2, 4... s apart)."""
    return int(math.log2(elapsed_s + 1)) + 1


def test_a_misbehaving_tier_never_blocks_typing_is_reported_once_and_rests(shipped_model_dir, tmp_path):
    provider, endpoint = Misbehaving.start()
    uri = (tmp_path / "a.py").as_uri()
    options = unsure_everywhere(endpoint)

    async def go():
        s = Session(shipped_model_dir, init_options=options)
        await s.start()
        try:
            s.open(uri, TEXT)
            # Slow: the keystroke is answered (quietly) while the tier still holds its request.
            Misbehaving.how = "hold"
            automatic = await s.inline(uri, *PLACE)
            assert not automatic.items and s.timings[-1].escalating is True
            await wait_for(lambda: Misbehaving.posts, "the tier asked")
            assert not Misbehaving.release.is_set() and not s.escalated
            # A request the user made waits escalate_budget_ms at most, then the local answer stands.
            invoked = await s.inline(uri, *PLACE, invoked=True)
            assert invoked.items and s.timings[-1].tier == "local"
            Misbehaving.release.set()
            # Not JSON: each keystroke answered at once, one message, and the tier rests between tries.
            Misbehaving.how, Misbehaving.posts[:] = "garbage", []
            line, col = PLACE
            started = time.monotonic()
            for i in range(10):
                s.insert(uri, line, col + i, "q")  # (not the shown answer's text: no typing-cache hit)
                assert not (await s.inline(uri, line, col + i + 1)).items
                await settled(s)  # (a tier request a newer keystroke supersedes is no failure: none here)
            elapsed = time.monotonic() - started
            status = await s.status()
            assert get(get(status, "tier"), "failed") >= 1
            assert 1 <= len(Misbehaving.posts) <= asks_allowed(elapsed), (len(Misbehaving.posts), elapsed)
            texts = [m.message for m in s.messages]
            assert sum("second tier" in t and "not a completion" in t for t in texts) == 1, texts
            # Busy (429), then down: one message each, and the local answers stand for requests the user made.
            with refused_port() as port:
                for how, where, said in (("busy", endpoint, "busy"), ("down", f"http://127.0.0.1:{port}", "connect")):
                    Misbehaving.how = how
                    await configure(s, {"escalate_endpoint": where, "escalate_budget_ms": 5000.0})
                    for _ in range(2):  # a second failure of the same kind, once the tier has rested
                        assert (await s.inline(uri, line, col + 10, invoked=True)).items
                        await rested(s)
                    assert get(get(await s.status(), "tier"), "failed") == 2
                    texts = [m.message for m in s.messages]
                    assert sum("second tier" in t and said in t for t in texts) == 1, texts
            assert get(await s.status(), "ready")
        finally:
            await s.stop()

    try:
        run(go())
    finally:
        Misbehaving.release.set()
        provider.shutdown()
