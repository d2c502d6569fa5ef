"""Stage 5: the answer as the caller gets it: text, alternatives, the draft offered and how much of it
the model kept, the compiler's verdict, and the time of each phase."""

from __future__ import annotations

from celeris_complete.backends.base import Completion
from celeris_complete.engine.clock import Clock
from celeris_complete.engine.decode import Decoding


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
    return Completion(
        text, run.plan.mode, run.ran, len(run.span), run.cache_state, len(ctx.tokens), timings, run.raw, ctx.heal,
        ctx.snippet_tokens, offered, others, verdict,
    )  # fmt: skip
