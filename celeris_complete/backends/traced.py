"""The model's inference calls as traced TorchScript graphs.

For a model this small, a refinement step (or the encoding of the few tokens a keystroke adds to a
cached context) spends more time in Python dispatching about a hundred small operations than in
arithmetic. Tracing the calls once, when the engine is built, records those operations as graphs
that run without Python in between: the same arithmetic, less overhead. Each graph is checked against
the eager model at other lengths than it was traced with (a trace that froze a length would answer
differently there, and is refused). The graphs are kept on disk (``trace_store.py``): the next start
loads and checks them instead of tracing again.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from celeris_complete.backends.trace_store import TraceStore
from celeris_complete.model.diffusion import expand_kv
from celeris_complete.model.network import KV, FlatContextEncode, FlatSpanStep, InfillModel, flatten_kv, pair_kv

# How far a graph's outputs may stray from the eager model's: a fused graph rounds at other places
# than the eager operations, by a few units in the last place of the weights' type over the layers
# (bf16 keeps 8 bits, fp16 11), while a graph that froze a length answers wrong by whole units. On
# an H200 the fp16 and bf16 graphs failed the fp32 tolerance and ran eagerly, 8-11x slower at a
# new place (results/gpu_run/gpu_check.log); these tolerances are not yet tried there.
TOLERANCE = {torch.float32: 1e-3, torch.float16: 1e-2, torch.bfloat16: 4e-2}


def tolerance(model: nn.Module) -> float:
    return TOLERANCE.get(next(model.parameters()).dtype, 1e-3)


def _close(got, want, tol: float = 1e-3) -> bool:
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    return len(got) == len(want) and all(
        a.shape == b.shape and torch.allclose(a.float(), b.float(), atol=tol, rtol=tol) for a, b in zip(got, want)
    )


def _reproduces(graph, module: nn.Module, example: tuple, check: tuple, tol: float, safe: bool = False) -> bool:
    """Whether ``graph`` answers as ``module`` at ``check`` (another length than it was traced with), after
    the runs in which the graph executor profiles and optimizes it. ``safe``: a graph that fails to run
    (one kept on disk that is not this call's) does not reproduce it either."""
    try:
        with torch.inference_mode():
            for inputs in (example, check, example):
                graph(*inputs)
            return _close(graph(*check), module(*check), tol)
    except Exception:
        if not safe:
            raise
        return False


class TracedModel:
    """Our model with its refinement step and context encoding (fresh, or extending a cached past) traced."""

    def __init__(self, model: InfillModel, device: str, mask: int, store: TraceStore | None = None) -> None:
        self.model = model
        self.cfg = model.cfg
        tol = tolerance(model)
        room = self.cfg.max_positions - self.cfg.max_canvas  # the longest context the engine gives it
        if room < 24:
            raise RuntimeError(f"a context of at most {room} tokens is too short to trace with")
        a, b = room // 8, room // 2  # two context lengths
        with torch.inference_mode():
            ids = torch.arange(room, device=device).remainder(self.cfg.vocab_size - 8).unsqueeze(0)
            _, past_a = model.encode_context(ids[:, :a])
            _, past_b = model.encode_context(ids[:, :b])
            slots = torch.full((1, self.cfg.max_canvas), mask, dtype=torch.long, device=device)
        # name: (module, traced with, checked at): other context lengths, canvases and numbers of new tokens
        calls = {
            "step": (FlatSpanStep(model), (slots[:, :8], *flatten_kv(past_a)), (slots, *flatten_kv(past_b))),
            "fresh": (FlatContextEncode(model), (ids[:, :a],), (ids,)),
            "extend": (
                FlatContextEncode(model),
                (ids[:, a : a + 3], *flatten_kv(past_a)),
                (ids[:, b : b + 1], *flatten_kv(past_b)),
            ),
        }
        # Graphs kept from an earlier start, where they still reproduce the model (checked at the lengths
        # they were traced with: that they follow others was checked when they were traced, and they are
        # the same graphs; the check at the longest context costs most of a start); else traced and kept.
        stored = store.load(device) if store is not None else None
        sound = stored is not None and all(_reproduces(stored[n], *calls[n][:2], calls[n][1], tol, True) for n in calls)
        graphs = stored if sound else None
        self.from_store = graphs is not None
        if graphs is None:
            graphs = {name: self._trace(*call, tol) for name, call in calls.items()}
            if store is not None:
                store.save(graphs, replace=stored is not None)
        self.step, self.fresh, self.extend = graphs["step"], graphs["fresh"], graphs["extend"]
        with torch.inference_mode():
            more = ids[:, b : b + 7]
            encoded = FlatContextEncode(model)(more, *flatten_kv(past_b))
            if not _close(self.extend(more, *flatten_kv(past_b)), encoded, tol):
                raise RuntimeError("the traced context encoding does not reproduce the model's")
            # Several canvases on one context (alternatives): where the step graph does not follow the
            # batch size, they are decoded one at a time (see Engine._alternatives).
            rows = (ids[:, :16].reshape(2, 8), *flatten_kv(expand_kv(past_a, 2)))
            self.batched = _close(self.step(*rows), FlatSpanStep(model)(*rows), tol)

    @staticmethod
    def _trace(module: nn.Module, example: tuple, check: tuple, tol: float):
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer notes about Python values; the check below is what counts
            graph = torch.jit.freeze(torch.jit.trace(module.eval(), example, check_trace=False).eval())
        if not _reproduces(graph, module, example, check, tol):
            raise RuntimeError(f"the traced {type(module).__name__} does not reproduce the model's")
        return graph

    def parameters(self):
        return self.model.parameters()

    def encode_context(self, ids: torch.Tensor, past: list[KV] | None = None) -> tuple[None, list[KV]]:
        start = 0 if past is None else past[0][0].shape[2]
        self.model._tables(start, ids.shape[1])  # the eager model's bounds check
        out = self.fresh(ids) if past is None else self.extend(ids, *flatten_kv(past))
        return None, pair_kv(out)

    def span_step(self, slot_ids: torch.Tensor, context_kv: list[KV]) -> torch.Tensor:
        self.model._tables(context_kv[0][0].shape[2], slot_ids.shape[1])
        return self.step(slot_ids, *flatten_kv(context_kv))
