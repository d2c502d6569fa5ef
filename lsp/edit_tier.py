"""A remote next-edit model (``edit_endpoint``), asked by ``celeris/nextEdit``: ``POST
/v1/edit/completions`` in the shape of Inception's Mercury Edit API, which ``celeris-complete serve``
answers too.  The request is one user message, the
next-edit prompt (``edits/prompt.py``: the file around the cursor, its editable region, the recent
edits as unified diffs); the answer is the region rewritten, in a fenced block.

Every failure is an ``EditTierError`` with a ``kind`` (refused, auth, busy, server, timeout, request) and a
message meant for the user; an answer that is not a chat completion, or has no fenced block, is a
"server" failure (a wrong endpoint, say)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from celeris_complete.config import Settings
from celeris_complete.edits.prompt import unfenced
from celeris_complete.engine.tiers import BackOff
from celeris_complete.errors import CelerisError

log = logging.getLogger("celeris.lsp")

PATH = "/v1/edit/completions"
MAX_TOKENS = 1024


class EditTierError(CelerisError):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class EditTier:
    def __init__(self, settings: Settings) -> None:
        import httpx  # (only when an edit endpoint is configured)

        self.endpoint = settings.edit_endpoint.rstrip("/")
        self.model = settings.edit_model or None
        key = os.environ.get(settings.edit_api_key_env, "") if settings.edit_api_key_env else ""
        if settings.edit_api_key_env and not key:
            raise EditTierError("auth", f"edit_api_key_env names {settings.edit_api_key_env}, which is not set")
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.client = httpx.Client(timeout=httpx.Timeout(10.0, connect=2.0))

    def close(self) -> None:
        self.client.close()

    def rewrite(self, prompt: str, timeout_s: float) -> str:
        """The editable region as the endpoint rewrote it."""
        import httpx

        body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": MAX_TOKENS}
        if self.model:
            body["model"] = self.model
        url = self.endpoint + PATH
        try:
            r = self.client.post(url, json=body, headers=self.headers, timeout=timeout_s)
        except httpx.TimeoutException:
            raise EditTierError("timeout", f"{url} did not answer within {timeout_s * 1e3:.0f} ms") from None
        except httpx.HTTPError as exc:
            raise EditTierError("refused", f"{url} could not be reached ({type(exc).__name__})") from None
        if r.status_code in (401, 403):
            raise EditTierError("auth", f"{url} refused the API key ({r.status_code})")
        if r.status_code == 429:
            raise EditTierError("busy", f"{url} is busy (429)")
        if r.status_code >= 400:
            kind = "server" if r.status_code >= 500 else "request"
            raise EditTierError(kind, f"{url} answered {r.status_code}: {r.text[:200]}")
        try:
            content = r.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError, json.JSONDecodeError):
            raise EditTierError("server", f"{url} did not answer with a chat completion: {r.text[:200]!r}") from None
        region = unfenced(content) if isinstance(content, str) else None
        if region is None:
            raise EditTierError("server", f"{url} answered without the rewritten region in a fenced block")
        return region


class RemoteNextEdits:
    """The session's edit endpoint: asked on a thread of its own within ``edit_budget_ms``; a failure is
    shown once per kind (then logged), and the endpoint rests after each (``BackOff``) instead of being
    asked on every change."""

    def __init__(self, settings: Settings, warn: Callable[[str], None]) -> None:
        self.settings = settings
        self.warn = warn
        self.tier: EditTier | None = None
        self.backoff = BackOff()
        self.failing: str | None = None
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="celeris-edit-tier")
        self.asked = self.answered = self.failed = 0

    def ready(self) -> bool:
        return bool(self.settings.edit_endpoint) and self.backoff.ready()

    def _rewrite(self, prompt: str) -> str:
        if self.tier is None:
            self.tier = EditTier(self.settings)
        return self.tier.rewrite(prompt, self.settings.edit_budget_ms / 1e3)

    async def ask(self, prompt: str) -> str | None:
        """The endpoint's rewrite of the prompt's editable region, or None (failed, or too slow)."""
        self.asked += 1
        budget_s = self.settings.edit_budget_ms / 1e3
        loop = asyncio.get_running_loop()
        try:
            region = await asyncio.wait_for(loop.run_in_executor(self.thread, self._rewrite, prompt), budget_s + 1.0)
        except (EditTierError, asyncio.TimeoutError) as exc:
            self.failed += 1
            self.backoff.failed()
            kind = getattr(exc, "kind", "timeout")
            message = str(exc) or f"no answer within {self.settings.edit_budget_ms:.0f} ms"
            if kind != self.failing:
                self.failing = kind
                self.warn(f"celeris-complete: the next-edit endpoint failed: {message}")
            else:
                log.info("the next-edit endpoint failed again: %s", message)
            return None
        self.answered += 1
        self.backoff.succeeded()
        self.failing = None
        return region

    def stop(self) -> None:
        self.thread.shutdown(wait=False, cancel_futures=True)
        if self.tier is not None:
            self.tier.close()
