"""``celeris-complete serve``: the engine behind HTTP (Starlette on uvicorn).

Endpoints: ``POST /v1/fim/completions`` and ``POST /v1/completions`` (see serve_api.py for the
fields), ``GET /v1/models``, ``GET /health`` (200 only once the model is loaded: it loads in the
background while the server already answers) and ``GET /metrics`` (Prometheus).  Every response
carries ``Server-Timing``.  Requests wait in a bounded queue for the one model worker
(serve_queue.py), which decodes them in one batch (serve_batch.py, ``--batch``: one forward pass per
refinement step for all of them) or one at a time; a full queue is answered 429.

Security: loopback by default; any other address needs an API key (a bearer token from an
environment variable or a file, compared in constant time, never logged or echoed).  Bodies and
deadlines are capped.  Generated text is only ever returned, never executed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .config import ENV_PREFIX, Settings
from .errors import CelerisError
from .serve_api import (
    ApiError,
    CompletionRequest,
    choice,
    chunk_body,
    chunk_choice,
    cut_at_stop,
    new_id,
    parse_request,
    response_body,
    server_timing,
)
from .serve_batch import BatchScheduler
from .serve_metrics import CONTENT_TYPE_LATEST, Metrics
from .serve_queue import DeadlineExceeded, Job, JobResult, QueueFull, Scheduler

log = logging.getLogger("celeris.serve")

ENDPOINTS = ("/v1/fim/completions", "/v1/completions", "/v1/models", "/health", "/metrics")
OPEN_PATHS = ("/health",)  # answered without the API key (load balancers' probes)
MIN_KEY_CHARS = 16


@dataclass(frozen=True)
class ServeOptions:
    max_queue: int = 64  # requests waiting for the model (besides the one it runs); more get 429
    max_body_bytes: int = 1 << 20
    max_deadline_ms: float = 10_000.0  # also the deadline of a request that gives none
    max_n: int = 8
    # Continuous batching of the requests' canvases (serve_batch.py), or one at a time; None: batching
    # unless the model runs int8 on the CPU, where one at a time measured as fast or faster (README).
    batch: bool | None = None
    max_batch: int = 16  # canvases in one forward pass (a request with n choices has n)
    model_name: str | None = None
    api_key: str | None = field(default=None, repr=False)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def api_key_from(
    host: str, env_name: str | None, key_file: Path | None, environ: Mapping[str, str] = os.environ
) -> str | None:
    """The API key the server requires, or None (loopback only); CelerisError when it cannot be had."""
    if env_name and key_file:
        raise CelerisError("give the API key one way: --api-key-env or --api-key-file")
    key = None
    if env_name and env_name.upper().startswith(ENV_PREFIX):
        raise CelerisError(f"--api-key-env {env_name}: name a variable outside {ENV_PREFIX}* (those hold settings)")
    if env_name:
        key = environ.get(env_name, "").strip()
        if not key:
            raise CelerisError(f"--api-key-env {env_name}: that environment variable is not set or empty")
    elif key_file:
        try:
            key = key_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise CelerisError(f"--api-key-file {key_file}: cannot be read ({exc})") from None
        if not key:
            raise CelerisError(f"--api-key-file {key_file}: the file is empty")
        if key_file.stat().st_mode & 0o077:
            log.warning("%s can be read by other users; chmod 600 it", key_file)
    if key is not None and len(key) < MIN_KEY_CHARS:
        raise CelerisError(f"the API key must have at least {MIN_KEY_CHARS} characters")
    if key is None and not is_loopback(host):
        raise CelerisError(f"binding {host} (not loopback) needs an API key: --api-key-env NAME or --api-key-file PATH")
    return key


def model_id_for(settings: Settings) -> str:
    name = Path(settings.model).expanduser().name if settings.model else "default"
    return f"celeris-{name}"


class CompletionServer:
    """The server's state: settings, the engine once loaded, the queue and the metrics."""

    def __init__(self, settings: Settings, options: ServeOptions) -> None:
        self.settings = settings
        self.options = options
        self.metrics = Metrics()
        hooks = dict(on_batch=self.metrics.batch.observe, on_cancel=self.metrics.cancelled.inc)
        if options.batch is not False:
            self.scheduler: Scheduler = BatchScheduler(
                options.max_queue, options.max_batch, **hooks, auto=options.batch is None
            )
        else:
            self.scheduler = Scheduler(options.max_queue, **hooks)
        self.metrics.queue_depth.set_function(self.scheduler.depth)
        self.engine = None
        self.load_error: str | None = None
        self.ready = threading.Event()
        self.model_id = options.model_name or model_id_for(settings)
        self.created = int(time.time())

    def load(self) -> None:
        """Load the model (in a background thread); /health turns 200 when done."""
        t0 = time.perf_counter()
        try:
            from .engine import Engine

            engine = Engine(self.settings, trace_in_background=True)
        except CelerisError as exc:
            self.load_error = str(exc)
        except Exception as exc:  # a broken model directory must not leave the server silently loading
            log.exception("the model failed to load")
            self.load_error = f"{type(exc).__name__}: {exc}"
        else:
            self.engine = engine
            self.scheduler.start(engine)
            self.metrics.ready.set(1)
            self.ready.set()
            log.info("model %s loaded in %.1f s", engine.path, time.perf_counter() - t0)
            return
        log.error("the model failed to load: %s", self.load_error)

    def not_ready(self) -> ApiError:
        if self.load_error:
            return ApiError(503, f"the model failed to load: {self.load_error}", "server_error", code="model_error")
        return ApiError(
            503, "the model is still loading", "server_error", code="model_not_ready", headers={"Retry-After": "1"}
        )


# ----------------------------------------------------------------------------------------------
# Middleware: API key, body size, Server-Timing on every response, request metrics.


def error_response(error: ApiError, extra_headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers={**error.headers, **(extra_headers or {})})


class Guard:
    def __init__(self, app, server: CompletionServer) -> None:
        self.app = app
        self.server = server
        self.key = server.options.api_key.encode("utf-8") if server.options.api_key else None

    def refuse(self, scope) -> ApiError | None:
        headers = dict(scope.get("headers") or [])
        if self.key is not None and scope["path"] not in OPEN_PATHS:
            given = headers.get(b"authorization", b"")
            scheme, _, token = given.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(token.strip(), self.key):
                return ApiError(
                    401,
                    "missing or invalid API key (send Authorization: Bearer KEY)",
                    code="invalid_api_key",
                    headers={"WWW-Authenticate": "Bearer"},
                )
        length = headers.get(b"content-length")
        if length is not None:
            limit = self.server.options.max_body_bytes
            if not length.isdigit():
                return ApiError(400, "bad Content-Length")
            if int(length) > limit:
                return ApiError(413, f"the request body is larger than {limit} bytes", code="request_too_large")
        return None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        scope["celeris.t0"] = t0
        endpoint = scope["path"] if scope["path"] in ENDPOINTS else "other"
        status = 500

        async def send_timed(message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers") or [])
                if not any(k.lower() == b"server-timing" for k, _ in headers):
                    total = server_timing({"total": (time.perf_counter() - t0) * 1e3})
                    headers.append((b"server-timing", total.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            problem = self.refuse(scope)
            if problem is not None:
                await error_response(problem)(scope, receive, send_timed)
            else:
                await self.app(scope, receive, send_timed)
        finally:
            self.server.metrics.requests.labels(endpoint, str(status)).inc()
            self.server.metrics.latency.labels(endpoint).observe(time.perf_counter() - t0)


# ----------------------------------------------------------------------------------------------
# Endpoints.


class ClientGone(Exception):
    pass


async def read_json(request: Request, limit: int) -> object:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, f"the request body is larger than {limit} bytes", code="request_too_large")
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ApiError(400, f"the request body is not valid JSON ({exc})") from None


async def wait_disconnect(request: Request) -> None:
    """Returns when the client closes the connection (the body has been read already)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def next_event(request: Request, events: asyncio.Queue, job: Job) -> tuple:
    """The worker's next event for ``job``; a client that leaves first cancels the job."""
    get = asyncio.ensure_future(events.get())
    gone = asyncio.ensure_future(wait_disconnect(request))
    try:
        done, _ = await asyncio.wait({get, gone}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # this handler was cancelled (shutdown): so is the job
        job.cancel.set()
        get.cancel()
        gone.cancel()
        raise
    if get in done:
        gone.cancel()
        return get.result()
    get.cancel()
    job.cancel.set()
    raise ClientGone


def job_error(exc: BaseException) -> ApiError:
    from .diffusion import Cancelled

    if isinstance(exc, DeadlineExceeded):
        return ApiError(504, "the deadline passed while the request waited", "timeout_error", code="deadline_exceeded")
    if isinstance(exc, Cancelled):
        return ApiError(503, "the request was cancelled (server shutting down)", "server_error", code="cancelled")
    return ApiError(500, "the completion failed; see the server's log", "server_error", code="internal_error")


@dataclass
class Answer:
    choices: list[tuple[str, str]]  # (text, finish_reason)
    usage: dict
    phases: dict[str, float]


def answer(server: CompletionServer, req: CompletionRequest, job: Job, result: JobResult, t0: float) -> Answer:
    engine = server.engine
    t_post = time.perf_counter()
    choices = []
    for c in result.completions:
        text, stopped = cut_at_stop(c.text, req.stop)
        cap = job.max_tokens or (engine.settings.canvas_line if c.mode == "line" else engine.settings.canvas_block)
        cap = min(cap, int(engine.max_canvas))
        choices.append((text, "length" if not stopped and c.tokens >= cap else "stop"))
    cs = result.completions

    def total(*keys: str) -> float:
        return sum(c.timings_ms.get(k, 0.0) for c in cs for k in keys)

    server_post = (time.perf_counter() - t_post) * 1e3
    phases = {
        "queue": result.queue_ms + total("queue"),
        "tokenize": total("tokenize", "draft"),
        "encode": total("context_encode"),
        "refine": total("refine"),
        "post": total("detokenize", "postprocess") + server_post,
        "total": (time.perf_counter() - t0) * 1e3,
    }
    completion_tokens = sum(c.tokens for c in cs)
    prompt_tokens = cs[0].context_tokens if cs else 0
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    server.metrics.completed(phases, cs)
    return Answer(choices, usage, {k: round(v, 3) for k, v in phases.items()})


def client_id(request: Request, req: CompletionRequest) -> str:
    """Whose context cache a request uses: its ``user`` field, else its connection."""
    if req.user:
        return "user:" + req.user
    peer = request.scope.get("client")
    return f"peer:{peer[0]}:{peer[1]}" if peer else "peer:?"


def sse(data: dict | str) -> str:
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"


SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


async def completions(request: Request, fim: bool) -> Response:
    server: CompletionServer = request.app.state.server
    opts = server.options
    t0 = request.scope.get("celeris.t0", time.perf_counter())
    req = parse_request(await read_json(request, opts.max_body_bytes))
    if req.model is not None and req.model != server.model_id:
        raise ApiError(
            404, f"the model '{req.model}' does not exist here; this server serves '{server.model_id}'",
            param="model", code="model_not_found",
        )  # fmt: skip
    if req.n > opts.max_n:
        raise ApiError(400, f"n: at most {opts.max_n}", param="n")
    deadline_ms = req.deadline_ms if req.deadline_ms is not None else opts.max_deadline_ms
    if deadline_ms > opts.max_deadline_ms:
        raise ApiError(400, f"deadline_ms: at most {opts.max_deadline_ms:g}", param="deadline_ms")
    if not server.ready.is_set():
        raise server.not_ready()
    engine = server.engine
    loop = asyncio.get_running_loop()
    events: asyncio.Queue = asyncio.Queue()

    def emit(event: tuple) -> None:
        loop.call_soon_threadsafe(events.put_nowait, event)

    job = Job(
        prefix=req.prompt,
        suffix=req.suffix or "",
        emit=emit,
        n=req.n,
        mode=req.mode,
        max_tokens=min(req.max_tokens, int(engine.max_canvas)) if req.max_tokens else None,
        steps=req.steps,
        temperature=req.temperature,
        seed=req.seed,
        deadline=t0 + deadline_ms / 1e3,
        stream_steps=req.stream_steps,
        client=client_id(request, req),
        snippets=tuple(req.snippets),
        file_start=req.file_start,
        file_end=req.file_end,
    )
    try:
        server.scheduler.submit(job)
    except QueueFull:
        raise ApiError(
            429, f"the server is busy ({opts.max_queue} requests waiting); retry shortly",
            "rate_limit_error", code="queue_full", headers={"Retry-After": "1"},
        ) from None  # fmt: skip
    try:
        event = await next_event(request, events, job)
    except ClientGone:
        return Response(status_code=499)
    if event[0] == "error":
        raise job_error(event[1])
    rid = new_id("fim" if fim else "cmpl")
    if event[0] == "done":
        done = answer(server, req, job, event[1], t0)
        headers = {"Server-Timing": server_timing(done.phases)}
        if not req.stream:
            choices = [choice(i, text, finish, fim) for i, (text, finish) in enumerate(done.choices)]
            body = response_body(rid, server.model_id, choices, done.usage, fim, done.phases)
            return JSONResponse(body, headers=headers)
        return StreamingResponse(
            stream_answer(rid, server.model_id, done, fim), media_type="text/event-stream",
            headers={**SSE_HEADERS, **headers},
        )  # fmt: skip
    # stream_steps: the first step is here; the rest follow as they come.
    started = job.started or time.perf_counter()
    headers = {"Server-Timing": server_timing({"queue": (started - job.arrived) * 1e3,
                                               "total": (time.perf_counter() - t0) * 1e3})}  # fmt: skip
    return StreamingResponse(
        stream_steps(server, req, job, events, event, rid, fim, t0), media_type="text/event-stream",
        headers={**SSE_HEADERS, **headers},
    )  # fmt: skip


async def stream_answer(rid: str, model: str, done: Answer, fim: bool):
    last = len(done.choices) - 1
    for i, (text, finish) in enumerate(done.choices):
        yield sse(chunk_body(rid, model, [chunk_choice(i, text, None, fim)], fim))
        extra = {"usage": done.usage, "timings": done.phases} if i == last else {}
        yield sse(chunk_body(rid, model, [chunk_choice(i, "", finish, fim)], fim, **extra))
    yield sse("[DONE]")


async def stream_steps(server, req, job: Job, events: asyncio.Queue, event: tuple, rid: str, fim: bool, t0: float):
    """Every refinement step's whole canvas (``canvas``, with ``step``; ``text`` stays empty so that
    plain clients concatenate only the final text), then the answer as in ``stream_answer``."""
    finished = False
    try:
        while True:
            if event[0] == "step":
                _, i, step, canvas = event
                item = {**chunk_choice(i, "", None, fim), "canvas": canvas, "step": step + 1}
                yield sse(chunk_body(rid, server.model_id, [item], fim))
            elif event[0] == "done":
                finished = True
                async for part in stream_answer(rid, server.model_id, answer(server, req, job, event[1], t0), fim):
                    yield part
                return
            else:
                finished = True
                yield sse(job_error(event[1]).body())
                yield sse("[DONE]")
                return
            event = await events.get()
    finally:
        if not finished:
            job.cancel.set()  # the client left mid-stream: the worker stops at its next step


async def fim_completions(request: Request) -> Response:
    return await completions(request, fim=True)


async def legacy_completions(request: Request) -> Response:
    return await completions(request, fim=False)


async def models(request: Request) -> Response:
    server: CompletionServer = request.app.state.server
    item = {"id": server.model_id, "object": "model", "created": server.created, "owned_by": "celeris-complete"}
    return JSONResponse({"object": "list", "data": [item]})


async def health(request: Request) -> Response:
    server: CompletionServer = request.app.state.server
    if server.ready.is_set():
        engine = server.engine
        return JSONResponse(
            {"status": "ok", "model": server.model_id, "backend": engine.backend, "quant": engine.quant,
             "device": engine.device, "queue": server.scheduler.depth(),
             "batching": getattr(server.scheduler, "batch", None) is not None}
        )  # fmt: skip
    if server.load_error:
        return JSONResponse({"status": "error", "error": server.load_error}, status_code=503)
    return JSONResponse({"status": "loading"}, status_code=503, headers={"Retry-After": "1"})


async def metrics(request: Request) -> Response:
    server: CompletionServer = request.app.state.server
    return Response(server.metrics.render(), media_type=CONTENT_TYPE_LATEST)


async def api_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, ApiError):
        return error_response(exc)
    log.exception("unexpected error", exc_info=exc)
    return error_response(ApiError(500, "internal error; see the server's log", "server_error", code="internal_error"))


async def not_found(request: Request, exc: Exception) -> Response:
    return error_response(ApiError(404, f"no endpoint {request.method} {request.url.path}", code="not_found"))


async def wrong_method(request: Request, exc: Exception) -> Response:
    return error_response(ApiError(405, f"{request.method} is not allowed on {request.url.path}"))


def make_app(server: CompletionServer, load: bool = True) -> Guard:
    @contextlib.asynccontextmanager
    async def lifespan(app):
        if load:
            threading.Thread(target=server.load, name="celeris-load", daemon=True).start()
        yield
        server.scheduler.close()

    app = Starlette(
        routes=[
            Route("/v1/fim/completions", fim_completions, methods=["POST"]),
            Route("/v1/completions", legacy_completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
        ],
        exception_handlers={ApiError: api_error, 404: not_found, 405: wrong_method, Exception: api_error},
        lifespan=lifespan,
    )
    app.state.server = server
    return Guard(app, server)


LISTENING = "listening on "  # the line a parent that started the server reads its address from


def url_of(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def announce_listening(url: str) -> None:
    """Say on stdout, whatever the log level, that the server accepts connections at ``url`` (with the port
    it got: ``--port 0`` lets the system pick a free one).  One line, flushed: ``listening on URL``."""
    print(LISTENING + url, flush=True)


def run(settings: Settings, options: ServeOptions, host: str, port: int, log_level: str = "info") -> None:
    """Serve until interrupted.  ``port`` 0: a free port the system picks, bound here (no other process can
    take it between the choice and the bind); the line ``listening on URL`` names it once it listens."""
    import sys

    import uvicorn
    from uvicorn.config import STARTUP_FAILURE

    server = CompletionServer(settings, options)
    app = make_app(server)
    auth = "API key required" if options.api_key else "no API key (loopback only)"

    class Reporting(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets)
            if self.started and not self.should_exit:
                bound = self.servers[0].sockets[0].getsockname()[1]  # the port got, also for port 0
                url = url_of(host, bound)
                log.info("serving %s on %s (%s); the model loads in the background", server.model_id, url, auth)
                announce_listening(url)

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        server_header=False,
        limit_concurrency=4 * options.max_queue + 16,
        timeout_graceful_shutdown=5,
    )
    reporting = Reporting(config)
    reporting.run()
    if not reporting.started:  # as uvicorn.run: the address could not be bound, say
        sys.exit(STARTUP_FAILURE)
