"""Who may ask: the endpoints, the API key (from an environment variable or a file), a loopback
host, and the guard in front of the application that checks them."""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path

from starlette.responses import JSONResponse

from celeris_complete.config import ENV_PREFIX
from celeris_complete.errors import CelerisError
from celeris_complete.serve.api import (
    ApiError,
    server_timing,
)
from celeris_complete.serve.server import CompletionServer

log = logging.getLogger("celeris.serve")

ENDPOINTS = ("/v1/fim/completions", "/v1/completions", "/v1/models", "/health", "/metrics")
OPEN_PATHS = ("/health",)  # answered without the API key (load balancers' probes)
MIN_KEY_CHARS = 16


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
