"""The HTTP routes: completions (whole or streamed step by step), models, health, metrics, and errors
in the OpenAI shape."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from celeris_complete.serve.access import (
    error_response,
)
from celeris_complete.serve.api import (
    ApiError,
    CompletionRequest,
    chat_body,
    chat_choice,
    chat_chunk,
    choice,
    chunk_body,
    chunk_choice,
    cut_at_stop,
    new_id,
    parse_chat_request,
    parse_request,
    response_body,
    server_timing,
)
from celeris_complete.serve.metrics import CONTENT_TYPE_LATEST
from celeris_complete.serve.scheduler import DeadlineExceeded, Job, JobResult, QueueFull
from celeris_complete.serve.server import CompletionServer

log = logging.getLogger("celeris.serve")


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
    from celeris_complete.model.diffusion import Cancelled

    if isinstance(exc, DeadlineExceeded):
        return ApiError(504, "the deadline passed while the request waited", "timeout_error", code="deadline_exceeded")
    if isinstance(exc, Cancelled):
        return ApiError(503, "the request was cancelled (server shutting down)", "server_error", code="cancelled")
    return ApiError(500, "the completion failed; see the server's log", "server_error", code="internal_error")


@dataclass
class Answer:
    # (text, finish_reason, confidence: the engine's calibrated probability that the text is right, or
    # None where the model ships no calibration or the answer is empty)
    choices: list[tuple[str, str, float | None]]
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
        choices.append((text, "length" if not stopped and c.tokens >= cap else "stop", c.confidence))
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


async def completions(request: Request, fim: bool, chat: bool = False) -> Response:
    server: CompletionServer = request.app.state.server
    opts = server.options
    t0 = request.scope.get("celeris.t0", time.perf_counter())
    body = await read_json(request, opts.max_body_bytes)
    req = parse_chat_request(body) if chat else parse_request(body)
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
        language=req.language or req.filename,
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
    rid = new_id("chatcmpl" if chat else "fim" if fim else "cmpl")
    if event[0] == "done":
        done = answer(server, req, job, event[1], t0)
        headers = {"Server-Timing": server_timing(done.phases)}
        if chat:
            return chat_response(rid, server.model_id, done, req, headers)
        if not req.stream:
            choices = [choice(i, text, finish, fim, p) for i, (text, finish, p) in enumerate(done.choices)]
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


def chat_response(rid: str, model: str, done: Answer, req: CompletionRequest, headers: dict) -> Response:
    """The answer in the chat completions shape: whole, or as a stream (the role, the text, the end, and
    the usage when the request's ``stream_options`` asks for it)."""
    if not req.stream:
        choices = [chat_choice(i, text, finish, p) for i, (text, finish, p) in enumerate(done.choices)]
        return JSONResponse(chat_body(rid, model, choices, done.usage, done.phases), headers=headers)

    async def stream():
        for i, (text, finish, p) in enumerate(done.choices):
            yield sse(chat_chunk(rid, model, i, {"role": "assistant", "content": ""}, None))
            yield sse(chat_chunk(rid, model, i, {"content": text}, None))
            yield sse(chat_chunk(rid, model, i, {}, finish, confidence=p))
        if req.include_usage:
            yield sse({**chat_chunk(rid, model, 0, {}, None, usage=done.usage, timings=done.phases), "choices": []})
        yield sse("[DONE]")

    return StreamingResponse(stream(), media_type="text/event-stream", headers={**SSE_HEADERS, **headers})


async def stream_answer(rid: str, model: str, done: Answer, fim: bool):
    last = len(done.choices) - 1
    for i, (text, finish, p) in enumerate(done.choices):
        yield sse(chunk_body(rid, model, [chunk_choice(i, text, None, fim)], fim))
        extra = {"usage": done.usage, "timings": done.phases} if i == last else {}
        yield sse(chunk_body(rid, model, [{**chunk_choice(i, "", finish, fim), "confidence": p}], fim, **extra))
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


async def chat_completions(request: Request) -> Response:
    return await completions(request, fim=False, chat=True)


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
