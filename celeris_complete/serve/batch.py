"""Continuous batching for the completion server: every waiting request joins the running batch
between refinement steps, each step is one forward pass over all their span canvases
(batch_step.py), and a request leaves as soon as its canvas is done.

A request is planned as ``Engine.complete`` plans it (mode, canvas, context, what slot 0 may hold,
decoding settings, a draft) and decoded by the same refinement code (``diffusion.refine``), so that
its answer is the one it gets alone; its context's keys/values come from a small cache of the client's
own (the ``user`` field, else the connection), so a client typing along extends its last context.
Its deadline and its client's cancellation are honoured at every step, as alone.  Models the batcher
cannot drive (ONNX graphs, transformers adapters) are served one request at a time.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from celeris_complete.serve.scheduler import DeadlineExceeded, Job, JobResult, Scheduler

if TYPE_CHECKING:
    import torch

    from celeris_complete.engine import Engine
    from celeris_complete.serve.batch_step import BatchStep

log = logging.getLogger("celeris.serve")

JOINS_PER_STEP = 4  # requests that join between two steps (each encodes its context): the batch keeps moving


@dataclass
class Plan:
    """What ``Engine.complete`` works out before it decodes (one request; its ``n`` rows share it)."""

    mode: str
    canvas: int
    ctx: object  # context.Context
    first_allowed: torch.Tensor | None
    settings: object  # diffusion.DecodeSettings (its seed that of choice 0)
    draft_ids: torch.Tensor | None
    draft: object | None  # drafts.Draft
    tokenize_ms: float
    draft_ms: float


def plan(engine: Engine, job: Job, seed: int | None) -> Plan:
    """``Engine.complete``'s first stages (``engine.plan``) up to its decode: snippets as the client sent
    them; no workspace lines (the server has none), one draft and no earlier answers."""
    import torch

    from celeris_complete.drafts.search import find_drafts
    from celeris_complete.drafts.table import MAX_LINE, draft_tokens
    from celeris_complete.engine.plan import first_slot, plan_span
    from celeris_complete.engine.request import InfillRequest
    from celeris_complete.model.context import build_context

    s = engine.settings
    t0 = time.perf_counter()
    req = InfillRequest(
        job.prefix, job.suffix, mode=job.mode, max_tokens=job.max_tokens, steps=job.steps,
        temperature=job.temperature, seed=seed, file_start=job.file_start, file_end=job.file_end,
        snippets=job.snippets,
    )  # fmt: skip
    span = plan_span(req, s, engine.max_context, engine.max_canvas)
    prefix, mode, canvas = req.prefix, span.mode, span.canvas
    ctx = build_context(
        engine.tok, prefix, req.suffix, span.prefix_budget, span.suffix_budget, file_start=req.file_start,
        file_end=req.file_end, snippets=req.snippets, snippet_budget=span.snippet_budget,
    )  # fmt: skip
    first_slot(span, req, ctx, engine.impl, engine.supports, s)
    t1 = time.perf_counter()
    draft, draft_ids = None, None
    if s.drafts and span.decode.temperature == 0:  # as Engine.complete, with one candidate and no earlier answers
        found = find_drafts(prefix, req.suffix, None, None, 1)
        if found:
            draft = found[0]
            line = "" if "\n" in ctx.heal else prefix[prefix.rfind("\n") + 1 : len(prefix) - len(ctx.heal)][-MAX_LINE:]
            end, tail = ([engine.ids.eos], "") if mode == "line" else ([], "\n")
            ids = draft_tokens(engine.tok.encode, line, ctx.heal + draft.text + tail) + end
            draft_ids = torch.tensor(ids[:canvas], dtype=torch.long)
    t2 = time.perf_counter()
    return Plan(mode, canvas, ctx, span.first_allowed, span.decode, draft_ids, draft, (t1 - t0) * 1e3, (t2 - t1) * 1e3)


@dataclass
class Running:
    """A request in the batch: its plan, its rows' results so far, its timings."""

    job: Job
    plan: Plan
    cache: str
    queue_ms: float
    encode_ms: float
    refine_start: float
    rows_left: int
    kv: object  # the context's keys/values, for a step the request has to itself
    done: list = field(default_factory=list)  # (choice index, Completion)
    failed: bool = False


@dataclass
class Row:
    """One canvas of a request (choice ``index``): its refinement generator and the ids it waits on."""

    request: Running
    index: int
    steps: Generator
    pending: torch.Tensor
    step_times: list[float]
    kept: list[int]
    trace: list  # the refinement's SpanTrace (what the answer's confidence is read from)


class BatchScheduler(Scheduler):
    """``Scheduler`` with continuous batching of up to ``max_batch`` canvases (a request with ``n``
    choices takes ``n``); the queue bound, 429 and the events jobs emit are the same."""

    def __init__(
        self, max_queue: int, max_batch: int, on_batch: Callable[[int], None] | None = None,
        on_cancel: Callable[[], None] | None = None, auto: bool = False,
    ) -> None:  # fmt: skip
        """``auto``: serve one request at a time where batching does not pay (int8 on the CPU)."""
        super().__init__(max_queue, on_batch, on_cancel)
        self.max_batch = max_batch
        self.auto = auto
        self.batch: BatchStep | None = None
        self.rows: list[Row] = []  # in the batch's row order

    def start(self, engine: Engine) -> None:
        from celeris_complete.serve.batch_step import BatchStep, eager_model

        model = eager_model(engine.model) if engine.hf is None and engine.backend == "torch" else None
        if model is None:
            log.warning("this model cannot be batched (%s backend); serving one request at a time", engine.backend)
        elif self.auto and engine.device == "cpu" and engine.quant == "int8":
            # Its linear layers run per canvas to keep answers exact, and a CPU pass is compute-bound:
            # one at a time (each client's contexts kept) measured as fast or faster at 1-64 clients.
            log.info("int8 on the CPU: serving one request at a time (--batch batches anyway)")
        else:
            self.batch = BatchStep(model, self.max_batch, engine.ids.mask)
        super().start(engine)

    def _loop(self) -> None:
        if self.batch is None:
            super()._loop()
            return
        try:
            while True:
                admitted = self._admit_waiting()
                if admitted is None:
                    return
                for job in admitted:
                    self._join(job)
                if self.rows:
                    self._step()
        finally:
            self._drop_all()

    def _admit_waiting(self) -> list[Job] | None:
        """Jobs that fit the batch now (in arrival order); blocks while there is nothing to do; None once closed."""
        with self._cv:
            while not self._waiting and not self.rows and not self._closed:
                self._cv.wait()
            if self._closed:
                return None
            out, used = [], len(self.rows)
            while self._waiting and len(out) < JOINS_PER_STEP and (
                used + self._waiting[0].n <= self.max_batch or used == 0
            ):
                job = self._waiting.popleft()
                out.append(job)
                used += job.n
            self.running = used
            return out

    def _join(self, job: Job) -> None:
        import torch

        from celeris_complete.model.diffusion import Cancelled, refine

        job.started = time.perf_counter()
        queue_ms = (job.started - job.arrived) * 1e3
        engine = self.engine
        assert engine is not None and self.batch is not None
        try:
            if job.cancel.is_set():
                raise Cancelled
            if job.started >= job.deadline:
                raise DeadlineExceeded
            seed = job.seed
            if seed is None and (job.temperature or 0) > 0:
                seed = secrets.randbelow(2**31)  # a fresh draw per request, as the APIs do without a seed
            p = plan(engine, job, seed)
            t0 = time.perf_counter()
            with engine.using_cache(self.contexts.cache(job.client or "")), engine.lock, torch.inference_mode():
                kv, cache = engine.impl.encode(p.ctx)
            t1 = time.perf_counter()
        except Exception as exc:
            self._fail(job, exc)
            return
        running = Running(job, p, cache, queue_ms, (t1 - t0) * 1e3, t1, job.n, kv)
        deadline = job.deadline

        def should_stop() -> bool:
            return time.perf_counter() >= deadline

        for i in range(job.n):
            settings = p.settings
            if settings.temperature > 0 and settings.seed is not None:
                settings = replace(settings, seed=settings.seed + i)
            on_step = None
            if job.stream_steps:

                def on_step(step: int, x, i: int = i) -> None:
                    job.emit(("step", i, step, engine.canvas_text(x[0], p.ctx.heal)))

            step_times: list[float] = []
            kept: list[int] = []
            trace: list = []
            steps = refine(
                1, engine.device, p.canvas, engine.ids, settings, should_stop, job.cancel.is_set, p.first_allowed,
                step_times, p.draft_ids, engine.settings.draft_threshold, kept, None, on_step,
                engine.settings.draft_veto, trace=trace,
            )  # fmt: skip
            row = Row(running, i, steps, None, step_times, kept, trace)  # type: ignore[arg-type]
            try:
                row.pending = next(steps)
            except StopIteration as finished:  # (a refinement always asks for one step; kept for safety)
                self._finish(row, finished.value)
                continue
            except Exception as exc:
                running.failed = True
                self._fail(job, exc)
                return
            with engine.lock:
                self.batch.add(kv)
            self.rows.append(row)

    def _step(self) -> None:
        import torch

        engine = self.engine
        assert engine is not None and self.batch is not None
        if self.on_batch is not None:
            self.on_batch(len({id(r.request) for r in self.rows}))
        with engine.lock, torch.inference_mode():
            if len(self.rows) == 1:  # alone: the engine's own step (traced where it can be), the same logits
                logits = [engine.model.span_step(self.rows[0].pending, self.rows[0].request.kv)]
            else:
                logits = self.batch.step([r.pending for r in self.rows])
            leaving = []
            for at, (row, out) in enumerate(zip(self.rows, logits)):
                if row.request.failed:
                    leaving.append(at)
                    continue
                try:
                    row.pending = row.steps.send(out)
                except StopIteration as finished:
                    leaving.append(at)
                    self._finish(row, finished.value)
                except Exception as exc:  # Cancelled (its client left), or a fault
                    leaving.append(at)
                    row.request.failed = True
                    self._fail(row.request.job, exc)
        # Rows of a request that failed meanwhile leave too; from the last, so that moves stay valid.
        leaving = sorted(set(leaving) | {i for i, r in enumerate(self.rows) if r.request.failed}, reverse=True)
        for at in leaving:
            self.batch.remove(at)
            last = self.rows.pop()
            if at < len(self.rows):
                self.rows[at] = last
        self.running = len(self.rows)

    def _finish(self, row: Row, result: tuple) -> None:
        from celeris_complete.checks.postprocess import postprocess
        from celeris_complete.engine import Completion
        from celeris_complete.engine.checking import check_whole
        from celeris_complete.engine.confidence import features
        from celeris_complete.model.diffusion import span_tokens

        engine = self.engine
        r, p = row.request, row.request.plan
        out, ran = result
        t0 = time.perf_counter()
        span = span_tokens(out[0], engine.ids.eos)
        raw = engine.tok.decode(span)
        heal = p.ctx.heal
        after_cursor = raw[len(heal) :] if raw.startswith(heal) else raw
        t1 = time.perf_counter()
        text = postprocess(after_cursor, r.job.prefix, r.job.suffix, p.mode)
        # Judged as a remote server's answer is (engine/checking.py): only where the client named the language.
        job = r.job
        text, verdict = check_whole(text, job.prefix, job.suffix, job.language, engine.settings.syntax_candidates,
                                    job.file_start and job.file_end)  # fmt: skip
        t2 = time.perf_counter()
        first = row.index == 0  # the request's shared work counts once, on its first choice
        timings = {
            "tokenize": p.tokenize_ms if first else 0.0,
            "draft": p.draft_ms if first else 0.0,
            "queue": 0.0,
            "context_encode": r.encode_ms if first else 0.0,
            "refine": 0.0,  # the request's whole refinement, set when its last choice is done
            "detokenize": (t1 - t0) * 1e3,
            "postprocess": (t2 - t1) * 1e3,
            "steps": [round(t * 1e3, 3) for t in row.step_times],
        }
        offered = None
        if p.draft is not None and row.kept is not None:
            offered = {"source": p.draft.source, "votes": p.draft.count, "tokens": int(p.draft_ids.numel()),
                       "kept": row.kept[0] if row.kept else 0}  # fmt: skip
        cache = r.cache if first else "hit"
        # How sure: as the engine's answers are.
        known = features(row.trace[0] if row.trace else None, len(span), ran, offered, verdict, p.mode, r.job.prefix,
                         r.job.suffix, text, after_cursor, heal)  # fmt: skip
        confidence = engine.calibrator.predict(known) if engine.calibrator is not None and text.strip() else None
        c = Completion(text, p.mode, ran, len(span), cache, len(p.ctx.tokens), timings, raw, heal,
                       p.ctx.snippet_tokens, offered, (), verdict, known, confidence,
                       engine.min_confidence_for(known))  # fmt: skip
        r.done.append((row.index, c))
        r.rows_left -= 1
        if r.rows_left == 0:
            completions = [c for _, c in sorted(r.done, key=lambda d: d[0])]
            completions[0].timings_ms["refine"] = (t0 - r.refine_start) * 1e3
            for c in completions:
                c.timings_ms["total"] = (time.perf_counter() - r.job.started) * 1e3
            r.job.emit(("done", JobResult(completions, r.queue_ms)))

    def _fail(self, job: Job, exc: BaseException) -> None:
        from celeris_complete.model.diffusion import Cancelled

        if isinstance(exc, Cancelled):
            if self.on_cancel is not None:
                self.on_cancel()
        elif not isinstance(exc, DeadlineExceeded):
            log.error("completion failed", exc_info=exc)
        job.emit(("error", exc))

    def _drop_all(self) -> None:
        """Shutting down: the requests still in the batch are answered as cancelled."""
        from celeris_complete.model.diffusion import Cancelled

        seen = set()
        for row in self.rows:
            if id(row.request) not in seen and not row.request.failed:
                seen.add(id(row.request))
                row.request.failed = True
                row.request.job.emit(("error", Cancelled()))
        self.rows.clear()
        if self.batch is not None:
            self.batch.clear()
