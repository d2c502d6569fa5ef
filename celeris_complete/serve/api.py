"""The HTTP API's request and response shapes (``celeris-complete serve``).

Requests follow the fill-in-the-middle endpoint (``POST /v1/fim/completions``: ``prompt`` before
the cursor, ``suffix`` after it, as Mistral's Codestral and Inception's Mercury take them),
OpenAI's legacy ``POST /v1/completions`` with ``suffix``, and OpenAI's chat completions
(``POST /v1/chat/completions``) with the code and a ``<FILL_HERE>`` marker in the last user message
(``backends/chat_prompt.py``); plus our own optional ``steps``, ``mode``, ``deadline_ms``,
``stream_steps``, ``snippets``, ``file_start``, ``file_end``, ``language`` and ``filename`` (what the
document is written in: an answer in a language other than Python is judged by its parser, and never
has a form only Python has).  Unknown fields
are ignored; a wrong type or value is an ``ApiError`` that the server answers with an OpenAI-style
error body.
"""

from __future__ import annotations

import time
import uuid
from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from celeris_complete.backends import chat_prompt

MAX_STOP = 4  # OpenAI's limit on stop sequences
MAX_SNIPPETS = 32


class ApiError(Exception):
    """An error the client gets as ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(
        self, status: int, message: str, type_: str = "invalid_request_error", param: str | None = None,
        code: str | None = None, headers: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type_, param, code
        self.headers = headers or {}

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class CompletionRequest(BaseModel):
    """The fields both endpoints share (types checked strictly: ``"5"`` is not a number)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    model: Optional[str] = None
    prompt: Union[str, list[str]] = ""
    suffix: Optional[str] = None
    max_tokens: Optional[int] = Field(None, ge=1)
    temperature: Optional[float] = Field(None, ge=0.0, le=2.0)
    top_p: Optional[float] = Field(None, gt=0.0, le=1.0)
    stop: Union[str, list[str], None] = None
    n: int = Field(1, ge=1)
    stream: bool = False
    include_usage: bool = False  # chat: stream_options.include_usage (a last chunk with the usage)
    seed: Optional[int] = Field(None, ge=0)
    random_seed: Optional[int] = Field(None, ge=0)  # Mistral's name for seed
    user: Optional[str] = Field(None, max_length=256)  # OpenAI's end-user id: here also whose contexts are cached
    # Ours.
    steps: Optional[int] = Field(None, ge=1, le=64)
    mode: Optional[Literal["auto", "line", "block"]] = None
    deadline_ms: Optional[float] = Field(None, gt=0)
    stream_steps: bool = False
    # Sent by our remote backend: text from other files for the context, and whether prompt/suffix
    # reach the file's start/end (the client cuts windows around the cursor).
    snippets: list[str] = Field(default_factory=list, max_length=MAX_SNIPPETS)
    file_start: bool = True
    file_end: bool = True
    # The document's language (an LSP id such as "go", or "typescriptreact") or its file's name ("x.go"):
    # answers are checked as the language server's are. Neither: Python's rules, as before.
    language: Optional[str] = Field(None, max_length=64)
    filename: Optional[str] = Field(None, max_length=1024)
    # OpenAI fields whose meaning we cannot honour: refused rather than silently ignored.
    echo: bool = False
    logprobs: Optional[int] = None
    best_of: Optional[int] = None

    @model_validator(mode="after")
    def _check(self) -> CompletionRequest:
        if isinstance(self.prompt, list):
            if len(self.prompt) != 1:
                raise ValueError("prompt: give one string (batches of prompts are not served)")
            self.prompt = self.prompt[0]
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        if self.stop is not None:
            if len(self.stop) > MAX_STOP:
                raise ValueError(f"stop: at most {MAX_STOP} sequences")
            self.stop = [s for s in self.stop if s]
        if self.seed is None:
            self.seed = self.random_seed
        return self

    def unsupported(self) -> ApiError | None:
        """A valid value this server cannot honour (said so, not ignored)."""
        if self.echo:
            return ApiError(400, "echo is not supported", param="echo", code="unsupported")
        if self.logprobs:
            return ApiError(400, "logprobs are not supported", param="logprobs", code="unsupported")
        if self.best_of is not None and self.best_of != self.n:
            return ApiError(400, "best_of is not supported (use n)", param="best_of", code="unsupported")
        if self.top_p is not None and self.top_p < 1.0 and (self.temperature or 0.0) > 0:
            return ApiError(
                400,
                "top_p below 1 is not supported: sampling draws from the whole distribution at the given temperature",
                param="top_p",
                code="unsupported",
            )
        if self.stream_steps and not self.stream:
            return ApiError(400, "stream_steps needs stream: true", param="stream_steps")
        return None


def parse_request(data: object) -> CompletionRequest:
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    try:
        request = CompletionRequest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = [str(p) for p in first["loc"] if isinstance(p, str) and p not in ("str", "list[str]")]
        param = loc[0] if loc else None
        message = first["msg"].removeprefix("Value error, ")
        raise ApiError(400, f"{param}: {message}" if param and not message.startswith(param) else message,
                       param=param) from None  # fmt: skip
    problem = request.unsupported()
    if problem is not None:
        raise problem
    return request


# Fields of a chat request taken over as they are; the rest of a chat request is its messages.
CHAT_FIELDS = ("model", "temperature", "top_p", "stop", "n", "stream", "seed", "user", "steps", "mode", "deadline_ms",
               "snippets", "file_start", "file_end", "language", "filename")  # fmt: skip
CHAT_REFUSED = ("logprobs", "top_logprobs", "tools", "tool_choice", "functions", "response_format", "stream_steps")


def parse_chat_request(data: object) -> CompletionRequest:
    """A chat completions request as the fill-in-the-middle request it holds (see the module doc)."""
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise ApiError(400, "messages: give a list of messages", param="messages")
    for key in CHAT_REFUSED:
        if data.get(key):
            raise ApiError(400, f"{key} is not supported on this server", param=key, code="unsupported")
    found = chat_prompt.parse(messages)
    if found is None:
        raise ApiError(
            400, f"this server fills code: put {chat_prompt.MARKER} where the completion goes in the last user "
            "message (docs/serving.md)", param="messages",
        )  # fmt: skip
    prefix, suffix, mode = found
    body = {k: data[k] for k in CHAT_FIELDS if k in data}
    body.update(prompt=prefix, suffix=suffix)
    if mode and "mode" not in body:
        body["mode"] = mode
    options = data.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        body["include_usage"] = True
    tokens = data.get("max_completion_tokens", data.get("max_tokens"))
    if tokens is not None:
        body["max_tokens"] = tokens
    return parse_request(body)


def cut_at_stop(text: str, stop: list[str] | None) -> tuple[str, bool]:
    """The text up to the first stop sequence, and whether one was found."""
    if not stop:
        return text, False
    cut = min((i for i in (text.find(s) for s in stop) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


def new_id(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:24]}"


def choice(index: int, text: str, finish_reason: str | None, fim: bool, confidence: float | None = None) -> dict:
    """A choice readable by both kinds of clients on the FIM endpoint: ``text`` (OpenAI's completions,
    Mercury) and ``message.content`` (Mistral's FIM responses); ``confidence`` is ours (clients ignore a
    field they do not know)."""
    out: dict = {"index": index, "text": text, "logprobs": None, "finish_reason": finish_reason,
                 "confidence": confidence}  # fmt: skip
    if fim:
        out["message"] = {"role": "assistant", "content": text}
    return out


def chunk_choice(index: int, text: str, finish_reason: str | None, fim: bool) -> dict:
    out: dict = {"index": index, "text": text, "logprobs": None, "finish_reason": finish_reason}
    if fim:
        out["delta"] = {"role": "assistant", "content": text}
    return out


def _envelope(rid: str, model: str, kind: str, choices: list[dict], **extra) -> dict:
    return {"id": rid, "object": kind, "created": int(time.time()), "model": model, "choices": choices, **extra}


def chat_choice(index: int, text: str, finish_reason: str | None, confidence: float | None = None) -> dict:
    return {"index": index, "message": {"role": "assistant", "content": text}, "logprobs": None,
            "finish_reason": finish_reason, "confidence": confidence}  # fmt: skip


def chat_chunk(
    rid: str, model: str, index: int, delta: dict, finish_reason: str | None, confidence: float | None = None, **extra
) -> dict:
    item = {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    if finish_reason is not None:  # the choice's last chunk says how sure the answer is
        item["confidence"] = confidence
    return _envelope(rid, model, "chat.completion.chunk", [item], **extra)


def chat_body(rid: str, model: str, choices: list[dict], usage: dict, timings: dict) -> dict:
    return _envelope(rid, model, "chat.completion", choices, usage=usage, timings=timings)


def response_body(rid: str, model: str, choices: list[dict], usage: dict, fim: bool, timings: dict) -> dict:
    # timings: ours, the same phases as the Server-Timing header, in ms
    kind = "fim.completion" if fim else "text_completion"
    return _envelope(rid, model, kind, choices, usage=usage, timings=timings)


def chunk_body(rid: str, model: str, choices: list[dict], fim: bool, **extra) -> dict:
    return _envelope(rid, model, "fim.completion.chunk" if fim else "text_completion", choices, **extra)


def server_timing(phases: dict[str, float]) -> str:
    """A ``Server-Timing`` header value from phase -> milliseconds."""
    return ", ".join(f"{name};dur={ms:.2f}" for name, ms in phases.items())
