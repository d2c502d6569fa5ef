"""Which of a few drafts the model accepts, and how much of it.

A draft token is accepted when it is the model's top token at its slot, or when the model gives it
at least ``threshold`` probability, unless the model is confident in another token there (its top
token is not the draft's and has at least ``veto`` probability): a small model may be better at
knowing a draft is wrong than at writing the right line.  The accepted part of a draft is its
longest accepted run from slot 0; of several drafts, one accepted whole wins over those accepted in
part, then the longest run, then the higher mean log-probability over the run.

Two ways to get the probabilities a draft is judged by:

- marginal: the first step's prediction of the all-masked canvas (free: decoding makes it anyway);
  every draft is judged by the same prediction.
- conditioned: each draft sits in the canvas, half of its slots masked in one canvas and the other
  half in a second, so every slot is judged with its draft neighbours in view; all drafts' canvases
  and the all-masked one go through the model as one batch on the same cached context.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DraftRule:
    threshold: float = 0.0  # accept a draft token the model gives at least this probability...
    veto: float = 1.01  # ...unless its top token is another one with at least this probability (> 1: never)


@dataclass(frozen=True)
class Verdict:
    index: int  # the chosen draft
    run: int  # its tokens accepted, from slot 0
    score: float  # mean log-probability over the accepted run (0 for an empty run)


def accepted(probs: torch.Tensor, draft: torch.Tensor, rule: DraftRule) -> tuple[int, float]:
    """(longest accepted run from slot 0, mean log-probability over it); ``probs`` (n, vocab) are the
    model's probabilities at the draft's n slots.  A token the model gives probability 0 (banned, or
    ruled out at slot 0 by token healing) is never accepted."""
    top_p, top = probs.max(dim=-1)
    p = probs.gather(-1, draft[:, None])[:, 0]
    vetoed = (top != draft) & (top_p >= rule.veto)
    ok = (p > 0) & ((top == draft) | ((p >= rule.threshold) & ~vetoed))
    run = int(ok.long().cumprod(0).sum())
    if run == 0:
        return 0, 0.0
    return run, float(p[:run].clamp(min=1e-30).log().mean())


def choose(per_draft: list[torch.Tensor], drafts: list[torch.Tensor], rule: DraftRule) -> Verdict:
    """The best of ``drafts`` (each scored by its own slots' probabilities in ``per_draft``): one
    accepted whole before any accepted in part (a longer draft is not a better one), then the
    longest run, then the higher mean log-probability."""
    best, best_key = Verdict(0, 0, 0.0), None
    for i, (probs, draft) in enumerate(zip(per_draft, drafts)):
        run, score = accepted(probs, draft, rule)
        if run == 0:
            continue
        whole = run == draft.numel()
        key = (whole, 0 if whole else run, score)
        if best_key is None or key > best_key:
            best, best_key = Verdict(i, run, score), key
    return best


def conditioned_canvases(drafts: list[torch.Tensor], canvas: int, mask: int, eos: int) -> torch.Tensor:
    """Two canvases per draft (2k, canvas): the draft with its even slots masked, then with its odd
    slots masked; slots past the draft hold end-of-span, as they would once it is committed."""
    rows = torch.full((2 * len(drafts), canvas), eos, dtype=torch.long, device=drafts[0].device)
    for i, draft in enumerate(drafts):
        n = draft.numel()
        for half in (0, 1):
            row = rows[2 * i + half]
            row[:n] = draft
            row[half:n:2] = mask
    return rows


def conditioned_probs(probs: torch.Tensor, drafts: list[torch.Tensor]) -> list[torch.Tensor]:
    """Per draft, its slots' probabilities (n, vocab), each slot's from the canvas where it was
    masked; ``probs`` (2k, canvas, vocab) are the model's over ``conditioned_canvases``."""
    out = []
    for i, draft in enumerate(drafts):
        n = draft.numel()
        slot = torch.arange(n, device=probs.device)
        out.append(probs[2 * i + (slot % 2), slot])
    return out
