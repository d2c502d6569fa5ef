"""The completion server's bounded queue and its model worker.

Requests become ``Job``s in a bounded queue (``QueueFull`` when it holds ``max_queue`` waiting
jobs: the server answers 429).  One worker thread owns the engine and runs the jobs one at a time,
in arrival order: the engine runs one model call at a time anyway (its lock), and one thread keeps
the context caches and the torch threads to themselves.  Each client (the request's ``user``, else its
connection) has contexts of its own (``ClientContexts``), so that many clients typing along each
extend their last context instead of evicting each other's from one shared cache.

Batching across requests (``--batch``, the default) is ``serve_batch.BatchScheduler``, a subclass:
the server only sees jobs and their events either way.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from celeris_complete.engine import InfillRequest
from celeris_complete.model.context_cache import ClientContexts

if TYPE_CHECKING:  # the engine (and torch) load in the background: see serve.py
    from celeris_complete.engine import Completion, Engine

log = logging.getLogger("celeris.serve")


class QueueFull(Exception):
    """The queue holds as many waiting jobs as it may."""


class DeadlineExceeded(Exception):
    """The job's deadline passed while it waited in the queue."""


@dataclass
class Job:
    """One request: ``n`` completions at the same place.  ``emit`` receives, from the worker thread,
    ``("step", choice, step, canvas text)`` for each refinement step when ``stream_steps`` is set,
    then exactly one ``("done", JobResult)`` or ``("error", exception)``."""

    prefix: str
    suffix: str
    emit: Callable[[tuple], None]
    n: int = 1
    mode: str | None = None
    max_tokens: int | None = None
    steps: int | None = None
    temperature: float | None = None
    seed: int | None = None
    deadline: float = float("inf")  # time.perf_counter() by which the answer is due
    stream_steps: bool = False
    client: str | None = None  # whose context cache to use (batching: serve_batch.py)
    snippets: tuple[str, ...] = ()
    file_start: bool = True
    file_end: bool = True
    language: str | None = None  # an LSP language id or a file name (engine/request.py InfillRequest.language)
    arrived: float = field(default_factory=time.perf_counter)
    cancel: threading.Event = field(default_factory=threading.Event)
    started: float | None = None


@dataclass
class JobResult:
    completions: list[Completion]
    queue_ms: float  # in the server's queue, before the worker took the job


class Scheduler:
    def __init__(
        self, max_queue: int, on_batch: Callable[[int], None] | None = None, on_cancel: Callable[[], None] | None = None
    ) -> None:
        self.max_queue = max_queue
        self.on_batch = on_batch  # the number of jobs in each model pass (metrics)
        self.on_cancel = on_cancel  # a job dropped because its client left (metrics)
        self._waiting: deque[Job] = deque()
        self._cv = threading.Condition()
        self._closed = False
        self.engine: Engine | None = None
        self._worker: threading.Thread | None = None
        self.running = 0
        self.contexts = ClientContexts()  # each client's own contexts, so that clients typing along keep theirs

    def start(self, engine: Engine) -> None:
        """Begin serving with a loaded engine."""
        self.engine = engine
        self._worker = threading.Thread(target=self._loop, name="celeris-serve-worker", daemon=True)
        self._worker.start()

    def depth(self) -> int:
        return len(self._waiting)

    def submit(self, job: Job) -> None:
        with self._cv:
            if self._closed:
                raise RuntimeError("the server is shutting down")
            if len(self._waiting) >= self.max_queue:
                raise QueueFull
            self._waiting.append(job)
            self._cv.notify()

    def close(self, timeout: float = 5.0) -> None:
        with self._cv:
            self._closed = True
            for job in self._waiting:
                job.cancel.set()
            self._cv.notify_all()
        if self._worker is not None:
            self._worker.join(timeout)

    def _take(self) -> list[Job]:
        with self._cv:
            while not self._waiting and not self._closed:
                self._cv.wait()
            if self._closed:
                return []
            return [self._waiting.popleft()]

    def _loop(self) -> None:
        while True:
            jobs = self._take()
            if not jobs:
                return
            if self.on_batch is not None:
                self.on_batch(len(jobs))
            self.running = len(jobs)
            try:
                self._run(jobs)
            finally:
                self.running = 0

    def _run(self, jobs: list[Job]) -> None:
        from celeris_complete.model.diffusion import Cancelled

        for job in jobs:
            try:
                job.emit(("done", self._complete(job)))
            except Exception as exc:  # Cancelled, DeadlineExceeded, or a fault the server reports as 500
                if isinstance(exc, Cancelled):
                    if self.on_cancel is not None:
                        self.on_cancel()
                elif not isinstance(exc, DeadlineExceeded):
                    log.exception("completion failed")
                job.emit(("error", exc))

    def _complete(self, job: Job) -> JobResult:
        from celeris_complete.model.diffusion import Cancelled

        job.started = time.perf_counter()
        queue_ms = (job.started - job.arrived) * 1e3
        if job.cancel.is_set():
            raise Cancelled
        if job.started >= job.deadline:
            raise DeadlineExceeded
        assert self.engine is not None
        seed = job.seed
        if seed is None and (job.temperature or 0) > 0:
            seed = secrets.randbelow(2**31)  # a fresh draw per request, as the APIs do without a seed
        out = []
        with self.engine.using_cache(self.contexts.cache(job.client or "")):
            for i in range(job.n):
                out.append(self._choice(job, seed, i))
        return JobResult(out, queue_ms)

    def _choice(self, job: Job, seed: int | None, i: int):
        assert self.engine is not None
        on_step = None
        if job.stream_steps:

            def on_step(step: int, text: str) -> None:
                job.emit(("step", i, step, text))

        # What is left of the deadline: the engine commits the open slots when it passes (at
        # least one refinement step always runs).
        left_ms = max(0.001, (job.deadline - time.perf_counter()) * 1e3) if job.deadline != float("inf") else None
        return self.engine.complete(
            InfillRequest(
                job.prefix,
                job.suffix,
                mode=job.mode,
                max_tokens=job.max_tokens,
                steps=job.steps,
                deadline_ms=left_ms,
                should_cancel=job.cancel.is_set,
                temperature=job.temperature,
                seed=None if seed is None else seed + i,
                on_step=on_step,
                snippets=job.snippets,
                file_start=job.file_start,
                file_end=job.file_end,
                language=job.language,
                source=f"client:{job.client}",  # its own earlier answers as drafts, never another client's
            )
        )
