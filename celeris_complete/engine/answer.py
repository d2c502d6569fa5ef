"""Stage 5: the answer as the caller gets it: text, alternatives, the draft offered and how much of it
the model kept, the compiler's verdict, what says how likely it is right and that probability (where
the model ships a calibration), and the time of each phase."""

from __future__ import annotations

import time

from celeris_complete.backends.base import Completion
from celeris_complete.engine.clock import Clock
from celeris_complete.engine.confidence import features
from celeris_complete.engine.decode import Decoding
from celeris_complete.engine.request import SpanPlan


def answer(run: Decoding, text: str, others: tuple[str, ...], verdict: str, clock: Clock) -> Completion:
    drafts, ctx = run.drafts, run.ctx
    offered = None
    if drafts.offers:
        pick = run.chosen[0] if run.chosen else 0
        offered = {
            "source": drafts.offers[pick].source,
            "votes": drafts.offers[pick].count,
            "tokens": int(drafts.ids[pick].numel()),
            "kept": run.kept[0] if run.kept else 0,
            "candidates": len(drafts.offers),
        }
    timings = clock.timings_ms(run.step_times, run.req.alternatives > 1)
    req, heal, raw = run.req, ctx.heal, run.raw
    after_cursor = raw[len(heal) :] if raw.startswith(heal) else raw
    known = features(run.trace[0] if run.trace else None, len(run.span), run.ran, offered, verdict, run.plan.mode,
                     req.prefix, req.suffix, text, after_cursor, heal)  # fmt: skip
    engine = run.engine
    confidence = engine.calibrator.predict(known) if engine.calibrator is not None and text.strip() else None
    return Completion(
        text, run.plan.mode, run.ran, len(run.span), run.cache_state, len(ctx.tokens), timings, run.raw, ctx.heal,
        ctx.snippet_tokens, offered, others, verdict, known, confidence, engine.min_confidence_for(known),
    )  # fmt: skip


def nothing(plan: SpanPlan, clock: Clock, verdict: str) -> Completion:
    """No answer, and no model call (``languages.policy`` "off": the cursor's line is minified)."""
    phases = ("tokenize", "draft", "queue", "context_encode", "refine", "detokenize", "postprocess", "syntax")
    timings = {**dict.fromkeys(phases, 0.0), "total": (time.perf_counter() - clock.t0) * 1e3, "steps": []}
    return Completion("", plan.mode, 0, 0, "none", 0, timings, syntax=verdict)
