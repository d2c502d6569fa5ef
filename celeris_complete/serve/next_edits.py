"""``POST /v1/edit/completions``: the next edit, in the shape of Inception's Mercury Edit API: a chat
request whose last user message is a next-edit prompt (``edits/prompt.py``: the current file with its
editable region and cursor, the recent edits as unified diffs); the answer is the editable region
rewritten, in a fenced block, as a chat completion (``choices[0].message.content``).  Here the edit is
propagated from the latest diff (``edits/propagate.py``) and applied where it falls in the region; the
region comes back unchanged when there is no edit to make there."""

from __future__ import annotations

import asyncio
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from celeris_complete.edits.prompt import EditPrompt, fenced, history_of, read
from celeris_complete.edits.propagate import suggest
from celeris_complete.serve.api import ApiError, chat_body, new_id, server_timing
from celeris_complete.serve.routes import read_json
from celeris_complete.serve.server import CompletionServer


def prompt_of(body: object) -> tuple[str | None, EditPrompt]:
    """(model, the prompt) from a request body; ApiError naming the field at fault."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages: a non-empty list of messages", param="messages")
    last = messages[-1]
    content = last.get("content") if isinstance(last, dict) else None
    if isinstance(content, list):  # content parts: their text, joined
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    if not isinstance(content, str) or not isinstance(last, dict) or last.get("role") != "user":
        raise ApiError(400, "messages: the last message must be the user's, its content a string", param="messages")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise ApiError(400, "model: a string", param="model")
    try:
        return model, read(content)
    except ValueError as exc:
        raise ApiError(400, f"messages: not a next-edit prompt: {exc}", param="messages") from None


def rewrite_region(prompt: EditPrompt) -> tuple[str, str | None]:
    """(the editable region with the next edit made where it falls inside it, the edit's kind or None)."""
    found = history_of(prompt)
    if found is None:
        return prompt.region, None
    lines, history = found
    first_line = prompt.before.count("\n")
    region_lines = prompt.region.count("\n") + (0 if prompt.region.endswith("\n") else 1)
    cursor = first_line + prompt.region[: prompt.cursor or 0].count("\n")
    edit = suggest(lines, history, cursor)
    if edit is None or edit.first < first_line or edit.last >= first_line + region_lines:
        return prompt.region, None
    mine = prompt.region.splitlines(keepends=True)
    lo, hi = edit.first - first_line, edit.last - first_line + 1
    new = edit.new.splitlines(keepends=True)
    if hi == len(mine) and not mine[-1].endswith("\n"):  # (the region's last line had no break)
        new[-1] = new[-1].removesuffix("\n")
    return "".join(mine[:lo] + new + mine[hi:]), edit.kind


async def edit_completions(request: Request) -> Response:
    server: CompletionServer = request.app.state.server
    t0 = request.scope.get("celeris.t0", time.perf_counter())
    model, prompt = prompt_of(await read_json(request, server.options.max_body_bytes))
    if model is not None and model != server.model_id:
        raise ApiError(404, f"the model '{model}' does not exist here; this server serves '{server.model_id}'",
                       param="model", code="model_not_found")  # fmt: skip
    t1 = time.perf_counter()
    region, kind = await asyncio.to_thread(rewrite_region, prompt)
    t2 = time.perf_counter()
    timings = {"parse": (t1 - t0) * 1e3, "edit": (t2 - t1) * 1e3}
    choice = {"index": 0, "message": {"role": "assistant", "content": fenced(region)}, "finish_reason": "stop",
              "edit_kind": kind}  # fmt: skip
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    engine = server.engine if server.ready.is_set() else None
    if engine is not None:  # counted in the model's tokens once it is loaded
        p, c = len(engine.tok.encode(prompt.text + prompt.diffs)), len(engine.tok.encode(region))
        usage = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
    body = chat_body(new_id("edit"), server.model_id, [choice], usage, timings)
    return JSONResponse(body, headers={"Server-Timing": server_timing({**timings, "total": (t2 - t0) * 1e3})})
