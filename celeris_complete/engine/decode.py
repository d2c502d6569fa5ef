"""Stage 3, under the model's lock: one request's run of the model.  The context encoded (or taken
from the cache), the span refined in a few steps with the drafts verified in it, the span as the
text an editor shows, and sampled alternatives on the same keys/values from the first step's
prediction (one batch, or one canvas at a time where the model's graphs take a single canvas)."""

from __future__ import annotations

import time
from dataclasses import replace

import torch

from celeris_complete.checks.postprocess import postprocess
from celeris_complete.engine.clock import Clock
from celeris_complete.engine.drafting import Drafts, usable
from celeris_complete.engine.request import InfillRequest, SpanPlan
from celeris_complete.model.context import Context
from celeris_complete.model.diffusion import Cancelled, DecodeSettings, SpanTrace, diffuse, span_tokens

# Alternatives are drawn at this temperature among each slot's likeliest tokens (the tail of a small
# model's distribution is noise, and a race over the whole vocabulary costs ~5 ms per canvas and step).
ALTERNATIVE_TEMPERATURE = 0.8
ALTERNATIVE_TOP_K = 16


class Decoding:
    """One request's decode on ``engine``'s backend: made before the lock is taken (what is recorded
    along the way, the deadline), run under it."""

    __slots__ = ("engine", "req", "plan", "ctx", "drafts", "first", "kept", "chosen", "report", "should_stop",
                 "kv", "cache_state", "out", "ran", "step_times", "span", "raw", "sampled", "trace")  # fmt: skip

    def __init__(self, engine, req: InfillRequest, plan: SpanPlan, ctx: Context, drafts: Drafts, t0: float) -> None:
        self.engine, self.req, self.plan, self.ctx, self.drafts = engine, req, plan, ctx, drafts
        self.kept: list[int] = []
        self.chosen: list[int] = []
        # The first step's prediction, for alternatives (asked for, or to replace an answer the compiler blames).
        can = engine.supports
        wanted = req.alternatives > 1 or (plan.checked and req.repair_samples)
        self.first: list | None = [] if wanted and can.alternatives else None
        self.report = None
        if req.on_step is not None and can.on_step:
            on_step, heal = req.on_step, ctx.heal

            def report(step: int, x: torch.Tensor) -> None:
                on_step(step, engine.canvas_text(x[0], heal))

            self.report = report
        deadline = None if req.deadline_ms is None else t0 + req.deadline_ms / 1000.0
        self.should_stop = None if deadline is None else (lambda: time.perf_counter() >= deadline)
        self.sampled: DecodeSettings | None = None
        self.step_times: list[float] = []
        self.trace: list[SpanTrace] = []  # the decode's, for the answer's confidence

    def run(self, clock: Clock) -> None:
        """Encode the context and refine the span (the caller holds the model's lock)."""
        req, plan, e = self.req, self.plan, self.engine
        if req.should_cancel is not None and req.should_cancel():
            raise Cancelled
        clock.mark("locked")
        b, s = e.impl, e.settings
        self.kv, self.cache_state = b.encode(self.ctx)
        clock.mark("encoded")
        self.out, self.ran = diffuse(
            b.model, self.kv, plan.canvas, e.ids, plan.decode, self.should_stop, req.should_cancel,
            plan.first_allowed, self.step_times, self.drafts.ids, s.draft_threshold, self.kept,
            first_probs=self.first, on_step=self.report, draft_veto=s.draft_veto, draft_conditioned=s.draft_batch,
            draft_chosen=self.chosen, trace=self.trace,
        )  # fmt: skip
        clock.mark("refined")
        if self.first is not None:
            d = plan.decode
            self.sampled = replace(d, temperature=ALTERNATIVE_TEMPERATURE, top_k=ALTERNATIVE_TOP_K, seed=d.seed or 0)

    def answer_text(self, clock: Clock) -> tuple[str, list[str]]:
        """The answer as an editor shows it, and the spare drafts that may be shown beside it."""
        e, req, heal = self.engine, self.req, self.ctx.heal
        self.span = span_tokens(self.out[0], e.ids.eos)
        self.raw = e.tok.decode(self.span)
        after_cursor = self.raw[len(heal) :] if self.raw.startswith(heal) else self.raw
        clock.mark("detokenized")
        text = postprocess(after_cursor, req.prefix, req.suffix, self.plan.mode)
        return text, usable(self.drafts.spare, text, req.prefix, req.suffix, self.plan.mode, self.drafts.win)

    def samples(self, n: int) -> list[str]:
        """``n`` sampled answers (none where no first step was recorded), as an editor shows them."""
        if self.first is None or n <= 0:
            return []
        return [self.text_of(row) for row in self.sample_rows(n)]

    def sample_rows(self, n: int) -> torch.Tensor:
        """``n`` sampled canvases (n, canvas) from the first decode's context state and first step."""
        e, plan, first = self.engine, self.plan, self.first
        # An alternative never starts by ending the span (nor a line by ending the line): it would be empty.
        allowed = torch.ones(first[0].shape[-1], dtype=torch.bool, device=first[0].device)
        allowed[e.ids.eos] = False
        if plan.mode == "line" and e.supports.line_rules:
            allowed &= e.impl.starts_line
        if plan.first_allowed is not None:
            allowed &= plan.first_allowed
        model, settings, cancel = e.impl.model, self.sampled, self.req.should_cancel
        batch = e.impl.alternatives_state(self.ctx, self.kv, n)
        if batch is not None:
            state, ids, shared = batch
            return diffuse(model, state, plan.canvas, ids, settings, self.should_stop, cancel, allowed,
                           first_probs=first if shared else None)[0]  # fmt: skip
        return torch.cat([
            diffuse(model, self.kv, plan.canvas, e.ids, replace(settings, seed=settings.seed + i), self.should_stop,
                    cancel, allowed, first_probs=first)[0]
            for i in range(n)
        ])  # fmt: skip

    def text_of(self, row: torch.Tensor) -> str:
        """A canvas as the text an editor shows (as for the answer)."""
        e, heal, req = self.engine, self.ctx.heal, self.req
        raw = e.tok.decode(span_tokens(row, e.ids.eos))
        return postprocess(raw[len(heal) :] if raw.startswith(heal) else raw, req.prefix, req.suffix, self.plan.mode)
