"""A second tier: a stronger model behind an endpoint, asked when the local answer is unsure.

``escalate_endpoint`` names it (``celeris-complete serve``, a vLLM or SGLang server, a hosted API),
``escalate_api`` its API (fim, completions, chat) and ``escalate_api_key_env`` its key: the same remote
backend as ``endpoint`` (windows cut to the budgets, cancellation, deadlines, one error kind per
failure, Python answers checked on this side).  ``Tier`` builds that engine (and asks the server about
itself) ahead of the first request and answers one request at a time; ``BackOff`` keeps a failing
tier from being asked on every keystroke.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from celeris_complete.backends.base import Completion
from celeris_complete.config import Settings
from celeris_complete.engine.request import InfillRequest

FIRST_BACKOFF_S = 1.0
LONGEST_BACKOFF_S = 30.0


def tier_settings(settings: Settings) -> Settings | None:
    """The settings of the second tier's engine, or None when none is configured."""
    if not settings.escalate_endpoint:
        return None
    return settings.with_overrides(
        {
            "endpoint": settings.escalate_endpoint,
            "api": settings.escalate_api,
            "api_key_env": settings.escalate_api_key_env,
        },
        "escalate_endpoint",
    )


class BackOff:
    """After a failure the tier rests: 1 s, doubling with each failure in a row up to 30 s; a success
    ends it."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.failures = 0
        self.until = 0.0

    def ready(self) -> bool:
        return self.clock() >= self.until

    @property
    def remaining_s(self) -> float:
        return max(0.0, self.until - self.clock())

    def failed(self) -> None:
        self.failures += 1
        self.until = self.clock() + min(LONGEST_BACKOFF_S, FIRST_BACKOFF_S * 2 ** (self.failures - 1))

    def succeeded(self) -> None:
        self.failures, self.until = 0, 0.0


class Tier:
    """The second tier's engine, built by ``warm`` or the first request, on the tier's thread (building
    may ask the server for its models); ``complete`` raises the remote backend's ``RemoteError`` (a
    ``CelerisError`` with a ``kind``)."""

    def __init__(self, settings: Settings) -> None:
        tier = tier_settings(settings)
        if tier is None:
            raise ValueError("no escalate_endpoint")
        self.settings = tier
        self.endpoint = tier.endpoint
        self.engine = None
        self.lock = threading.Lock()

    def _engine(self):
        from celeris_complete.engine.pipeline import Engine  # (torch: loaded when first needed)

        if self.engine is None:
            self.engine = Engine(self.settings)
        return self.engine

    def warm(self, should_cancel: Callable[[], bool] | None = None) -> None:
        """Build the engine and ask the server about itself ahead of the first request, so that request's
        budget is spent on its answer; raises what building or asking raises (given up once
        ``should_cancel()`` holds)."""
        with self.lock:
            connect = getattr(self._engine().impl, "connect", None)
            if connect is not None:
                connect(should_cancel)

    def complete(self, req: InfillRequest) -> Completion | None:
        """The tier's answer; None when ``req.should_cancel`` stopped it (superseded)."""
        from celeris_complete.engine.pipeline import Cancelled

        with self.lock:
            try:
                return self._engine().complete(req)
            except Cancelled:
                return None
