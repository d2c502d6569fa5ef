"""The completion server: its options (``ServeOptions``), the model it serves and its scheduler
(``CompletionServer``)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from celeris_complete.config import Settings
from celeris_complete.errors import CelerisError
from celeris_complete.serve.api import (
    ApiError,
)
from celeris_complete.serve.batch import BatchScheduler
from celeris_complete.serve.metrics import Metrics
from celeris_complete.serve.scheduler import Scheduler

log = logging.getLogger("celeris.serve")


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
            from celeris_complete.engine import Engine

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
