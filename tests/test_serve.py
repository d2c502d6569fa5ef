"""`celeris-complete serve`: the real server process (uvicorn, the shipped model) spoken to over HTTP,
plus the request parsing and API-key rules on their own."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from celeris_complete.errors import CelerisError
from celeris_complete.serve.access import api_key_from, is_loopback
from celeris_complete.serve.api import ApiError, cut_at_stop, parse_request, server_timing
from tests.conftest import REPO, require

KEY = "test-key-0123456789abcdef"
MASK = "\u2591"
# A place where the shipped model writes a few tokens over several steps.
PLACE = {
    "prompt": "import os\n\n\ndef list_python_files(root):\n    result = []\n"
    "    for name in os.listdir(root):\n        ",
    "suffix": "\n    return result\n",
    "mode": "block",
}
PHASES = {"queue", "tokenize", "encode", "refine", "post", "total"}


# ------------------------------------------------------------------------------------------------
# Without a server.


@pytest.mark.parametrize(
    "body, param",
    [
        ({"prompt": "x", "temperature": "hot"}, "temperature"),
        ({"prompt": "x", "max_tokens": 0}, "max_tokens"),
        ({"prompt": "x", "max_tokens": 1.5}, "max_tokens"),
        ({"prompt": "x", "n": True}, "n"),
        ({"prompt": 5}, "prompt"),
        ({"prompt": ["a", "b"]}, None),
        ({"prompt": "x", "stop": ["a", "b", "c", "d", "e"]}, None),
        ({"prompt": "x", "mode": "paragraph"}, "mode"),
        ({"prompt": "x", "steps": 65}, "steps"),
        ({"prompt": "x", "deadline_ms": 0}, "deadline_ms"),
        ({"prompt": "x", "echo": True}, "echo"),
        ({"prompt": "x", "top_p": 0.5, "temperature": 0.7}, "top_p"),
        ({"prompt": "x", "stream_steps": True}, "stream_steps"),
    ],
)
def test_invalid_fields_are_errors_naming_the_field(body, param):
    with pytest.raises(ApiError) as err:
        parse_request(body)
    assert err.value.status == 400 and err.value.param == param
    assert set(err.value.body()["error"]) == {"message", "type", "param", "code"}


def test_request_fields():
    req = parse_request({"prompt": ["a"], "suffix": "b", "stop": "\n", "random_seed": 7, "future_field": {"x": 1}})
    assert (req.prompt, req.suffix, req.stop, req.seed) == ("a", "b", ["\n"], 7)
    assert parse_request({"prompt": "x", "top_p": 0.5}).top_p == 0.5, "greedy decoding: top_p has no effect"
    with pytest.raises(ApiError):
        parse_request([{"prompt": "x"}])
    assert cut_at_stop("a = 1\nb = 2", ["\n", "="]) == ("a ", True)
    assert cut_at_stop("abc", ["x"]) == ("abc", False)
    assert server_timing({"queue": 1.234, "total": 5}) == "queue;dur=1.23, total;dur=5.00"


def test_api_key_rules(tmp_path):
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")
    assert api_key_from("127.0.0.1", None, None, {}) is None
    with pytest.raises(CelerisError, match="needs an API key"):
        api_key_from("0.0.0.0", None, None, {})
    with pytest.raises(CelerisError, match="not set or empty"):
        api_key_from("0.0.0.0", "SERVE_KEY", None, {})
    with pytest.raises(CelerisError, match="at least 16"):
        api_key_from("0.0.0.0", "SERVE_KEY", None, {"SERVE_KEY": "short"})
    assert api_key_from("0.0.0.0", "SERVE_KEY", None, {"SERVE_KEY": KEY}) == KEY
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o600)
    assert api_key_from("10.0.0.1", None, key_file, {}) == KEY
    with pytest.raises(CelerisError, match="outside CELERIS_"):
        api_key_from("10.0.0.1", "CELERIS_KEY", None, {"CELERIS_KEY": KEY})
    with pytest.raises(CelerisError, match="one way"):
        api_key_from("10.0.0.1", "SERVE_KEY", key_file, {"SERVE_KEY": KEY})
    with pytest.raises(CelerisError, match="cannot be read"):
        api_key_from("10.0.0.1", None, tmp_path / "missing", {})


# ------------------------------------------------------------------------------------------------
# The real server.


@contextlib.contextmanager
def refused_port():
    """A loopback port that refuses connections while the block runs: bound here and never listening, so
    that no other process can take it meanwhile (a port closed again could be anyone's a moment later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


class Served:
    """``celeris-complete serve --port 0``: the server binds a free port itself and names it in the line
    ``listening on URL`` on its stdout (the log here), which ``url`` waits for."""

    def __init__(self, log: Path, *args: str, env: dict | None = None) -> None:
        self.log = log
        self.out = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celeris_complete.cli", "serve", "--port", "0", *args],
            cwd=REPO,
            stdout=self.out,
            stderr=subprocess.STDOUT,
            env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", **(env or {})},
        )
        self.seen: list[tuple[int, dict]] = []  # /health answers until ready
        self.early_completion: httpx.Response | None = None
        self.listen_timeout = 120.0
        self._url: str | None = None

    @property
    def url(self) -> str:
        if self._url is None:
            from celeris_complete.bench.serve import wait_listening

            try:
                self._url = wait_listening(self.proc, self.log, self.listen_timeout)
            except RuntimeError as exc:
                raise AssertionError(str(exc)) from None
        return self._url

    @property
    def port(self) -> int:
        port = urlsplit(self.url).port
        assert port is not None
        return port

    def wait_ready(self, timeout: float = 120.0, headers: dict | None = None) -> None:
        end = time.monotonic() + timeout
        url = self.url  # once it listens
        while time.monotonic() < end:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                r = httpx.get(url + "/health", timeout=5)
            except httpx.TransportError:
                time.sleep(0.02)
                continue
            self.seen.append((r.status_code, r.json()))
            if r.status_code == 200:
                return
            if self.early_completion is None:
                self.early_completion = httpx.post(url + "/v1/completions", json=PLACE, headers=headers, timeout=5)
            time.sleep(0.05)
        raise AssertionError(f"the server was not ready in {timeout} s:\n{self.log.read_text()}")

    def stop(self) -> str:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.out.close()
        return self.log.read_text()


class Hold:
    """Holds the model worker of servers started with ``env()`` (tests/server_hold/sitecustomize.py): a
    request with ``prompt(token)`` as its prompt occupies the worker until ``release()``, so that what
    waits behind it, and what the full queue refuses, does not depend on how fast anything runs."""

    HOOK = REPO / "tests" / "server_hold"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.tokens = 0

    def env(self) -> dict:
        return {"PYTHONPATH": str(self.HOOK), "SERVER_HOLD_DIR": str(self.folder)}

    def token(self) -> str:
        self.tokens += 1
        return f"t{self.tokens}"

    @staticmethod
    def prompt(token: str) -> str:
        return f"# celeris-test-hold {token}\n" + PLACE["prompt"]

    def wait(self, what: str, token: str, timeout: float = 120.0) -> int:
        """The pid of the server process where the held request ``what`` ("arrived" in its queue, or
        "held" by its worker) once it is."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            found = sorted(self.folder.glob(f"{what}.{token}.*[0-9]"))
            if found:
                return int(found[0].name.rsplit(".", 1)[1])
            time.sleep(0.02)
        raise AssertionError(f"the held request {token} was not {what} in {timeout:g} s (is the hook loaded?)")

    def release(self) -> None:
        (self.folder / "release").touch()


@pytest.fixture(scope="module")
def server(shipped_model_dir, tmp_path_factory):
    s = Served(
        tmp_path_factory.mktemp("serve") / "server.log",
        "--model", str(shipped_model_dir), "--max-queue", "1", "--max-body-bytes", "65536",
        "--max-deadline-ms", "30000", "--log-level", "warning", "--batch", "--max-batch", "8",
    )  # fmt: skip
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


def sse_events(lines) -> list:
    """The data of each Server-Sent Event, JSON-decoded except the final [DONE]."""
    out = []
    for line in lines:
        if not line:
            continue
        assert line.startswith("data: "), line
        data = line[len("data: ") :]
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


def test_health_is_not_ready_while_the_model_loads(server):
    codes = [code for code, _ in server.seen]
    assert codes[0] == 503 and server.seen[0][1] == {"status": "loading"}, server.seen[:3]
    assert codes[-1] == 200 and server.seen[-1][1]["model"] == "celeris-default"
    early = server.early_completion
    assert early is not None and early.status_code == 503
    assert early.json()["error"]["code"] == "model_not_ready" and early.headers["retry-after"] == "1"


def test_models(client):
    r = client.get("/v1/models")
    assert r.status_code == 200
    assert r.json()["data"][0]["id"] == "celeris-default" and r.json()["object"] == "list"
    assert r.headers["server-timing"].startswith("total;dur=")


def test_fim_completion(client):
    r = client.post("/v1/fim/completions", json={**PLACE, "model": "celeris-default", "max_tokens": 24})
    assert r.status_code == 200, r.text
    body = r.json()
    choice = body["choices"][0]
    assert body["object"] == "fim.completion" and body["model"] == "celeris-default"
    assert choice["text"].strip() and choice["message"] == {"role": "assistant", "content": choice["text"]}
    assert choice["finish_reason"] in ("stop", "length")
    assert 0.0 < choice["confidence"] < 1.0  # the shipped model's calibrated probability that it is right
    assert body["usage"]["completion_tokens"] > 0 and body["usage"]["prompt_tokens"] > 0
    timing = dict(part.split(";dur=") for part in r.headers["server-timing"].split(", "))
    assert set(timing) == PHASES and float(timing["refine"]) > 0
    assert float(timing["total"]) >= float(timing["refine"])


def test_completions_with_suffix_stop_n_and_seed(client):
    plain = client.post("/v1/completions", json=PLACE).json()
    text = plain["choices"][0]["text"]
    assert plain["object"] == "text_completion" and text.strip()
    again = client.post("/v1/completions", json=PLACE).json()
    assert again["choices"][0]["text"] == text, "greedy decoding is deterministic"
    stop = text.strip()[1]
    cut = client.post("/v1/completions", json={**PLACE, "stop": [stop]}).json()["choices"][0]
    assert cut["text"] == text[: text.index(stop)] and cut["finish_reason"] == "stop"
    sampled = {**PLACE, "n": 3, "temperature": 1.0, "seed": 11}
    first, second = (client.post("/v1/completions", json=sampled).json() for _ in range(2))
    assert [c["index"] for c in first["choices"]] == [0, 1, 2]
    assert [c["text"] for c in first["choices"]] == [c["text"] for c in second["choices"]], "a seed repeats"


def test_bad_requests_get_openai_errors(client):
    def error(r, status):
        assert r.status_code == status, r.text
        assert "server-timing" in r.headers
        return r.json()["error"]

    e = error(client.post("/v1/completions", content=b'{"prompt": '), 400)
    assert "not valid JSON" in e["message"] and e["type"] == "invalid_request_error"
    assert error(client.post("/v1/completions", json={"prompt": "x", "max_tokens": "9"}), 400)["param"] == "max_tokens"
    e = error(client.post("/v1/completions", json={"prompt": "x", "model": "gpt-4"}), 404)
    assert e["code"] == "model_not_found" and e["param"] == "model"
    assert error(client.post("/v1/completions", json={"prompt": "x", "n": 9}), 400)["param"] == "n"
    assert error(client.post("/v1/completions", json={"prompt": "x", "deadline_ms": 31000}), 400)["param"] == (
        "deadline_ms"
    )
    assert error(client.post("/v1/completions", content=b"x" * 70000), 413)["code"] == "request_too_large"
    assert error(client.get("/v1/completions"), 405)
    assert error(client.get("/v1/nowhere"), 404)["code"] == "not_found"
    r = client.post("/v1/completions", json={**PLACE, "deadline_ms": 150, "steps": 64, "unknown_field": 1})
    assert r.status_code == 200, "a short deadline gives an anytime answer; unknown fields are ignored"


def test_stream(client):
    want = client.post("/v1/completions", json=PLACE).json()["choices"][0]["text"]
    with client.stream("POST", "/v1/completions", json={**PLACE, "stream": True}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        assert set(dict(p.split(";dur=") for p in r.headers["server-timing"].split(", "))) == PHASES
        events = sse_events(r.iter_lines())
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "text_completion" and len(c["choices"]) == 1 for c in chunks)
    assert "".join(c["choices"][0]["text"] for c in chunks) == want
    assert [c["choices"][0]["finish_reason"] for c in chunks][-1] in ("stop", "length")
    assert 0.0 < chunks[-1]["choices"][0]["confidence"] < 1.0  # on each choice's last chunk
    assert chunks[-1]["usage"]["completion_tokens"] > 0


def test_stream_steps_shows_the_canvas_sharpening(client):
    want = client.post("/v1/fim/completions", json={**PLACE, "steps": 8}).json()["choices"][0]["text"]
    body = {**PLACE, "steps": 8, "stream": True, "stream_steps": True}
    with client.stream("POST", "/v1/fim/completions", json=body) as r:
        assert r.status_code == 200
        assert r.headers["server-timing"].startswith("queue;dur=")
        events = sse_events(r.iter_lines())
    assert events[-1] == "[DONE]"
    steps = [c["choices"][0] for c in events[:-1] if "canvas" in c["choices"][0]]
    assert [s["step"] for s in steps] == list(range(1, len(steps) + 1)) and 1 < len(steps) <= 8
    assert all(s["text"] == "" and s["delta"]["content"] == "" for s in steps), "plain clients see only the answer"
    assert MASK in steps[0]["canvas"] and MASK not in steps[-1]["canvas"]
    assert "".join(c["choices"][0]["text"] for c in events[:-1]) == want
    assert events[-2]["object"] == "fim.completion.chunk" and set(events[-2]["timings"]) == PHASES


def test_full_queue_answers_429_and_a_client_that_leaves_is_dropped(server, client):
    long = {**PLACE, "n": 8, "steps": 64, "max_tokens": 64, "stream": True, "stream_steps": True}
    waiting: list[httpx.Response] = []
    with httpx.Client(base_url=server.url, timeout=60) as other:
        with other.stream("POST", "/v1/completions", json=long) as running:
            assert running.status_code == 200
            lines = running.iter_lines()  # kept: dropping the iterator would close the connection
            next(lines)  # the first step: the worker is busy with this request
            queued = threading.Thread(target=lambda: waiting.append(client.post("/v1/completions", json=PLACE)))
            queued.start()
            end = time.monotonic() + 10
            while client.get("/health").json()["queue"] < 1:
                assert time.monotonic() < end, "the second request never waited"
                time.sleep(0.005)
            with httpx.Client(base_url=server.url, timeout=60) as third:
                r = third.post("/v1/completions", json=PLACE)
            assert r.status_code == 429, r.text
            assert r.json()["error"]["code"] == "queue_full" and r.headers["retry-after"] == "1"
            assert "server-timing" in r.headers
        # Leaving mid-stream cancels the long request (the worker stops at its next step).
    queued.join(60)
    assert waiting and waiting[0].status_code == 200
    assert client.get("/health").status_code == 200
    assert "\nceleris_cancelled_total 1.0\n" in client.get("/metrics").text


def test_metrics(client):
    client.post("/v1/completions", json=PLACE)
    client.post("/v1/completions", json=PLACE)  # the same context: a cache hit
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    values = {}
    for line in r.text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    assert values['celeris_requests_total{endpoint="/v1/completions",status="200"}'] >= 2
    assert values['celeris_context_cache_total{result="hit"}'] >= 1
    assert values['celeris_tokens_total{kind="completion"}'] > 0
    assert values['celeris_request_seconds_count{endpoint="/v1/completions"}'] >= 2
    assert values['celeris_phase_seconds_count{phase="refine"}'] >= 2
    assert values["celeris_batch_size_count"] >= 2 and values["celeris_model_ready"] == 1


def test_api_key_is_required_and_never_logged(shipped_model_dir, tmp_path):
    s = Served(
        tmp_path / "server.log", "--model", str(shipped_model_dir), "--api-key-env", "COMPLETION_API_KEY",
        env={"COMPLETION_API_KEY": KEY},
    )  # fmt: skip
    try:
        s.wait_ready(headers={"Authorization": f"Bearer {KEY}"})
        with httpx.Client(base_url=s.url, timeout=60) as c:
            for headers in ({}, {"Authorization": "Bearer wrong-key-0123456789"}, {"Authorization": KEY}):
                r = c.get("/v1/models", headers=headers)
                assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
                assert r.headers["www-authenticate"] == "Bearer" and "server-timing" in r.headers
                assert c.post("/v1/completions", json=PLACE, headers=headers).status_code == 401
            good = {"Authorization": f"Bearer {KEY}"}
            assert c.get("/v1/models", headers=good).status_code == 200
            assert c.post("/v1/completions", json=PLACE, headers=good).status_code == 200
            assert c.get("/health").status_code == 200, "health answers probes without the key"
    finally:
        log = s.stop()
    assert KEY not in log and "wrong-key" not in log


def test_a_public_address_needs_a_key():
    r = subprocess.run(
        [sys.executable, "-m", "celeris_complete.cli", "serve", "--host", "0.0.0.0", "--port", "0"],
        cwd=REPO,
        capture_output=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
    )
    assert r.returncode == 2 and b"needs an API key" in r.stderr


def test_bench_serve_against_the_running_server(server, shipped_model_dir):
    from celeris_complete.bench.serve import engine_alone, places, run, table

    result = run([1, 2], 1.0, url=server.url, requests=6)
    rows = result["rows"]
    assert [r["clients"] for r in rows] == [1, 2] and result["batching"] is True
    # (429s may come: this server's queue holds one request, and the bench retries them.)
    assert all(r["requests"] > 0 and r["errors"] == r["deadline_504"] == 0 for r in rows), str(rows)
    assert all(r["p50_ms"] <= r["p99_ms"] and r["server_work_p50_ms"] > 0 for r in rows), str(rows)
    assert table(result).splitlines()[0].startswith("| clients | requests | throughput")
    assert result["engine_alone"] is None  # a server it did not start: its engine is not here to measure
    paired = engine_alone(str(shipped_model_dir), places(6), 4, True, 1, None, url=server.url)
    assert paired["requests"] == 4 and paired["through_server_p50_ms"] > 0 and "loopback_adds_p50_ms" in paired


def test_bench_serve_measures_the_engine_alone_as_the_loopback_reference(tiny_model_dir):
    from celeris_complete.bench.serve import engine_alone, places, table

    alone = engine_alone(str(tiny_model_dir), places(6), 5, True, 1, None)
    assert alone["requests"] == 5 and alone["p50_ms"] > 0
    row = {"clients": 1, "requests": 5, "throughput_rps": 1, "p50_ms": alone["p50_ms"] + 2, "p95_ms": 1,
           "p99_ms": 1, "server_queue_p50_ms": 0, "server_work_p50_ms": 1, "http_overhead_p50_ms": 1,
           "rejected_429": 0, "deadline_504": 0, "errors": 0}  # fmt: skip
    shown = table({"rows": [row], "engine_alone": {**alone, "through_server_p50_ms": 9, "loopback_adds_p50_ms": 2.0}})
    assert "the server and loopback add 2.0 ms" in shown


# ------------------------------------------------------------------------------------------------
# Official clients against the real server.


def test_openai_client_completions_with_suffix_and_streaming(server, client):
    openai = require("openai")
    want = client.post("/v1/completions", json={**PLACE, "max_tokens": 24}).json()["choices"][0]["text"]
    api = openai.OpenAI(base_url=server.url + "/v1", api_key="not-needed-on-loopback", max_retries=0)
    plain = {"model": "celeris-default", "prompt": PLACE["prompt"], "suffix": PLACE["suffix"], "max_tokens": 24}
    got = api.completions.create(**plain, extra_body={"mode": "block"})
    assert got.choices[0].text == want and got.choices[0].finish_reason in ("stop", "length")
    assert got.usage.completion_tokens > 0 and got.model == "celeris-default"
    chunks = list(api.completions.create(**plain, stream=True, extra_body={"mode": "block"}))
    assert "".join(c.choices[0].text for c in chunks) == want
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")
    with pytest.raises(openai.BadRequestError) as err:
        api.completions.create(model="celeris-default", prompt="x", max_tokens=0)
    assert err.value.status_code == 400


def test_openai_client_chat_completions_fill_the_marker(server, client):
    """A fill-in-the-middle request in chat form answers with the completion (backends/chat_prompt.py's
    prompt), whole and streamed with its usage; a chat without the marker is a clear 400."""
    openai = require("openai")
    from celeris_complete.backends.chat_prompt import build

    api = openai.OpenAI(base_url=server.url + "/v1", api_key="not-needed-on-loopback", max_retries=0)
    for mode in ("block", "line"):
        want = client.post("/v1/fim/completions", json={**PLACE, "mode": mode}).json()["choices"][0]["text"]
        messages = build(PLACE["prompt"], PLACE["suffix"], mode, "python")
        extra = {} if mode == "line" else {"extra_body": {"mode": "block"}}  # "one line" in the prompt says line
        got = api.chat.completions.create(model="celeris-default", messages=messages, **extra)
        assert got.object == "chat.completion" and got.id.startswith("chatcmpl-")
        assert got.choices[0].message.role == "assistant" and got.choices[0].message.content == want
        assert got.choices[0].finish_reason in ("stop", "length") and got.usage.completion_tokens > 0
        assert 0.0 < got.choices[0].model_extra["confidence"] < 1.0  # ours: the client keeps a field it does not know
        if mode == "line":
            assert "\n" not in want
    stream = api.chat.completions.create(
        model="celeris-default", messages=messages, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == want
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] in ("stop", "length")
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    r = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "write a poem"}]})
    assert r.status_code == 400 and "<FILL_HERE>" in r.json()["error"]["message"]
    assert "server-timing" in r.headers
    r = client.post("/v1/chat/completions", json={"messages": messages, "tools": [{"type": "function"}]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tools"


def test_mistral_client_fim_complete(server, client):
    mistral = require("mistralai.client")
    want = client.post("/v1/fim/completions", json={**PLACE, "max_tokens": 24}).json()["choices"][0]["text"]
    with mistral.Mistral(api_key="not-needed-on-loopback", server_url=server.url) as api:
        got = api.fim.complete(
            model="celeris-default", prompt=PLACE["prompt"], suffix=PLACE["suffix"], max_tokens=24, random_seed=1
        )
    # (mode block is the FIM body's own field; the Mistral client sends only its known fields: auto mode)
    assert got.choices[0].message.content.strip() and got.model == "celeris-default"
    auto = client.post("/v1/fim/completions", json={**PLACE, "max_tokens": 24, "mode": None}).json()
    assert got.choices[0].message.content == auto["choices"][0]["text"]
    assert want  # the block-mode answer of the same place, for comparison in failures


# ------------------------------------------------------------------------------------------------
# Hostile clients: the server keeps answering the others throughout.


def test_a_slow_body_and_a_huge_chunked_body_do_not_stall_others(server, client):
    body = json.dumps(PLACE).encode()
    slow = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    try:
        head = (
            "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        slow.sendall(head.encode() + body[:10])
        # Half a body on the wire: the others are answered meanwhile.
        for _ in range(2):
            assert client.post("/v1/completions", json=PLACE).status_code == 200
        assert client.get("/health").status_code == 200

        def chunks():
            for _ in range(20):
                yield b"x" * 8192  # 160 KiB with no Content-Length: the server counts as it reads

        r = client.post("/v1/completions", content=chunks())
        assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
        slow.sendall(body[10:])
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += slow.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    finally:
        slow.close()


def test_clients_that_vanish_mid_stream_or_send_garbage(server, client):
    long = {**PLACE, "steps": 64, "max_tokens": 64, "stream": True, "stream_steps": True}
    for _ in range(3):
        with httpx.Client(base_url=server.url, timeout=60) as leaving:
            with leaving.stream("POST", "/v1/fim/completions", json=long) as r:
                next(r.iter_lines())  # one step, then the connection closes under the server
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    try:
        raw.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: nine\r\n\r\n{}")
        assert raw.recv(65536).split(b"\r\n")[0].startswith(b"HTTP/1.1 4")
    finally:
        raw.close()
    wrong = [["not", "an", "object"], {"prompt": "x", "suffix": 7}, {"prompt": "x", "stop": [1]}, {"prompt": None}]
    for body in wrong:
        r = client.post("/v1/fim/completions", json=body)
        assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error", (body, r.text)
    r = client.post("/v1/fim/completions", content=b"\xff\xfe not utf-8")
    assert r.status_code == 400
    assert client.post("/v1/fim/completions", json=PLACE).status_code == 200, "the server still answers"


def test_the_server_module_loads_without_torch():
    """torch loads with the model, in the background: the server binds and answers /health before."""
    code = "import sys, celeris_complete.serve.app; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr


GO_LOOP = {"prompt": "package x\n\nfunc sum(xs []int) int {\n\ttotal := 0\n\tfor _, x := range xs {\n\t\t",
           "suffix": "\n\t}\n\treturn total\n}\n", "max_tokens": 16}  # fmt: skip


def test_the_request_names_the_language_and_answers_are_judged_in_it(client):
    """A Go document: the model (trained on Python) writes what Go's parser blames; named by ``language``
    or by ``filename``, the answer is judged by it (repaired or withheld) and never has Python's forms."""
    from celeris_complete.checks.grammar import grammar_window
    from celeris_complete.checks.languages import foreign, resolve
    from celeris_complete.checks.syntax import judge
    from celeris_complete.checks.window import BLAMED

    go = resolve("go")
    win = grammar_window(GO_LOOP["prompt"], GO_LOOP["suffix"], go)
    assert win.clean
    plain = client.post("/v1/fim/completions", json=GO_LOOP).json()["choices"][0]["text"]
    assert judge(win, plain) == BLAMED, plain  # (what this test needs the model to do without the language)
    for named in ({"language": "go"}, {"filename": "pkg/sum.go"}):
        text = client.post("/v1/fim/completions", json={**GO_LOOP, **named}).json()["choices"][0]["text"]
        assert text != plain and judge(win, text) != BLAMED and not foreign(go, "\t\t", text), (named, text)
    assert parse_request({"prompt": "x", "language": "go", "filename": "a.go"}).language == "go"
    with pytest.raises(ApiError) as err:
        parse_request({"prompt": "x", "language": "g" * 65})
    assert err.value.param == "language"


def test_edit_completions_in_mercurys_shape(client):
    """/v1/edit/completions: a next-edit prompt (Mercury Edit's tags) in, the editable region with the next
    edit made, fenced, as a chat completion."""
    from celeris_complete.edits.prompt import unfenced, write

    text = "def scale(factor):\n    print(size)\n    return size * 2\n\n\nx = 1\n"
    lo, hi = text.index("    print"), text.index("\n\n\nx") + 1
    diffs = "--- a/s.py\n+++ b/s.py\n@@ -1,1 +1,1 @@\n-def scale(size):\n+def scale(factor):\n"
    message = {"role": "user", "content": write("s.py", text, lo, hi, lo, diffs)}
    r = client.post("/v1/edit/completions", json={"model": "celeris-default", "messages": [message]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "chat.completion" and body["choices"][0]["finish_reason"] == "stop"
    assert unfenced(body["choices"][0]["message"]["content"]) == "    print(factor)\n    return factor * 2\n"
    assert body["usage"]["prompt_tokens"] > 0 and "edit;dur=" in r.headers["server-timing"]
    # No edit history: the region as it is.
    message["content"] = write("s.py", text, lo, hi, lo, "")
    r = client.post("/v1/edit/completions", json={"messages": [message]})
    assert unfenced(r.json()["choices"][0]["message"]["content"]) == text[lo:hi]
    # Not a next-edit prompt, or no messages: 400 naming the field.
    hello = [{"role": "user", "content": "hello"}]
    for bad in ({"messages": hello}, {"messages": []}, {"model": 3, "messages": [message]}):
        r = client.post("/v1/edit/completions", json=bad)
        assert r.status_code == 400 and r.json()["error"]["param"] in ("messages", "model"), r.text
