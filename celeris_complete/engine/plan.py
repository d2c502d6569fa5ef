"""Stage 1, before the model runs: the span's mode and canvas, the context's budgets, the decoding
settings, and the tokens the span may start with."""

from __future__ import annotations

from dataclasses import replace

from celeris_complete.backends.base import StepBackend, Supports
from celeris_complete.checks import grammar
from celeris_complete.checks.brackets import line_is_open
from celeris_complete.checks.languages import policy, resolve
from celeris_complete.checks.postprocess import at_blank_line, choose_mode
from celeris_complete.config import Settings
from celeris_complete.engine.request import InfillRequest, SpanPlan
from celeris_complete.model.context import Context
from celeris_complete.model.diffusion import DecodeSettings


def plan_span(req: InfillRequest, s: Settings, max_context: int, max_canvas: int) -> SpanPlan:
    """Mode (the request's, else the settings', else the cursor's), canvas, context budgets and the
    decoding settings (the request's overrides over the settings)."""
    mode = choose_mode(req.prefix, req.mode or s.mode)
    canvas = req.max_tokens or (s.canvas_line if mode == "line" else s.canvas_block)
    canvas = max(1, min(canvas, int(max_canvas)))
    suffix_budget = min(s.suffix_tokens, max_context // 4)
    prefix_budget = min(s.prefix_tokens, max_context - suffix_budget - 4)
    snippet_budget = min(s.snippet_tokens, max_context - suffix_budget - prefix_budget - 4)
    decode = DecodeSettings(
        steps=req.steps or s.steps,
        threshold=s.threshold if req.threshold is None else req.threshold,
        eos_penalty=s.eos_penalty_line if mode == "line" and s.eos_penalty_line is not None else s.eos_penalty,
        temperature=s.temperature if req.temperature is None else req.temperature,
        seed=s.seed if req.seed is None else req.seed,
    )
    plan = SpanPlan(mode, canvas, prefix_budget, suffix_budget, snippet_budget, decode)
    plan.language = resolve(req.language)
    plan.python = plan.language is not None and plan.language.family == "python"
    plan.policy = policy(plan.language, req.prefix, req.suffix, req.file_start)
    return plan


def first_slot(plan: SpanPlan, req: InfillRequest, ctx: Context, b: StepBackend, can: Supports, s: Settings) -> None:
    """What the span may start with (``plan.first_allowed``), and whether the compiler judges the answer
    (``plan.checked``): token healing (the span rewrites the cut word, so it starts with it); at a blank
    line, an answer that first ends the line would be empty after post-processing (nor may it end
    right after its indentation: ``open_line``); mid-line where the line cannot end yet (``x = ``,
    ``rv.``, ``for k in ``), nor may the answer."""
    first_allowed = b.tokens_starting_with(ctx.heal) if ctx.heal else None
    prefix = req.prefix
    family = plan.language.family if plan.language is not None else None
    if can.line_rules and at_blank_line(prefix):
        first_allowed = b.starts_line if first_allowed is None else first_allowed & b.starts_line
        plan.decode = replace(plan.decode, open_line=True)
    elif can.line_rules and plan.mode == "line" and line_is_open(prefix[prefix.rfind("\n") + 1 :], family):
        first_allowed = b.starts_line if first_allowed is None else first_allowed & b.starts_line
    plan.first_allowed = first_allowed
    # Python's compiler, or the language's parser where it has one (checks/grammar.py).
    judged = plan.python or grammar.available(plan.language, req.language)
    plan.checked = s.syntax_candidates > 0 and can.alternatives and plan.decode.temperature == 0 and judged
