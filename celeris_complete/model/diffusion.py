"""Masked-diffusion decoding of a span canvas: a few parallel refinement steps.

Every step predicts all masked slots at once and commits the confident ones
(at least enough to finish within the step cap, plus every slot above the
confidence threshold, as in Fast-dLLM).  Once end-of-span is committed at slot
j, all slots after j are end-of-span.

Several canvases of one context decode as a batch (the context's keys/values
expanded, not copied); every canvas starts all masked, so the first step's
prediction is the same for all of them and can be shared between decodes
(``first_probs``).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass, field

import torch

from celeris_complete.model.network import KV, InfillModel
from celeris_complete.model.verify import DraftRule, choose, conditioned_canvases, conditioned_probs


@dataclass(frozen=True)
class DecodeSettings:
    steps: int = 4
    threshold: float = 0.9
    eos_penalty: float = 0.0  # subtracted from the end-of-span logit (guards against empty answers)
    temperature: float = 0.0
    seed: int | None = None
    top_k: int = 0  # with temperature > 0: draw among each slot's k likeliest tokens (0: all of them)
    # The span opens a blank line: it may not end, nor break the line, right after its indentation,
    # which would leave the line empty (see ``open_line``).
    open_line: bool = False


@dataclass(frozen=True)
class SpecialIds:
    mask: int
    eos: int
    banned: tuple[int, ...]  # ids the canvas may never hold (mask, markers)
    # For ``DecodeSettings.open_line`` (None: the model's tokens are not known): (vocabulary,) masks of
    # the tokens of spaces and tabs only, and of those that may start a line (no line break, no end-of-span).
    blank: torch.Tensor | None = field(default=None, compare=False)
    opens: torch.Tensor | None = field(default=None, compare=False)


@dataclass
class SpanTrace:
    """What the refinement saw of the first canvas, for the answer's confidence (``refine``'s ``trace``).

    ``prob``: per slot, the probability the model gave the token the slot holds, in the step that
    committed it (a drafted slot: the all-masked canvas's); ``step``: that step (-1: never committed);
    ``flips``: per step after the first, how many slots still masked before it changed their likeliest
    token since the step before; ``forced``: the deadline made a step the last one; ``draft_score``:
    the mean log-probability of the draft tokens kept (None: no draft judged)."""

    prob: list[float]
    step: list[int]
    flips: list[int]
    forced: bool = False
    draft_score: float | None = None


class Cancelled(Exception):
    """A newer request superseded this one; raised between refinement steps."""


def expand_kv(kv: list[KV], batch: int) -> list[KV]:
    return [(k.expand(batch, -1, -1, -1), v.expand(batch, -1, -1, -1)) for k, v in kv]


def batch_and_device(state) -> tuple[int, torch.device]:
    """A model adapter's per-request state: our model's per-layer keys/values (PyTorch or ONNX
    backend), or an object that says its ``batch`` and ``device`` itself."""
    if hasattr(state, "batch") and hasattr(state, "device"):
        return state.batch, state.device
    return state[0][0].shape[0], state[0][0].device


def draw(
    probs: torch.Tensor, batch: int, settings: DecodeSettings, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """A token for every slot of ``batch`` canvases from softmax(logits / T) (``probs`` may be one
    canvas's, shared by all), and its probability: (pred, conf), each (batch, canvas).

    An exponential race: the argmax of p^(1/T) / E with E ~ Exp(1) is such a draw (one vectorized
    pass; torch.multinomial over every slot's vocabulary was 4x slower here).  Over the whole
    vocabulary the race costs about 5 ms per 24-slot canvas on a 2-core CPU (a power and a
    logarithm per token); among the ``top_k`` likeliest tokens it costs next to nothing."""
    exponent = 1.0 / settings.temperature
    shape = (batch, *probs.shape[1:])
    if settings.top_k <= 0:
        race = probs.new_empty(shape).exponential_(generator=generator)
        pred = (probs**exponent / race).argmax(dim=-1)
        return pred, probs.expand(shape).gather(-1, pred.unsqueeze(-1)).squeeze(-1)
    top_p, top_i = probs.topk(min(settings.top_k, probs.shape[-1]), dim=-1)
    race = top_p.new_empty((batch, *top_p.shape[1:])).exponential_(generator=generator)
    pick = (top_p**exponent / race).argmax(dim=-1, keepdim=True)
    expand = (batch, *top_p.shape[1:])
    return top_i.expand(expand).gather(-1, pick).squeeze(-1), top_p.expand(expand).gather(-1, pick).squeeze(-1)


@torch.no_grad()
def diffuse(
    model: InfillModel,
    context_kv,
    canvas: int,
    ids: SpecialIds,
    settings: DecodeSettings,
    should_stop=None,
    should_cancel=None,
    first_allowed: torch.Tensor | None = None,
    step_times: list[float] | None = None,
    draft: torch.Tensor | list[torch.Tensor] | None = None,
    draft_threshold: float = 0.0,
    draft_kept: list[int] | None = None,
    first_probs: list[torch.Tensor] | None = None,
    on_step=None,
    draft_veto: float = 1.01,
    draft_conditioned: bool = False,
    draft_chosen: list[int] | None = None,
    trace: list[SpanTrace] | None = None,
) -> tuple[torch.Tensor, int]:
    """Fill a canvas for each context in the batch; returns (canvas ids (B, C), steps run).

    ``model.span_step(canvas_ids, context_kv)`` gives the logits of every slot: ``context_kv`` is
    whatever state the model adapter keeps for the request (see ``batch_and_device``).  The other
    arguments are ``refine``'s.
    """
    batch, device = batch_and_device(context_kv)
    steps = refine(
        batch, device, canvas, ids, settings, should_stop, should_cancel, first_allowed, step_times, draft,
        draft_threshold, draft_kept, first_probs, on_step, draft_veto,
        draft_conditioned and getattr(model, "batched", True), draft_chosen, trace,
    )  # fmt: skip
    try:
        x = next(steps)
        while True:  # more rows than canvases: drafts judged in the canvas, on the same context expanded
            state = context_kv if x.shape[0] == batch else expand_kv(context_kv, x.shape[0])
            x = steps.send(model.span_step(x, state))
    except StopIteration as done:
        return done.value


def refine(
    batch: int,
    device: torch.device | str,
    canvas: int,
    ids: SpecialIds,
    settings: DecodeSettings,
    should_stop=None,
    should_cancel=None,
    first_allowed: torch.Tensor | None = None,
    step_times: list[float] | None = None,
    draft: torch.Tensor | None = None,
    draft_threshold: float = 0.0,
    draft_kept: list[int] | None = None,
    first_probs: list[torch.Tensor] | None = None,
    on_step=None,
    draft_veto: float = 1.01,
    draft_conditioned: bool = False,
    draft_chosen: list[int] | None = None,
    trace: list[SpanTrace] | None = None,
) -> Generator[torch.Tensor, torch.Tensor, tuple[torch.Tensor, int]]:
    """The refinement steps of ``batch`` canvases as a generator: it yields the canvas ids (B, C) whose
    slot logits (B, C, vocabulary) it needs next and is sent them; it returns (canvas ids, steps run).
    ``diffuse`` drives it with one model; the server's batcher (serve_batch.py) drives many at once,
    one forward pass per step for all of them.

    ``should_stop()`` is asked between steps: when it says yes, the remaining
    masked slots are committed from the current prediction (an anytime answer).
    ``should_cancel()`` is asked before each step: yes raises ``Cancelled``.
    ``first_allowed`` (a boolean mask over the vocabulary) limits what slot 0 may hold.
    ``step_times`` collects the seconds each step took.

    ``draft`` (token ids, end-of-span included, or a list of such candidates; one canvas in the batch)
    is verified in the first step (``verify.py``: a token is accepted when it is the model's top token,
    or has at least ``draft_threshold`` probability and the model's top token is not another one with
    at least ``draft_veto``): the best candidate's longest accepted run from slot 0 is committed as
    drafted, and the slots after it are re-masked and decoded as usual in the steps left (a draft the
    model takes whole finishes in one step; a draft refused at slot 0 leaves the canvas to the model).
    ``draft_conditioned`` judges each candidate with its own tokens in the canvas, all of them in one
    batched pass with the all-masked canvas (for a model that decodes batches); otherwise by the
    all-masked canvas's prediction.  ``draft_kept`` receives the number of draft tokens kept,
    ``draft_chosen`` the index of the candidate they came from.

    ``first_probs`` shares the first step's prediction between decodes of the same context, canvas
    length and ``eos_penalty`` (every canvas starts all masked, so it is the same for all of them):
    an empty list receives it (one canvas's probabilities); a list holding it replaces the first
    step's model call (``first_allowed`` then restricts what the first decode allowed, or repeats it).

    ``on_step(step, canvas)``, when given, sees the canvas ids (B, C) after every step (masked slots
    still hold ``ids.mask``): for clients that show the text sharpening step by step.

    ``trace`` receives a ``SpanTrace`` of the first canvas (a few small tensor operations a step).
    """
    x = torch.full((batch, canvas), ids.mask, dtype=torch.long, device=device)
    slot_index = torch.arange(canvas, device=device)
    generator = None
    if settings.temperature > 0 and settings.seed is not None:
        generator = torch.Generator(device=device).manual_seed(settings.seed)
    steps = max(1, settings.steps)
    banned = torch.tensor(ids.banned, dtype=torch.long, device=device)
    ran = kept = 0
    drafts = None
    if draft is not None:
        assert batch == 1 and not first_probs, "a draft is for one canvas"
        drafts = [d[:canvas].to(device) for d in (draft if isinstance(draft, (list, tuple)) else [draft])]
        drafts = [d for d in drafts if d.numel()] or None
        rule = DraftRule(draft_threshold, draft_veto)
    chosen = 0
    tracing = trace is not None
    if tracing:
        t_prob = torch.zeros(canvas, device=device)
        t_step = torch.full((canvas,), -1, dtype=torch.long, device=device)
        flips: list[torch.Tensor] = []
        last_pred = None
        forced, draft_score = False, None
    for step in range(steps):
        if should_cancel is not None and should_cancel():
            raise Cancelled
        started = time.perf_counter()
        if step == 0 and first_probs:
            probs = first_probs[0]  # another decode of this context already made the first step
            if first_allowed is not None:  # what slot 0 may hold, renormalized (softmax does it below)
                probs = probs.clone()
                probs[:, 0] *= first_allowed
                probs[:, 0] /= probs[:, 0].sum(dim=-1, keepdim=True).clamp(min=1e-30)
        else:
            checked = drafts is not None and draft_conditioned
            if checked:  # the all-masked canvas and every draft's two, in one batch
                logits = (yield torch.cat([x, conditioned_canvases(drafts, canvas, ids.mask, ids.eos)])).float()
            else:
                logits = (yield x).float()
            ran += 1
            logits.index_fill_(-1, banned, float("-inf"))
            if first_allowed is not None:
                logits[:, 0].masked_fill_(~first_allowed, float("-inf"))
            logits[..., ids.eos] -= settings.eos_penalty
            probs = torch.softmax(logits, dim=-1)
            if checked:
                per_draft = conditioned_probs(probs[1:], drafts)
                probs = probs[:1]
            elif drafts is not None:
                per_draft = [probs[0, : d.numel()] for d in drafts]
            if step == 0 and first_probs is not None:
                first_probs.append(probs[:1])
        if settings.temperature > 0:
            pred, conf = draw(probs, batch, settings, generator)
        else:
            conf, pred = probs.max(dim=-1)
        drafted = False
        if tracing:
            before = x[0].clone()
            if last_pred is not None:
                flips.append(((pred[0] != last_pred) & (before == ids.mask)).sum())
            last_pred = pred[0]
        if drafts is not None:
            verdict = choose(per_draft, drafts, rule)
            chosen, kept = verdict.index, verdict.run
            if tracing:
                draft_score = verdict.score
            if kept:
                x[0, :kept] = drafts[chosen][:kept]
                drafted = True
            drafts = None  # judged once: the model decides the rest
        masked = x == ids.mask
        remaining = steps - step
        last = remaining == 1 or (should_stop is not None and should_stop())
        if tracing and last and remaining > 1:
            forced = True
        if last:
            commit = masked
        elif drafted:  # this step's prediction did not see the kept draft: the next steps fill the rest
            commit = torch.zeros_like(masked)
        else:
            n_masked = masked.sum(dim=1, keepdim=True)
            quota = torch.ceil(n_masked.float() / remaining).long().clamp(min=1)
            c = conf.masked_fill(~masked, -1.0)
            rank = c.argsort(dim=1, descending=True).argsort(dim=1)
            commit = masked & ((rank < quota) | (c > settings.threshold))
        x = torch.where(commit, pred, x)
        if settings.open_line and ids.blank is not None and not drafted:
            x = open_line(x, probs, pred, ids, last)
        # End-of-span rule: everything after the first committed end-of-span is end-of-span.
        is_eos = x == ids.eos
        first = torch.where(is_eos, slot_index, canvas).min(dim=1, keepdim=True).values
        x = torch.where(slot_index > first, torch.full_like(x, ids.eos), x)
        if tracing:
            row = x[0]
            new = (row != before) & (row != ids.mask)
            t_prob = torch.where(new, probs[0].gather(-1, row.unsqueeze(-1)).squeeze(-1), t_prob)
            t_step = torch.where(new, step, torch.where(row == ids.mask, -1, t_step))  # reopened: again
        if step_times is not None:
            step_times.append(time.perf_counter() - started)
        if on_step is not None:
            on_step(step, x)
        if last or not (x == ids.mask).any():
            break
    if draft_kept is not None:
        draft_kept.append(kept)
    if draft_chosen is not None:
        draft_chosen.append(chosen)
    if tracing:
        moved = torch.stack(flips).tolist() if flips else []  # one transfer from the device, not one per step
        trace.append(SpanTrace(t_prob.tolist(), t_step.tolist(), moved, forced, draft_score))
    return x, ran


def open_line(x: torch.Tensor, probs: torch.Tensor, pred: torch.Tensor, ids: SpecialIds, last: bool) -> torch.Tensor:
    """Canvases (B, C) that open a blank line, with what would leave them empty undone: where the first
    slot after the committed blank tokens (indentation) holds end-of-span or a line break, that slot and
    the end-of-span slots after it open again (masked) for the next steps to decide anew; in the last
    step that slot takes its likeliest token that may start a line and is not blank, and the slots after
    it this step's prediction.

    A masked diffusion model commits its most confident slots first, and end-of-span usually is: at a
    blank line it commits the indentation and the end together, or the end ever closer to the start."""
    lead = ids.blank[x]  # the mask token is not blank
    run = lead.int().cumprod(dim=1).sum(dim=1)  # committed blank tokens from slot 0
    canvas = x.shape[1]
    rows = (run < canvas).nonzero().squeeze(1)
    if not rows.numel():
        return x
    at = run[rows]
    held = x[rows, at]
    bad = (held != ids.mask) & ~ids.opens[held]
    if not bad.any():
        return x
    rows, at = rows[bad], at[bad]
    x = x.clone()
    after = torch.arange(canvas, device=x.device) > at.unsqueeze(1)
    reopen = after & (x[rows] == ids.eos)
    if last:
        p = probs.expand(x.shape[0], -1, -1)[rows, at]
        x[rows, at] = (p * (ids.opens & ~ids.blank)).argmax(dim=-1)
        x[rows] = torch.where(reopen, pred.expand_as(x)[rows], x[rows])
    else:
        x[rows, at] = ids.mask
        x[rows] = torch.where(reopen, torch.full_like(x[rows], ids.mask), x[rows])
    return x


def span_tokens(row: torch.Tensor | list[int], eos: int) -> list[int]:
    out = []
    for t in row.tolist() if isinstance(row, torch.Tensor) else row:
        if t == eos:
            break
        out.append(t)
    return out
