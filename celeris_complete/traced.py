"""The refinement step as a traced TorchScript graph.

For a model this small, a refinement step spends more time in Python dispatching about a hundred
small operations than in arithmetic. Tracing ``InfillModel.span_step`` once, when the engine is
built, records those operations as one graph that runs without Python in between: the same
arithmetic (the engine checks that the answers are equal before using it), less overhead per step.
Context encoding stays eager: it is dominated by matrix products, and its causal mask depends on the
cached length in a way a trace would freeze.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from .model import KV, InfillModel


class _Step(nn.Module):
    """``span_step`` with the keys/values as flat arguments, as tracing wants them."""

    def __init__(self, model: InfillModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, slots: torch.Tensor, *kv: torch.Tensor) -> torch.Tensor:
        return self.model.span_step(slots, list(zip(kv[0::2], kv[1::2])))


class TracedModel:
    """Our model with its refinement step traced; the engine's other calls go to the eager model."""

    def __init__(self, model: InfillModel, device: str, mask: int) -> None:
        self.model = model
        self.cfg = model.cfg
        with torch.inference_mode():
            # Example and check inputs differ in context length and canvas: a trace that froze a shape
            # would give other answers at the second, and is refused.
            example = self._inputs(37, 24, mask, device)
            check = self._inputs(101, 7, mask, device)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer notes about Python values; the check below is what counts
            traced = torch.jit.trace(_Step(model).eval(), example, check_trace=False)
            self.step = torch.jit.freeze(traced.eval())
        with torch.inference_mode():
            for inputs in (example, check, example):  # the graph executor's first runs profile and optimize
                self.step(*inputs)
            got, want = self.step(*check), model.span_step(check[0], list(zip(check[1::2], check[2::2])))
        if got.shape != want.shape or not torch.allclose(got.float(), want.float(), atol=1e-3, rtol=1e-3):
            raise RuntimeError("the traced refinement step does not reproduce the model's")

    def _inputs(self, context: int, canvas: int, mask: int, device: str) -> tuple[torch.Tensor, ...]:
        ids = torch.arange(context, device=device).remainder(self.cfg.vocab_size - 8).unsqueeze(0)
        _, kv = self.model.encode_context(ids)
        slots = torch.full((1, canvas), mask, dtype=torch.long, device=device)
        return (slots, *(t for pair in kv for t in pair))

    def parameters(self):
        return self.model.parameters()

    def encode_context(self, ids: torch.Tensor, past: list[KV] | None = None) -> tuple[torch.Tensor, list[KV]]:
        return self.model.encode_context(ids, past)

    def span_step(self, slot_ids: torch.Tensor, context_kv: list[KV]) -> torch.Tensor:
        self.model._tables(context_kv[0][0].shape[2], slot_ids.shape[1])  # the eager model's bounds check
        return self.step(slot_ids, *(t for pair in context_kv for t in pair))
