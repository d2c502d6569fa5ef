"""`celeris-complete serve --ray`: a local Ray instance with two replicas of the shipped model, started
and stopped by the real CLI process, spoken to over HTTP next to a plain `serve` process and expected
to answer the same; plus the options' rules without Ray."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from celeris_complete.errors import CelerisError
from tests.conftest import REPO, require
from tests.test_serve import KEY, PLACE, Hold, Served, sse_events

serve_ray = require("celeris_complete.serve.ray_serve")
RayOptions = serve_ray.RayOptions
ServeOptions = require("celeris_complete.serve.app").ServeOptions

AUTH = {"Authorization": f"Bearer {KEY}"}
ENV = {"COMPLETION_API_KEY": KEY}


# ------------------------------------------------------------------------------------------------
# Without Ray running.


@pytest.mark.parametrize(
    "options, message",
    [
        (RayOptions(replicas=0), "--replicas"),
        (RayOptions(replicas=2, max_replicas=4), "either --replicas"),
        (RayOptions(min_replicas=2), "needs --max-replicas"),
        (RayOptions(min_replicas=3, max_replicas=2), "at least --min-replicas"),
        (RayOptions(min_replicas=0, max_replicas=0), "at least 1"),
        (RayOptions(target_ongoing_requests=0), "--target-ongoing-requests"),
        (RayOptions(cpus_per_replica=0), "--cpus-per-replica"),
        (RayOptions(num_cpus=2, address="auto"), "local instance"),
    ],
)
def test_bad_ray_options_name_the_option(options, message):
    with pytest.raises(CelerisError, match=message):
        options.check()


def test_deployment_options():
    fixed = serve_ray.deployment_options(RayOptions(replicas=3, cpus_per_replica=0.5), ServeOptions(max_queue=8))
    assert fixed["num_replicas"] == 3 and "autoscaling_config" not in fixed
    assert fixed["ray_actor_options"] == {"num_cpus": 0.5}
    assert (fixed["max_ongoing_requests"], fixed["max_queued_requests"]) == (18, 72), "above the replica's queue"
    assert fixed["backpressure_config"].status_code == 429
    auto = serve_ray.deployment_options(RayOptions(max_replicas=4, target_ongoing_requests=1.5), ServeOptions())
    assert auto["autoscaling_config"] == {"min_replicas": 1, "max_replicas": 4, "target_ongoing_requests": 1.5}
    assert "num_replicas" not in auto
    zero = serve_ray.deployment_options(RayOptions(min_replicas=0, max_replicas=2), ServeOptions())
    assert zero["autoscaling_config"]["min_replicas"] == 0


def test_replica_threads_follow_its_cpus():
    from celeris_complete.config import load_settings

    settings = load_settings({}, environ={})
    assert serve_ray.replica_settings(settings, RayOptions(cpus_per_replica=2.5)).threads == 2
    assert serve_ray.replica_settings(settings, RayOptions(cpus_per_replica=0.5)).threads == 1
    given = load_settings({"threads": 3}, environ={})
    assert serve_ray.replica_settings(given, RayOptions(cpus_per_replica=1)).threads == 3


def test_cli_rules_before_ray_starts():
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "celeris_complete.cli", "serve", "--port", "0", *args],
            cwd=REPO, capture_output=True, timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
        )  # fmt: skip

    r = cli("--ray", "--host", "0.0.0.0")
    assert r.returncode == 2 and b"needs an API key" in r.stderr, r.stderr
    r = cli("--replicas", "2")
    assert r.returncode == 2 and b"need --ray" in r.stderr, r.stderr
    r = cli("--ray", "--ray-address", "auto")
    assert r.returncode == 2 and b"--port 0 is for a local Ray instance" in r.stderr, r.stderr


# ------------------------------------------------------------------------------------------------
# Two replicas on a local Ray instance, and the plain server for the answers they must equal.


class RayServed(Served):
    """The CLI with --ray; Ray's files (and its sockets: short paths) in a directory of their own."""

    def __init__(self, log: Path, *args: str, env: dict | None = None) -> None:
        self.tmp = tempfile.mkdtemp(prefix="cray", dir="/tmp")
        self.t0 = time.monotonic()
        super().__init__(log, "--ray", *args, env={**ENV, "RAY_TMPDIR": self.tmp, **(env or {})})

    def wait_serving(self, timeout: float = 300.0) -> float:
        """Seconds from the command's start until it said where it listens, which it does once serve.run
        returned (every replica loaded its model) and the proxy answers.  Two replicas load the model
        beside the plain server and the other pytest worker: on a busy 2-core machine that took more
        than 90 s (2026-12-02)."""
        self.listen_timeout = timeout
        assert self.url.startswith("http://127.0.0.1:")
        return time.monotonic() - self.t0

    def stop(self) -> str:
        self.proc.terminate()
        try:
            self.code = self.proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.code = None
        self.out.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        return self.log.read_text(errors="replace")


# (a long deadline: requests waiting behind a held one must not time out in the queue)
LIMITS = ("--threads", "1", "--max-body-bytes", "65536", "--max-deadline-ms", "300000")


@pytest.fixture(scope="module")
def hold(tmp_path_factory):
    return Hold(tmp_path_factory.mktemp("hold"))


@pytest.fixture(scope="module")
def servers(shipped_model_dir, tmp_path_factory, hold):
    """The plain server and Ray Serve with two replicas, started together (the plain one loads meanwhile)."""
    logs = tmp_path_factory.mktemp("serve-ray")
    model = ("--model", str(shipped_model_dir))
    ray = RayServed(
        logs / "ray.log", *model, *LIMITS, "--replicas", "2", "--cpus-per-replica", "0.5", "--ray-num-cpus", "2",
        "--max-queue", "4", "--api-key-env", "COMPLETION_API_KEY", "--log-level", "info", env=hold.env(),
    )  # fmt: skip
    plain = Served(logs / "plain.log", *model, *LIMITS, "--log-level", "warning")
    try:
        plain.wait_ready()
        startup_s = ray.wait_serving()
        print(f"serve --ray: two replicas serving {startup_s:.1f} s after the command started")
        yield plain, ray
    finally:
        plain.stop()
        log = ray.stop()
    assert ray.code == 0, f"serve --ray did not stop cleanly ({ray.code}):\n{log[-3000:]}"
    assert KEY not in log, "the API key was logged"


@pytest.fixture(scope="module")
def both(servers):
    """Clients of the plain server and of Ray Serve."""
    plain, ray = servers
    with httpx.Client(base_url=plain.url, timeout=60) as p, httpx.Client(base_url=ray.url, timeout=60) as r:
        yield p, r


def same(body: dict) -> dict:
    """A response body without what differs between any two answers (id, creation time, timings)."""
    return {k: v for k, v in body.items() if k not in ("id", "created", "timings")}


@pytest.mark.parametrize("path", ["/v1/fim/completions", "/v1/completions"])
def test_two_replicas_answer_as_the_plain_server(both, path):
    plain, ray = both
    # Contexts that share no cached prefix (they differ from the suffix's first token on): with int8 a
    # context extended from a cached prefix is quantized in other pieces than one encoded whole, and
    # may be answered differently, so each replica's answers would depend on the order it got them in.
    line = {"prompt": "import os\n\nroot = os.path.", "suffix": "", "mode": "line"}
    bodies = [PLACE, line, {**PLACE, "max_tokens": 6}]
    want = [plain.post(path, json=b) for b in bodies]
    assert all(w.status_code == 200 for w in want), [w.text for w in want]
    replicas: set[str] = set()
    with ThreadPoolExecutor(4) as pool:
        for _ in range(8):  # concurrent requests: each of the two replicas gets some (Ray draws two, takes the idler)
            got = list(pool.map(lambda b: ray.post(path, json=b, headers=AUTH), bodies * 2))
            for r, w in zip(got, want * 2):
                assert r.status_code == 200, r.text
                assert same(r.json()) == same(w.json()), "the same greedy answer as the plain server"
                assert r.headers["server-timing"].startswith("queue;dur=")
                replicas.add(r.headers["x-celeris-replica"])
            if len(replicas) == 2:
                break
    assert len(replicas) == 2, f"only {replicas} answered"


def test_errors_models_stream_and_metrics_as_the_plain_server(both):
    plain, ray = both
    for method, path, kwargs in [
        ("POST", "/v1/completions", {"content": b'{"prompt": '}),
        ("POST", "/v1/fim/completions", {"json": {"prompt": "x", "max_tokens": "9"}}),
        ("POST", "/v1/completions", {"json": {"prompt": "x", "model": "gpt-4"}}),
        ("POST", "/v1/completions", {"json": {"prompt": "x", "n": 9}}),
        ("POST", "/v1/completions", {"content": b"x" * 70000}),
        ("GET", "/v1/completions", {}),
        ("GET", "/v1/nowhere", {}),
    ]:
        w, r = plain.request(method, path, **kwargs), ray.request(method, path, headers=AUTH, **kwargs)
        assert (r.status_code, r.json()) == (w.status_code, w.json()), path
    w, r = plain.get("/v1/models").json(), ray.get("/v1/models", headers=AUTH).json()
    assert [{**m, "created": 0} for m in r["data"]] == [{**m, "created": 0} for m in w["data"]]

    def stream(client, headers=None) -> list:
        with client.stream("POST", "/v1/fim/completions", json={**PLACE, "stream": True}, headers=headers) as s:
            assert s.status_code == 200 and s.headers["content-type"].startswith("text/event-stream")
            return [e if e == "[DONE]" else (e["object"], e["choices"]) for e in sse_events(s.iter_lines())]

    assert stream(ray, AUTH) == stream(plain)
    m = ray.get("/metrics", headers=AUTH)
    assert m.status_code == 200 and "\nceleris_model_ready 1.0\n" in m.text, "the answering replica's metrics"


def test_api_key_and_health(both):
    _, ray = both
    for headers in ({}, {"Authorization": "Bearer wrong-key-0123456789"}):
        r = ray.post("/v1/completions", json=PLACE, headers=headers)
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
        assert ray.get("/metrics", headers=headers).status_code == 401
    h = ray.get("/health")
    assert h.status_code == 200 and h.json()["model"] == "celeris-default", "health answers probes without the key"


def test_a_burst_past_the_replicas_queues_gets_their_429(both, hold):
    """Both replicas' workers held, their queues (4 each) fill and the rest of a burst is refused with the
    replica's own 429 (not Ray's), however fast anything runs; released, the waiting ones are answered."""
    _, ray = both

    def post(prompt: str) -> httpx.Response:
        body = {**PLACE, "prompt": prompt, "max_tokens": 8}
        return ray.post("/v1/completions", json=body, headers=AUTH, timeout=300)

    pool = ThreadPoolExecutor(32)
    held: dict[int, str] = {}  # replica pid -> the token of the request its worker holds
    holds = []
    try:
        # One held request per replica: Ray sends each to the replica with fewer ongoing requests (of two
        # drawn), so the second goes to the other one; one that waits behind the first is sent again.
        for _ in range(6):
            token = hold.token()
            holds.append(pool.submit(post, hold.prompt(token)))
            pid = hold.wait("arrived", token)
            if pid not in held:
                assert hold.wait("held", token) == pid
                held[pid] = token
            if len(held) == 2:
                break
        assert len(held) == 2, f"the held requests all went to one replica: {held}"
        room = 2 * 4 - (len(holds) - 2)  # the queues' places left (an extra hold waits in one)
        burst = [pool.submit(post, PLACE["prompt"]) for _ in range(20)]
        end = time.monotonic() + 120
        while sum(f.done() for f in burst) < 20 - room:
            assert time.monotonic() < end, f"only {sum(f.done() for f in burst)} of 20 answered while held"
            time.sleep(0.05)
        time.sleep(0.5)  # (one more answer now would be one the queues should have held)
        refused = [f.result() for f in burst if f.done()]
    finally:
        hold.release()
        pool.shutdown()  # (all answered once released)
    got = [f.result() for f in burst]
    print("a burst of 20 behind two held replicas:", sorted(r.status_code for r in got))
    assert len(refused) == 20 - room and all(r.status_code == 429 for r in refused), [r.text for r in refused]
    assert all(r.json()["error"]["code"] == "queue_full" for r in refused), "the replica's own 429, not Ray's"
    assert all(r.headers["retry-after"] == "1" for r in refused)
    assert sorted(r.status_code for r in got) == [200] * room + [429] * (20 - room), "the waiting ones answered"
    assert all(f.result().status_code == 200 for f in holds)
