"""The remote backend against a real `celeris-complete serve` process (the shipped model, one server
for the module): the same answers as the local engine, Server-Timing in the timings, cancellation,
errors (server down, wrong key, a full queue) as one kind each, and the language server completing
through it, reporting a failure once and announcing an endpoint off this machine."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from pathlib import Path

import httpx
import pytest
from lsprotocol import types

from celeris_complete.backends.remote import RemoteError, cut_window, parse_server_timing
from celeris_complete.config import load_settings
from celeris_complete.engine import Engine, InfillRequest
from celeris_complete.model.context import build_context
from celeris_complete.model.diffusion import Cancelled
from tests.lsp_session import Session, run
from tests.second_tier import Endpoint
from tests.test_serve import PLACE, Hold, Served, refused_port

KEY_ENV, KEY = "REMOTE_TEST_KEY", "remote-test-key-0123456789"
WRONG_ENV = "REMOTE_TEST_WRONG_KEY"
PLACES = [
    ("import os\n\n\ndef list_python_files(root):\n    result = []\n    for name in os.listdir(root):\n        ",
     "\n    return result\n", "block"),
    ("def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    ret", "\n", "line"),
    ("# a long file\n" + "x_%d = %d\n" * 0 + "".join(f"value_{i} = compute({i})\n" for i in range(300)) + "total = ",
     "\nprint(total)\n", "line"),
]  # fmt: skip
SNIPPETS = ["def compute(n):\n    return n * n\n", "class Totals:\n    pass\n"]


def settings(**over):
    return load_settings(over, environ={}, user_file=Path("/nonexistent"))


@pytest.fixture(scope="module")
def hold(tmp_path_factory):
    return Hold(tmp_path_factory.mktemp("hold"))


@pytest.fixture(scope="module")
def server(shipped_model_dir, tmp_path_factory, hold):
    # (a long deadline: requests waiting behind a held one must not time out in the queue)
    s = Served(
        tmp_path_factory.mktemp("remote") / "server.log", "--model", str(shipped_model_dir),
        "--api-key-env", KEY_ENV, "--max-queue", "1", "--max-deadline-ms", "300000", "--log-level", "warning",
        env={KEY_ENV: KEY, **hold.env()},
    )  # fmt: skip
    try:
        s.wait_ready(headers={"Authorization": f"Bearer {KEY}"})
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def keys():
    os.environ[KEY_ENV], os.environ[WRONG_ENV] = KEY, "not-the-key-0123456789"
    yield
    os.environ.pop(KEY_ENV, None)
    os.environ.pop(WRONG_ENV, None)


@pytest.fixture(scope="module")
def local(shipped_model_dir):
    return Engine(settings(model=str(shipped_model_dir)))


@pytest.fixture(scope="module")
def remote(server, keys):
    return Engine(settings(endpoint=server.url, api_key_env=KEY_ENV))


def test_windows_and_timing_header():
    prefix = "".join(f"line_{i} = {i}\n" for i in range(2000))
    w = cut_window(prefix, "a\n" * 5000, 256, 96, True, True, ["s" * 5000, "t" * 10, "u"], 80)
    assert len(w.prefix) < len(prefix) and not w.file_start and (len(prefix) - len(w.prefix)) % 256 == 0
    assert len(w.suffix) <= 96 * 16 and w.suffix.endswith("\n") and not w.file_end
    assert w.snippets == ("s" * 80 * 16,), "the first snippet fills the budget: the others are not sent"
    small = cut_window("x = 1\n", "\n", 256, 96, True, False, [], 80)
    assert (small.prefix, small.suffix, small.file_start, small.file_end, small.snippets) == ("x = 1\n", "\n", True,
                                                                                           False, ())  # fmt: skip
    assert parse_server_timing('queue;dur=1.5, encode;desc="x";dur=2, bad;dur=x, total;dur=9') == {
        "queue": 1.5, "encode": 2.0, "total": 9.0}  # fmt: skip


def test_the_same_answers_as_the_local_engine(local, remote):
    for prefix, suffix, mode in PLACES:
        for snippets in ((), SNIPPETS) if mode == "line" else ((),):
            want = local.complete(InfillRequest(prefix, suffix, mode=mode, snippets=snippets))
            got = remote.complete(InfillRequest(prefix, suffix, mode=mode, snippets=snippets))
            assert got.text == want.text, (prefix[-40:], snippets)
            assert got.tokens == want.tokens and got.context_tokens == want.context_tokens
    # The long place's prefix was cut before sending, and the server still built the local context.
    prefix, suffix, _ = PLACES[2]
    s = local.settings
    ctx = build_context(local.tok, prefix, suffix, s.prefix_tokens, s.suffix_tokens)
    assert remote.complete(InfillRequest(prefix, suffix, mode="line")).context_tokens == len(ctx.tokens)
    assert not remote.impl.context(prefix, suffix, s.prefix_tokens, s.suffix_tokens, True, True, (), 0).file_start
    assert remote.backend == "remote" and got.cache == "remote"
    t = got.timings_ms
    assert {"server_queue", "server_encode", "server_refine", "server_total", "network", "total"} <= set(t)
    assert t["total"] >= t["server_total"] > 0
    assert remote.complete(InfillRequest(*PLACES[0][:2], steps=2, mode="block")).steps == 2, "steps go to the server"


def test_the_chat_api_gives_the_local_answers_through_our_server(local, server, keys):
    chat = Engine(settings(endpoint=server.url, api_key_env=KEY_ENV, api="chat"))
    for prefix, suffix, mode in PLACES:
        want = local.complete(InfillRequest(prefix, suffix, mode=mode)).text
        assert chat.complete(InfillRequest(prefix, suffix, mode=mode)).text == want, prefix[-40:]


class ChatModel(Endpoint):
    """A chat-only provider that answers as chat models do: the code in a fence, the line repeated."""

    MODEL = "chat-model"
    bodies: list = []

    def do_POST(self) -> None:
        ChatModel.bodies.append((self.path, json.loads(self.body())))
        content = "Here you go:\n```python\n    return a * b\n```\nThis multiplies the numbers."
        self.send({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]})


def test_a_chat_only_provider_gets_the_fill_prompt_and_its_reply_is_read_as_a_completion():
    provider, url = ChatModel.start()
    try:
        engine = Engine(settings(endpoint=url, api="chat"))
        prefix, suffix, mode = PLACES[1]  # "    ret" typed
        done = engine.complete(InfillRequest(prefix, suffix, mode=mode))
    finally:
        provider.shutdown()
    assert done.text == "urn a * b"
    path, body = ChatModel.bodies[-1]
    assert path == "/v1/chat/completions" and body["model"] == "chat-model" and body["max_tokens"] == 64
    assert "<FILL_HERE>" in body["messages"][-1]["content"] and "stop" not in body


def test_python_answers_are_checked_on_this_side(local, remote):
    """The compiler's check runs where the editor is, and on our server, which is told the language: a
    remote answer the compiler blames is repaired or withheld here (never replaced by samples: no model
    here), or replaced by the server."""
    from celeris_complete.checks.window import error_line, window

    for prefix, suffix, mode in PLACES:
        plain = remote.complete(InfillRequest(prefix, suffix, mode=mode))
        got = remote.complete(InfillRequest(prefix, suffix, mode=mode, language="python"))
        assert plain.syntax == ""
        verdicts = ("ok", "elsewhere", "reindented", "shortened", "closed", "withheld", "kept")
        assert got.syntax in verdicts if plain.text else got.syntax == ""  # an empty answer: nothing to judge
        win = window(prefix, suffix)
        if win.clean and plain.text:
            assert got.text == "" or error_line(win.source(got.text)) == 0, (plain.text, got.text)


def metric(server, name: str) -> float:
    text = httpx.get(server.url + "/metrics", headers={"Authorization": f"Bearer {KEY}"}).text
    lines = [ln for ln in text.splitlines() if ln.startswith(name + " ") or ln.startswith(name + "_total ")]
    return float(lines[0].split()[-1]) if lines else 0.0


def test_a_superseded_request_is_abandoned_and_the_server_stops(server, remote):
    before = metric(server, "celeris_cancelled")
    asked = []

    def should_cancel() -> bool:
        asked.append(time.perf_counter())
        return len(asked) > 25  # superseded after about 50 ms of waiting

    prefix, suffix, _ = PLACES[0]
    with pytest.raises(Cancelled):
        remote.complete(
            InfillRequest(prefix, suffix, mode="block", steps=64, max_tokens=64, should_cancel=should_cancel)
        )
    for _ in range(200):  # the server notices the closed connection and stops the decode
        if metric(server, "celeris_cancelled") > before:
            break
        time.sleep(0.05)
    assert metric(server, "celeris_cancelled") > before
    assert (
        remote.complete(InfillRequest(prefix, suffix, mode="block")).text
        == remote.complete(InfillRequest(prefix, suffix, mode="block")).text
    )


def test_errors_have_one_kind_each(server, remote, keys, hold):
    with refused_port() as port:
        down = Engine(settings(endpoint=f"http://127.0.0.1:{port}"))
        with pytest.raises(RemoteError) as err:
            down.complete(InfillRequest("x = ", "\n"))
    assert err.value.kind == "refused" and "cannot connect" in str(err.value)
    wrong = Engine(settings(endpoint=server.url, api_key_env=WRONG_ENV))
    with pytest.raises(RemoteError) as err:
        wrong.complete(InfillRequest("x = ", "\n"))
    assert err.value.kind == "auth" and "not-the-key" not in str(err.value)
    with pytest.raises(Exception, match="not set or empty"):
        Engine(settings(endpoint=server.url, api_key_env="REMOTE_TEST_UNSET_VARIABLE"))
    with pytest.raises(Exception, match="http:// or https://"):
        Engine(settings(endpoint="ftp://example.org"))
    # A full queue (--max-queue 1): the worker held by one request, another waiting, ours is refused.
    auth = {"Authorization": f"Bearer {KEY}"}
    answers: list[httpx.Response] = []

    def post(prompt: str) -> None:
        body = {**PLACE, "prompt": prompt, "max_tokens": 8}
        answers.append(httpx.post(server.url + "/v1/fim/completions", json=body, headers=auth, timeout=300))

    token = hold.token()
    held = threading.Thread(target=post, args=(hold.prompt(token),))
    held.start()
    waiting = threading.Thread(target=post, args=(PLACE["prompt"],))
    try:
        hold.wait("held", token)
        waiting.start()
        end = time.monotonic() + 120
        while httpx.get(server.url + "/health", timeout=10).json()["queue"] < 1:
            assert time.monotonic() < end, "the second request never waited in the queue"
            time.sleep(0.02)
        with pytest.raises(RemoteError) as err:
            remote.complete(InfillRequest("x = ", "\n"))
        assert err.value.kind == "busy", err.value
    finally:
        hold.release()
        held.join(300)
        if waiting.ident is not None:  # (started)
            waiting.join(300)
    assert [r.status_code for r in answers] == [200, 200], [r.text for r in answers]


def get(obj, key: str):
    """A field of a custom request's answer (pygls gives objects, not dicts)."""
    return obj[key] if isinstance(obj, dict) else getattr(obj, key)


async def configure(s: Session, new: dict) -> None:
    """New settings, and the server's engine reloaded with them."""
    s.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=new))
    for _ in range(600):
        status = await s.status()
        if get(status, "ready") and get(status, "model") == new["endpoint"]:
            if all(get(get(status, "settings"), k) == v for k, v in new.items()):
                return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the server did not take {new}")


def test_the_language_server_completes_remotely_and_reports_failures_once(server, local, keys, tmp_path):
    uri = (tmp_path / "a.py").as_uri()
    prefix, suffix, _ = PLACES[1]
    text = prefix + suffix
    line, col = prefix.count("\n"), len(prefix) - prefix.rfind("\n") - 1
    want = local.complete(InfillRequest(prefix, suffix)).text
    base = {"endpoint": server.url, "api_key_env": KEY_ENV, "budget_ms": 10000, "drafts": False}

    async def go():
        s = Session("unused", init_options=base)
        await s.start()
        try:
            s.open(uri, text)
            got = await s.inline(uri, line, col)
            assert [i.insert_text for i in got.items] == ([want] if want.strip() else [])
            status = await s.status()
            assert get(status, "backend") == "remote" and get(status, "model") == server.url
            assert not s.messages, "a loopback endpoint is not announced"
            # A server off this machine (TEST-NET, never routed): announced once, its failure shown once.
            await configure(s, {"endpoint": "http://192.0.2.1:9", "budget_ms": 300})
            for _ in range(3):
                assert not (await s.inline(uri, line, col)).items
            # The right server with the wrong key: one more message, however many requests fail.
            await configure(s, {"endpoint": server.url, "api_key_env": WRONG_ENV, "budget_ms": 10000})
            for _ in range(3):
                assert not (await s.inline(uri, line, col)).items
            texts = [m.message for m in s.messages]
            assert sum("192.0.2.1" in t and "sent there" in t for t in texts) == 1, texts
            assert sum("did not answer" in t or "cannot connect" in t for t in texts) == 1, texts
            assert sum("API key was refused" in t for t in texts) == 1, texts
            assert len(texts) == 3, texts
            assert get(await s.status(), "ready"), "still answering"
        finally:
            await s.stop()

    run(go())


def test_infill_through_the_endpoint(server, local, keys):
    from typer.testing import CliRunner

    from celeris_complete.cli import app

    prefix, suffix, _ = PLACES[1]
    runner = CliRunner()
    env = {"HOME": "/nonexistent", "XDG_CONFIG_HOME": "/nonexistent"}
    ok = runner.invoke(app, ["infill", "-", "--endpoint", server.url, "--api-key-env", KEY_ENV],
                       input=prefix + "<FILL>" + suffix, env=env)  # fmt: skip
    assert ok.exit_code == 0, ok.output
    assert ok.stdout.startswith(prefix + local.complete(InfillRequest(prefix, suffix)).text + suffix)
    with refused_port() as port:
        down = runner.invoke(app, ["infill", "-", "--endpoint", f"http://127.0.0.1:{port}"], input="x = <FILL>\n",
                             env=env)  # fmt: skip
    assert down.exit_code != 0 and "cannot connect" in down.output and "Traceback" not in down.output
