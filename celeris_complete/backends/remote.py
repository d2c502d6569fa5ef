"""A remote server completes the request: ``celeris-complete serve``, or any server with the
fill-in-the-middle (``POST /v1/fim/completions``) or OpenAI completions (``POST /v1/completions``
with ``suffix``) API, such as vLLM or SGLang.

What leaves the machine: the prefix and suffix windows the configured budgets allow (cut here, by
characters, as generously as ``context.py`` cuts them before tokenizing, so that the server builds
the same context a local engine would), and, for ``celeris-complete serve`` only, the snippets
already chosen under the snippet budget.  Callers never pass secret or ignored files.

One HTTP client with a keep-alive pool runs on an event loop thread of its own; a request waits
there while the caller polls ``should_cancel`` (a superseded request is abandoned at once, its
connection closed, which the server takes as a cancellation) and its deadline (the server gets
``deadline_ms`` and answers anytime; the client gives up ``GRACE_MS`` later).  Every failure is a
``RemoteError`` with a ``kind`` (refused, auth, busy, server, timeout, request) and a message
meant for the user.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ipaddress
import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from celeris_complete.backends import chat_prompt
from celeris_complete.backends.base import Completion, Supports
from celeris_complete.checks.postprocess import postprocess
from celeris_complete.config import ENV_PREFIX, OPTIONS, Settings
from celeris_complete.errors import CelerisError
from celeris_complete.model.context import ANCHOR_CHARS, CHARS_PER_TOKEN_BOUND, PREFIX_CHARS_PER_TOKEN
from celeris_complete.model.context_cache import ContextCache
from celeris_complete.model.diffusion import Cancelled, DecodeSettings

GRACE_MS = 250.0  # the client waits this long past the deadline for the server's answer
MAX_DEADLINE_MS = 10_000.0  # serve's default cap on deadline_ms (and its deadline for requests without one)
TIMEOUT_S = MAX_DEADLINE_MS / 1e3 + 5.0  # without a deadline
CONNECT_TIMEOUT_S = 2.0
POLL_S = 0.002  # how often a waiting request asks should_cancel
OURS = "celeris-complete"  # /v1/models' owned_by on our own server
PATHS = {"fim": "/v1/fim/completions", "completions": "/v1/completions", "chat": "/v1/chat/completions"}
CHAT_MAX_TOKENS = {"line": 64, "block": 256}  # a chat model's tokens are not our canvas slots


class RemoteError(CelerisError):
    """The endpoint could not give a completion; ``kind`` groups errors for reporting once."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Window:
    """What is sent: the text around the cursor and the snippets, already cut to the budgets."""

    prefix: str
    suffix: str
    file_start: bool
    file_end: bool
    snippets: tuple[str, ...] = ()


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_server_timing(value: str | None) -> dict[str, float]:
    """``queue;dur=1.2, total;dur=9.5`` -> {"queue": 1.2, "total": 9.5}; malformed parts are skipped."""
    out: dict[str, float] = {}
    for part in (value or "").split(","):
        name, *params = (p.strip() for p in part.split(";"))
        for param in params:
            key, _, number = param.partition("=")
            if name and key.strip() == "dur":
                try:
                    out[name] = float(number.strip().strip('"'))
                except ValueError:
                    pass
    return out


def cut_window(
    prefix: str, suffix: str, prefix_budget: int, suffix_budget: int, file_start: bool, file_end: bool,
    snippets: Sequence[str], snippet_budget: int,
) -> Window:  # fmt: skip
    """The text a server needs to build the context a local engine would build with these budgets.

    The prefix is cut at a multiple of ``ANCHOR_CHARS`` from its start, so the server's anchored
    window (context.prefix_window) starts where the local one does; the suffix is cut as
    suffix_window cuts it.  A snippet is sent only while the snippets before it may leave room
    (each token spans at most ``CHARS_PER_TOKEN_BOUND`` characters)."""
    keep = int(prefix_budget * PREFIX_CHARS_PER_TOKEN) + 2 * ANCHOR_CHARS
    cut = max(0, len(prefix) - keep)
    cut -= cut % ANCHOR_CHARS
    window = suffix[: suffix_budget * CHARS_PER_TOKEN_BOUND]
    cut_end = len(window) < len(suffix)
    if cut_end and (newline := window.rfind("\n")) > 0:
        window = window[: newline + 1]
    chosen: list[str] = []
    used = 0
    for text in snippets:
        if snippet_budget - used // CHARS_PER_TOKEN_BOUND < 8:
            break
        piece = text[: snippet_budget * CHARS_PER_TOKEN_BOUND]
        chosen.append(piece)
        used += len(piece)
    return Window(prefix[cut:], window, file_start and cut == 0, file_end and not cut_end, tuple(chosen))


class RemoteBackend:
    supports = Supports(
        steps=False, token_healing=False, caching=False, drafts=False, alternatives=False, on_step=False,
        line_rules=False,
    )  # fmt: skip
    name = "remote"
    quant = "server"

    def __init__(self, settings: Settings) -> None:
        try:
            import httpx
        except ImportError:
            raise CelerisError("the remote backend needs httpx: pip install 'celeris-complete[remote]'") from None
        url = settings.endpoint.strip()
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise CelerisError(f"endpoint {url!r}: give an http:// or https:// URL, e.g. http://127.0.0.1:8000")
        base = url.rstrip("/")
        base = base[: -len("/v1")] if base.endswith("/v1") else base
        self.base = base
        self.path = url
        self.device = parts.hostname
        self.loopback = is_loopback_host(parts.hostname)
        self.encrypted = parts.scheme == "https"
        self.api = settings.api
        self.key = None
        if settings.api_key_env.upper().startswith(ENV_PREFIX):
            raise CelerisError(
                f"api_key_env {settings.api_key_env}: name a variable outside {ENV_PREFIX}* (those hold settings)"
            )
        if settings.api_key_env:
            self.key = os.environ.get(settings.api_key_env, "").strip()
            if not self.key:
                raise CelerisError(f"api_key_env {settings.api_key_env}: that environment variable is not set or empty")
        self.recommended: dict = {}
        self.meta: dict = {"endpoint": url, "api": self.api}
        # The budgets are the user's settings, never cut by a model's size (the server cuts again).
        self.max_context = 4 * int(OPTIONS["suffix_tokens"].maximum) + 8
        self.max_canvas = int(max(OPTIONS["canvas_line"].maximum, OPTIONS["canvas_block"].maximum))
        self.cache = ContextCache(capacity=0)  # nothing cached here
        self.lock = threading.Lock()
        self.server: dict | None = None  # {"ours": bool, "model": id or None}, from GET /v1/models
        self._httpx = httpx
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="celeris-remote", daemon=True)
        self._thread.start()
        self._client = self._run_sync(self._make_client())

    async def _make_client(self):
        httpx = self._httpx
        headers = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        return httpx.AsyncClient(
            base_url=self.base,
            headers=headers,
            timeout=httpx.Timeout(None, connect=CONNECT_TIMEOUT_S),  # the deadline is enforced in _wait
            limits=httpx.Limits(max_connections=8, max_keepalive_connections=4, keepalive_expiry=120.0),
        )

    def _run_sync(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def close(self) -> None:
        if self._loop.is_running():
            self._run_sync(self._client.aclose())
            self._loop.call_soon_threadsafe(self._loop.stop)

    def announcement(self) -> str | None:
        """What the editor tells the user on the first use of an endpoint off this machine."""
        if self.loopback:
            return None
        plain = "" if self.encrypted else " over unencrypted http"
        return (
            f"celeris-complete: completions come from {self.path}{plain}; the text around the cursor and snippets "
            "from other files (never secret or ignored ones) are sent there"
        )

    def connect(self, should_cancel=None) -> None:
        """Ask the server whose it is and which model it names now, not within the first request's deadline
        (a slow answer would otherwise cost that request). Raises ``RemoteError`` as a request would, and
        ``Cancelled`` once ``should_cancel()`` holds."""
        if self.server is None:
            self.server = self._wait(self._probe(), None, should_cancel)[0]

    # ---- one request ------------------------------------------------------------------------------
    def context(
        self, prefix: str, suffix: str, prefix_budget: int, suffix_budget: int, file_start: bool, file_end: bool,
        snippets: Sequence[str], snippet_budget: int,
    ) -> Window:  # fmt: skip
        return cut_window(prefix, suffix, prefix_budget, suffix_budget, file_start, file_end, snippets,
                          snippet_budget)  # fmt: skip

    def complete(
        self, window: Window, mode: str, max_tokens: int | None, steps: int | None, decode: DecodeSettings,
        deadline_ms: float | None, should_cancel, settings: Settings, t0: float, language: str | None = None,
    ) -> Completion:  # fmt: skip
        deadline = None if deadline_ms is None else t0 + (deadline_ms + GRACE_MS) / 1e3
        if self.server is None:
            self.server = self._wait(self._probe(), deadline, should_cancel)[0]
        ours = self.server["ours"]
        chat = self.api == "chat"
        if chat:
            body: dict = {"messages": chat_prompt.build(window.prefix, window.suffix, mode)}
        else:
            body = {"prompt": window.prefix, "suffix": window.suffix}
        if self.server["model"]:
            body["model"] = self.server["model"]
        user = settings.source

        def chosen(key: str) -> bool:
            return user(key) != "default"

        canvas_key = "canvas_line" if mode == "line" else "canvas_block"
        if max_tokens or chosen(canvas_key) or not ours:
            body["max_tokens"] = max_tokens or (CHAT_MAX_TOKENS[mode] if chat else settings.values[canvas_key])
        if ours:
            body.update(mode=mode, file_start=window.file_start, file_end=window.file_end)
            if language:
                body["language"] = language[:64]
            if window.snippets:
                body["snippets"] = list(window.snippets)
            if steps or chosen("steps"):
                body["steps"] = decode.steps
            if deadline_ms is not None:
                body["deadline_ms"] = min(deadline_ms, MAX_DEADLINE_MS)
        if decode.temperature or chosen("temperature") or not ours:
            body["temperature"] = decode.temperature
        if decode.temperature and (decode.seed or chosen("seed")):
            body["seed"] = decode.seed
        if not ours and mode == "line" and not chat:  # a chat model may open with a fence: cut after reading
            body["stop"] = ["\n"]
        t_sent = time.perf_counter()
        status, timing, payload = self._wait(self._post(PATHS[self.api], body), deadline, should_cancel)
        t_back = time.perf_counter()
        if status != 200:
            raise self._status_error(status, payload)
        try:
            data = json.loads(payload)
            first = data["choices"][0]
            text = first.get("text")
            if text is None:
                text = (first.get("message") or {}).get("content") or ""
            usage = data.get("usage") or {}
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise RemoteError("server", f"{self.path}: the answer is not a completion ({payload[:120]!r})") from None
        if not isinstance(text, str):
            raise RemoteError("server", f"{self.path}: the answer's text is not a string")
        raw = text
        if not ours:  # our server post-processes; others return the model's raw span
            if chat:
                text = chat_prompt.extract(text, window.prefix, window.suffix, mode)
            text = postprocess(text, window.prefix, window.suffix, mode)
        t_end = time.perf_counter()
        timings = {"server_" + k: v for k, v in parse_server_timing(timing).items()}
        round_trip = (t_back - t_sent) * 1e3
        timings["request"] = round_trip
        if "server_total" in timings:
            timings["network"] = max(0.0, round_trip - timings["server_total"])
        # The engine's phases, as far as the server says them (selftest and the server's metrics read them).
        timings["context_encode"] = timings.get("server_encode", 0.0)
        timings["refine"] = timings.get("server_refine", 0.0)
        timings["detokenize"] = 0.0
        timings["tokenize"] = (t_sent - t0) * 1e3  # cutting the windows, the body
        timings["postprocess"] = (t_end - t_back) * 1e3
        timings["total"] = (t_end - t0) * 1e3
        timings["steps"] = []
        tokens = usage.get("completion_tokens", 0)
        context_tokens = usage.get("prompt_tokens", 0)
        return Completion(
            text, mode, body.get("steps", 0), tokens if isinstance(tokens, int) else 0, "remote",
            context_tokens if isinstance(context_tokens, int) else 0, timings, raw,
        )  # fmt: skip

    # ---- HTTP -------------------------------------------------------------------------------------
    async def _probe(self):
        """Whose server it is (our own takes our fields) and the model id to name."""
        response = await self._client.get("/v1/models")
        if response.status_code in (401, 403):
            raise self._status_error(response.status_code, response.content)
        info = {"ours": False, "model": None}
        if response.status_code == 200:
            try:
                models = response.json().get("data") or []
                info["ours"] = any(m.get("owned_by") == OURS for m in models)
                info["model"] = models[0].get("id") if models else None
            except (ValueError, AttributeError, TypeError):
                pass
        return info, None, None

    async def _post(self, path: str, body: dict):
        response = await self._client.post(path, json=body)
        return response.status_code, response.headers.get("server-timing"), response.content

    def _wait(self, coro, deadline: float | None, should_cancel):
        """Run ``coro`` on the client's loop; cancelled or past the deadline: abandoned at once."""
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        end = deadline if deadline is not None else time.perf_counter() + TIMEOUT_S
        try:
            while True:
                left = end - time.perf_counter()
                done, _ = concurrent.futures.wait((future,), timeout=min(left, POLL_S) if should_cancel else left)
                if done:
                    break
                if should_cancel is not None and should_cancel():
                    future.cancel()  # the task is cancelled on the loop: httpx drops the connection
                    raise Cancelled
                if time.perf_counter() >= end:
                    future.cancel()
                    raise RemoteError("timeout", f"{self.path} did not answer in time")
            return future.result()
        except self._httpx.ConnectError as exc:
            raise RemoteError("refused", f"cannot connect to {self.path} ({exc or 'connection refused'})") from None
        except self._httpx.TimeoutException:
            raise RemoteError("timeout", f"{self.path} did not answer in time") from None
        except self._httpx.HTTPError as exc:
            raise RemoteError("network", f"{self.path}: {type(exc).__name__}: {exc}") from None

    def _status_error(self, status: int, payload: bytes) -> RemoteError:
        try:
            message = json.loads(payload)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = payload[:200].decode("utf-8", "replace").strip()
        where = f"{self.path} answered {status}"
        if status in (401, 403):
            hint = "set api_key_env to the environment variable holding its key" if not self.key else "check the key"
            return RemoteError("auth", f"{where}: the API key was refused ({hint})")
        if status == 429:
            return RemoteError("busy", f"{where}: the server is busy; completions resume when it has room")
        if status >= 500:
            return RemoteError("server", f"{where}: {message}")
        return RemoteError("request", f"{where}: {message}")
