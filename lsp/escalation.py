"""Asking the second tier (``escalate_endpoint``) when the local answer is below its threshold.

The tier runs on a thread of its own, never the model's, so local answers are never kept waiting for
it: an automatic request answers (quietly) at once and the tier's answer comes later, if the document
has not changed meanwhile (``celeris/escalated``: the client shows it when the cursor is still there,
and the next request at that place gets it from the typing cache); a request the user made waits up to
``escalate_budget_ms`` for it.  A newer request for the document supersedes a tier request still
running (its connection is closed).  A failing tier is reported once per kind of failure, then rests
(``BackOff``) instead of being asked on every keystroke.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from celeris_complete.config import Settings
from celeris_complete.engine.request import InfillRequest
from celeris_complete.engine.tiers import BackOff, Tier
from celeris_complete.errors import CelerisError

log = logging.getLogger("celeris.lsp")

ESCALATED_NOTIFICATION = "celeris/escalated"


class Escalation:
    """The second tier of one language server session (``tier`` None: there is none)."""

    def __init__(self, settings: Settings, warn: Callable[[str], None]) -> None:
        self.tier = Tier(settings) if settings.escalate_endpoint else None
        self.warn = warn
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="celeris-tier")
        self.backoff = BackOff()
        self.generation: dict[str, int] = {}
        self.failing: str | None = None  # the kind of the last failure shown to the user
        self.asked = self.answered = self.failed = self.superseded = self.in_flight = 0
        self.latencies_ms: deque[float] = deque(maxlen=256)
        self.stopped = threading.Event()
        if self.tier is not None:
            self.thread.submit(self._warm)

    def _warm(self) -> None:
        """The tier's engine built and its server asked about itself before the first request (which
        would otherwise spend its budget on that); a failure here is the first request's to report."""
        try:
            self.tier.warm(self.stopped.is_set)  # (given up when the session ends: never holds up its exit)
        except Exception as exc:  # noqa: BLE001 - reported by the first request that meets it
            log.info("the second tier could not be reached ahead of its first request: %s", exc)

    def supersede(self, uri: str) -> int:
        """A new request for ``uri``: a tier request still running for it is stale. Its generation."""
        self.generation[uri] = self.generation.get(uri, 0) + 1
        return self.generation[uri]

    def current(self, uri: str, generation: int) -> bool:
        return self.generation.get(uri) == generation

    def ready(self) -> bool:
        """Whether the tier may be asked now (configured, and not resting after a failure)."""
        return self.tier is not None and self.backoff.ready()

    async def ask(self, uri: str, generation: int, req: InfillRequest, wait_ms: float | None = None):
        """The tier's completion of ``req``, or None (failed, superseded, empty, or not within ``wait_ms``)."""
        if not self.ready():
            return None
        self.asked += 1
        self.in_flight += 1
        try:
            return await self._ask(uri, generation, req, wait_ms)
        finally:
            self.in_flight -= 1

    async def _ask(self, uri: str, generation: int, req: InfillRequest, wait_ms: float | None):
        t0 = time.perf_counter()
        stop = threading.Event()

        def should_cancel() -> bool:
            return stop.is_set() or not self.current(uri, generation)

        def call():
            # Waiting behind another tier request, this one may have become stale, or the tier may have
            # failed meanwhile: then it is never sent.
            if should_cancel() or not self.backoff.ready():
                return None
            return self.tier.complete(replace(req, should_cancel=should_cancel))

        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self.thread, call)
        try:
            if wait_ms is None:
                done = await future
            else:
                done = await asyncio.wait_for(asyncio.shield(future), wait_ms / 1e3)
        except asyncio.TimeoutError:
            stop.set()  # the tier request is abandoned at its next poll
            return None
        except asyncio.CancelledError:  # the client cancelled its request
            stop.set()
            raise
        except CelerisError as exc:
            self.failure(exc)
            return None
        except Exception as exc:  # never let the tier take the server down
            self.failure(CelerisError(f"{type(exc).__name__}: {exc}"))
            return None
        if done is None:  # superseded by a newer request for the document (or not sent: the tier rests)
            self.superseded += 1
            return None
        self.backoff.succeeded()
        if self.failing is not None:
            log.info("the second tier works again")
            self.failing = None
        if not done.text.strip():
            return None
        self.answered += 1
        self.latencies_ms.append((time.perf_counter() - t0) * 1e3)
        return done

    def failure(self, exc: CelerisError) -> None:
        self.failed += 1
        self.backoff.failed()
        kind = getattr(exc, "kind", "error")
        log.warning("the second tier failed: %s", exc)
        if kind != self.failing:
            self.failing = kind
            self.warn(f"celeris-complete: the second tier ({self.tier.endpoint}) failed: {exc}")

    def status(self) -> dict | None:
        if self.tier is None:
            return None
        ordered = sorted(self.latencies_ms)
        return {
            "endpoint": self.tier.endpoint,
            "asked": self.asked,
            "answered": self.answered,
            "failed": self.failed,
            "superseded": self.superseded,
            "in_flight": self.in_flight,
            "p50_ms": round(ordered[len(ordered) // 2], 1) if ordered else None,
            "resting_s": math.ceil(self.backoff.remaining_s * 10) / 10,  # 0 only once it may be asked again
            "failing": self.failing,
        }

    def stop(self) -> None:
        self.stopped.set()
        self.thread.shutdown(wait=False, cancel_futures=True)
