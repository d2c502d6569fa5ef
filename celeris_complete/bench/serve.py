"""`celeris-complete bench serve`: throughput and latency of the HTTP server at several numbers of
concurrent clients (each sends its next request as soon as the last is answered), on places in real
source files (``typing``: each client types into one place after another, a few characters per
request, as its ``user``, so that the server can extend the client's cached context).  Starts its own
server on a free loopback port unless given ``url``.

Client-observed latency percentiles per level, with the server's own split from ``Server-Timing``
(time queued for the model, and the rest) and what HTTP adds (client-observed minus the server's
own total).
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from celeris_complete.bench.selftest import percentile, sample_cursors
from celeris_complete.engine import InfillRequest

WINDOW = 3000  # characters sent on each side of the cursor (the engine's context budget uses less)


def places(n: int, seed: int = 0) -> list[dict]:
    out = []
    for text, at, mode in sample_cursors(n, seed=seed):
        out.append({"prompt": text[max(0, at - WINDOW) : at], "suffix": text[at : at + WINDOW], "mode": mode})
    return out


def parse_timing(header: str) -> dict[str, float]:
    out = {}
    for part in header.split(","):
        name, _, dur = part.strip().partition(";dur=")
        if dur:
            out[name] = float(dur)
    return out


TYPED = 240  # typing: characters of a place's prefix typed, TYPE_STEP at a time, before the next place
TYPE_STEP = 4


def typed_body(bodies: list[dict], client: int, i: int) -> dict:
    """A client typing: its ``i``-th request is its place's prefix grown by ``TYPE_STEP`` characters since
    the last (the server sees one context extended again and again), sent with the client's ``user``."""
    per_place = TYPED // TYPE_STEP
    body = bodies[(client * 7919 + i // per_place) % len(bodies)]
    prompt = body["prompt"]
    cut = max(0, len(prompt) - TYPED) + (i % per_place + 1) * TYPE_STEP
    return {**body, "prompt": prompt[:cut], "user": f"client-{client}"}


async def level(
    url: str, clients: int, seconds: float, bodies: list[dict], headers: dict, typing: bool = False
) -> dict:
    latencies: list[float] = []
    queued: list[float] = []
    served: list[float] = []
    overhead: list[float] = []  # client-observed minus the server's own total: HTTP and the client
    rejected = late = errors = 0
    end = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits, headers=headers) as http:

        async def client(k: int) -> None:
            nonlocal rejected, late, errors
            i = 0 if typing else k * 7919
            while time.perf_counter() < end:
                body = typed_body(bodies, k, i) if typing else bodies[i % len(bodies)]
                i += 1
                t0 = time.perf_counter()
                try:
                    r = await http.post("/v1/fim/completions", json=body)
                except httpx.HTTPError:
                    errors += 1
                    continue
                took = (time.perf_counter() - t0) * 1e3
                if r.status_code == 429:
                    rejected += 1
                    await asyncio.sleep(0.05)
                    continue
                if r.status_code == 504:
                    late += 1  # its deadline passed while it waited
                    continue
                if r.status_code != 200:
                    errors += 1
                    continue
                latencies.append(took)
                timing = parse_timing(r.headers.get("server-timing", ""))
                queued.append(timing.get("queue", 0.0))
                served.append(timing.get("total", 0.0) - timing.get("queue", 0.0))
                overhead.append(took - timing.get("total", 0.0))

        t_start = time.perf_counter()
        await asyncio.gather(*(client(k) for k in range(clients)))
        wall = time.perf_counter() - t_start
    return {
        "clients": clients,
        "requests": len(latencies),
        "seconds": round(wall, 1),
        "throughput_rps": round(len(latencies) / wall, 2),
        "p50_ms": round(percentile(latencies, 50), 1),
        "p95_ms": round(percentile(latencies, 95), 1),
        "p99_ms": round(percentile(latencies, 99), 1),
        "server_queue_p50_ms": round(percentile(queued, 50), 1),
        "server_work_p50_ms": round(percentile(served, 50), 1),
        "http_overhead_p50_ms": round(percentile(overhead, 50), 2),
        "rejected_429": rejected,
        "deadline_504": late,
        "errors": errors,
    }


def engine_alone(
    model: str | None, bodies: list[dict], requests: int, typing: bool, threads: int | None, quant: str | None,
    url: str | None = None, headers: dict | None = None,
) -> dict:
    """The engine's own latency, in this process, on the requests one client sends: the reference for
    what the server and loopback add.  With ``url``, each request also goes to the server, in turn with
    the engine here (alternating which goes first), and the paired differences are reported: the same
    request, the same cache state on both sides, the machine's drift shared."""
    from celeris_complete.config import load_settings
    from celeris_complete.engine import Engine

    overrides = {k: v for k, v in (("model", model), ("threads", threads), ("quant", quant)) if v is not None}
    engine = Engine(load_settings(overrides=overrides))
    here, there = [], []

    def local(body: dict) -> float:
        t0 = time.perf_counter()
        engine.complete(
            InfillRequest(body["prompt"], body["suffix"], mode=body["mode"], file_start=True, file_end=True)
        )
        return (time.perf_counter() - t0) * 1e3

    async def pairs() -> None:
        async with httpx.AsyncClient(base_url=url or "http://unused", timeout=120, headers=headers or {}) as http:

            async def remote(body: dict) -> float:
                t0 = time.perf_counter()
                r = await http.post("/v1/fim/completions", json=body)
                r.raise_for_status()
                return (time.perf_counter() - t0) * 1e3

            for i in range(requests + 3):  # the first three warm both up
                body = typed_body(bodies, 0, i) if typing else bodies[i % len(bodies)]
                if url is None:
                    pair = (local(body), None)
                elif i % 2:
                    pair = (local(body), await remote(body))
                else:
                    far = await remote(body)
                    pair = (local(body), far)
                if i >= 3:
                    here.append(pair[0])
                    there.append(pair[1])

    asyncio.run(pairs())
    out = {"requests": requests, "p50_ms": round(percentile(here, 50), 1)}
    if url is not None:
        out["through_server_p50_ms"] = round(percentile(there, 50), 1)
        out["loopback_adds_p50_ms"] = round(percentile([b - a for a, b in zip(here, there)], 50), 1)
    return out


LISTENING = re.compile(r"^listening on (http://\S+)$", re.MULTILINE)  # serve.announce_listening's line


def wait_listening(proc: subprocess.Popen, log: Path, timeout: float = 300.0) -> str:
    """The URL from the line ``listening on URL`` that a server started with ``--port 0`` writes to
    ``log`` (its stdout) once it accepts connections; RuntimeError when it exits or ``timeout`` passes."""
    end = time.monotonic() + timeout
    while True:
        found = LISTENING.search(log.read_text(encoding="utf-8", errors="replace")) if log.exists() else None
        if found:
            return found.group(1)
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited ({proc.returncode}) before listening: {log.read_text()[-2000:]}")
        if time.monotonic() > end:
            raise RuntimeError(f"the server did not say where it listens in {timeout:g} s: {log.read_text()[-2000:]}")
        time.sleep(0.05)


def start_server(
    model: str | None, max_queue: int, log: Path, threads: int | None, batch: bool | None = None,
    quant: str | None = None,
) -> tuple[subprocess.Popen, str]:
    """``batch`` None: the server's own default.  The server binds a free port itself (``--port 0``) and
    names it on its stdout (``log``): no port chosen here that another process could take first."""
    args = [sys.executable, "-m", "celeris_complete.cli", "serve", "--port", "0", "--max-queue", str(max_queue)]
    args += [] if batch is None else ["--batch" if batch else "--no-batch"]
    args += ["--log-level", "warning"] + (["--model", model] if model else [])
    args += ["--threads", str(threads)] if threads is not None else []
    args += ["--quant", quant] if quant else []
    proc = subprocess.Popen(args, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    end = time.monotonic() + 300
    try:
        url = wait_listening(proc, log, 300)
        while time.monotonic() < end:
            if proc.poll() is not None:
                raise RuntimeError(f"the server exited: {log.read_text()[-2000:]}")
            try:
                if httpx.get(url + "/health", timeout=5).status_code == 200:
                    return proc, url
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError("the server was not ready in 300 s")
    except BaseException:
        proc.terminate()
        proc.wait(30)
        raise


def run(
    levels: list[int], seconds: float, url: str | None = None, model: str | None = None, api_key: str | None = None,
    requests: int = 200, progress=None, threads: int | None = None, batch: bool | None = None, quant: str | None = None,
    typing: bool = False,
) -> dict:  # fmt: skip
    """``batch``: whether the server this starts batches requests, None its default (a running server says
    so in /health).  The loopback reference (``engine_alone``) is ``Engine.complete``, which a server
    serving one at a time runs too; a batching server plans with one draft candidate and no earlier
    answers, so there the difference also holds what that changes."""
    bodies = places(requests)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    proc = None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            if url is None:
                proc, url = start_server(model, max(64, max(levels)), Path(tmp) / "server.log", threads, batch, quant)
            health = httpx.get(url + "/health", timeout=10).json()
            asyncio.run(level(url, 1, 2.0, bodies, headers))  # warm-up: traced graphs, caches
            rows = []
            for clients in levels:
                if progress:
                    progress(f"{clients} concurrent client(s) for {seconds:g} s")
                rows.append(asyncio.run(level(url, clients, seconds, bodies, headers, typing)))
            alone = None
            if 1 in levels and proc is not None:  # a server of our own: the same engine, here
                if progress:
                    progress("one client's requests to the server and to the engine here, in turn")
                alone = engine_alone(model, bodies, 300, typing, threads, quant, url, headers)
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(30)
    return {"server": health, "batching": health.get("batching", False), "typing": typing,
            "seconds_per_level": seconds, "rows": rows, "engine_alone": alone}  # fmt: skip


def table(result: dict) -> str:
    head = (
        "| clients | requests | throughput (req/s) | p50 ms | p95 ms | p99 ms | server queue p50 ms "
        "| server work p50 ms | HTTP overhead p50 ms | 429 | 504 | errors |"
    )
    lines = [head, "|" + " --- |" * 12]
    for r in result["rows"]:
        lines.append(
            f"| {r['clients']} | {r['requests']} | {r['throughput_rps']} | {r['p50_ms']} | {r['p95_ms']} "
            f"| {r['p99_ms']} | {r['server_queue_p50_ms']} | {r['server_work_p50_ms']} | {r['http_overhead_p50_ms']} "
            f"| {r['rejected_429']} | {r['deadline_504']} "
            f"| {r['errors']} |"
        )
    alone = result.get("engine_alone")
    if alone:
        lines.append(
            f"\nOne client's requests, each to the server and to the engine in this process in turn "
            f"({alone['requests']} pairs): p50 {alone['through_server_p50_ms']} ms through the server, "
            f"{alone['p50_ms']} ms the engine alone; the server and loopback add {alone['loopback_adds_p50_ms']} ms "
            "(the p50 of the paired differences)."
        )
    return "\n".join(lines)
