"""The infill engine: text around the cursor in, completion and timings out.

Everything slow (loading, quantizing, thread set-up, lookup tables) happens in the constructor;
``complete`` is the hot path, one stage after another:

1. ``plan.plan_span``: the span's mode and canvas, the context's budgets, the decoding settings; the
   backend builds the context (windows, tokens, token healing, snippets); ``plan.first_slot``: what
   the span may start with, and whether the compiler judges the answer;
2. ``drafting.gather_drafts``: continuations the document, the workspace, earlier answers or the
   compiler suggest, for the model to verify in the canvas;
3. ``decode.Decoding``, under the model's lock: the context's keys/values from the cache (encoding only
   the tokens it lacks), a few refinement steps on the span canvas, the text an editor shows, and
   for an invoked completion sampled alternatives as one batch on the same context from the first
   step's prediction;
4. ``checking.check_answer``: for Python, the compiler's verdict; only samples may replace an answer
   it blames (a draft the model never judged may not);
5. ``answer.answer``: the ``Completion`` with the time of each phase (``clock.Clock``).

What runs the model is a backend (``backends``): our own model directory (eager, traced or ONNX), a
transformers directory of a public diffusion model, or a remote server.  The engine asks the backend
what it supports (token healing, snippets, caching, drafts, alternatives, per-step canvases) rather
than which one it is; decoding (``model/diffusion.py``) is the same for every backend whose steps
the engine runs, and a remote one completes the whole request itself (``checking.complete_whole``).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path

import torch

from celeris_complete.backends.base import Completion, Supports
from celeris_complete.backends.hf import TransformersBackend
from celeris_complete.backends.open import open_backend
from celeris_complete.backends.ours import DECODE_KEYS, has_int8_kernels
from celeris_complete.config import Settings
from celeris_complete.drafts.table import PreviousCompletions
from celeris_complete.engine.answer import answer, nothing
from celeris_complete.engine.checking import check_answer, complete_whole
from celeris_complete.engine.clock import Clock
from celeris_complete.engine.confidence import Calibrator
from celeris_complete.engine.decode import Decoding
from celeris_complete.engine.drafting import gather_drafts
from celeris_complete.engine.plan import first_slot, plan_span
from celeris_complete.engine.request import InfillRequest
from celeris_complete.model.context import Context
from celeris_complete.model.context_cache import ContextCache
from celeris_complete.model.diffusion import Cancelled

__all__ = ["DECODE_KEYS", "Cancelled", "Completion", "Engine", "InfillRequest", "has_int8_kernels"]

MASKED_SLOT = "\u2591"  # how canvas_text shows a slot the model has not committed yet


class Engine:
    def __init__(self, settings: Settings, trace_in_background: bool = False) -> None:
        """``trace_in_background``: answer with the eager model at once and switch to the traced
        graphs (about a second of work) when they are ready; for a server that should be ready soon."""
        self.impl = b = open_backend(settings, trace_in_background)
        self.supports: Supports = b.supports
        self.path = b.path
        # How likely an answer is right (the model directory's confidence.json; none for a backend that
        # completes whole), with a recommended threshold at each place of the cursor (min_confidence_for).
        self.calibrator = Calibrator.load(Path(b.path)) if b.path and b.supports.steps else None
        self.recommended = dict(b.recommended)
        self.use_settings(settings)
        self.device = b.device
        self.meta = b.meta
        self.max_context = b.max_context
        self.max_canvas = b.max_canvas
        self.quant = b.quant
        self.backend = b.name
        self.cache = b.cache
        self.lock = b.lock
        self.previous = PreviousCompletions()  # earlier answers, drafts for the same line
        self.tok = getattr(b, "tok", None)
        self.ids = getattr(b, "ids", None)
        self._starts_line = getattr(b, "starts_line", None)
        self.tracer = getattr(b, "tracer", None)
        if hasattr(b, "onnx_device"):
            self.onnx_device = b.onnx_device

    @property
    def model(self):
        """What runs the refinement steps (swapped for the traced graphs once they are ready)."""
        return self.impl.model

    @property
    def hf(self):
        """The transformers adapter, when the model is one (else None)."""
        return self.impl.model if isinstance(self.impl, TransformersBackend) else None

    def min_confidence_for(self, features: Mapping[str, float]) -> float:
        """The threshold in force for an answer with these features: the user's ``min_confidence`` when set,
        else what the model's calibration recommends at the answer's place (0 without one)."""
        if self.calibrator is None or self.settings.source("min_confidence") != "default":
            return self.settings.min_confidence
        return self.calibrator.threshold(features)

    def min_confidence_in_force(self) -> float | dict[str, float]:
        """The threshold in force: the user's, or the calibration's per place (status, selftest)."""
        if self.calibrator is None or self.settings.source("min_confidence") != "default":
            return self.settings.min_confidence
        return self.calibrator.thresholds

    def use_settings(self, settings: Settings) -> None:
        """Take new settings (those that need no reload). Decoding settings the model recommends
        (tuned on validation data) replace built-in defaults only, never a value the user set."""
        tuned = {k: v for k, v in self.recommended.items() if settings.source(k) == "default"}
        self.settings = settings.with_overrides(tuned, f"{self.path}/config.json (decode)") if tuned else settings

    def tokens_starting_with(self, text: str) -> torch.Tensor:
        return self.impl.tokens_starting_with(text)

    def canvas_text(self, row: torch.Tensor, heal: str = "", masked: str = MASKED_SLOT) -> str:
        """A canvas as text: committed tokens decoded, each still-masked slot shown as ``masked``,
        nothing from the first end-of-span on; ``heal`` (text before the cursor that the span
        rewrites) left out once the canvas starts with it."""
        parts: list[str] = []
        run: list[int] = []
        for t in row.tolist():
            if t == self.ids.eos:
                break
            if t == self.ids.mask:
                if run:
                    parts.append(self.tok.decode(run))
                    run = []
                parts.append(masked)
            else:
                run.append(t)
        if run:
            parts.append(self.tok.decode(run))
        text = "".join(parts)
        return text[len(heal) :] if heal and text.startswith(heal) else text

    def _context_kv(self, tokens: list[int]):
        return self.impl.encode(Context(tokens, 0, 0))

    def complete(self, req: InfillRequest) -> Completion:
        """Complete at the cursor (see ``InfillRequest``): plan the span, gather drafts, decode, check,
        answer.  Safe to call from several threads (one runs the model at a time)."""
        clock = Clock()
        plan = plan_span(req, self.settings, self.max_context, self.max_canvas)
        if plan.policy == "off":  # a minified line: nothing to complete, no model call
            return nothing(plan, clock, "minified")
        ctx = self.impl.context(req.prefix, req.suffix, plan.prefix_budget, plan.suffix_budget, req.file_start,
                                req.file_end, req.snippets, plan.snippet_budget)  # fmt: skip
        if not self.supports.steps:  # a remote server completes whole
            return complete_whole(self.impl, req, plan, ctx, self.settings, clock.t0)
        first_slot(plan, req, ctx, self.impl, self.supports, self.settings)
        clock.mark("drafting")
        drafts = gather_drafts(req, plan, ctx, self.settings, self.previous, self.tok, self.ids, self.supports)
        clock.mark("drafted")
        run = Decoding(self, req, plan, ctx, drafts, clock.t0)
        clock.mark("queued")
        with self.lock, torch.inference_mode():  # a blamed answer's samples decode on the same keys/values
            run.run(clock)
            text, drafted = run.answer_text(clock)
            clock.mark("sampling")
            wanted = req.alternatives - 1 - len(drafted)  # samples for the places drafts left
            rows = run.sample_rows(wanted) if wanted > 0 and run.first is not None else None
            clock.mark("sampled")
            others = () if rows is None else tuple(run.text_of(row) for row in rows)
            clock.mark("checking")
            text, others, verdict = check_answer(run, text, others, drafted)
        clock.mark("done")
        if self.supports.drafts:
            self.previous.record(req.source, req.prefix, text)
        return answer(run, text, others, verdict, clock)

    @contextmanager
    def using_cache(self, cache: ContextCache):
        """Contexts encoded into and looked up in ``cache`` instead of the engine's own, meanwhile (a
        server keeps one per client); for the one thread that completes meanwhile.  A backend that
        keeps no contexts (``supports.caching`` false) keeps its own."""
        if not self.supports.caching:
            yield
            return
        with self.lock:
            own, self.impl.cache = self.impl.cache, cache
        try:
            yield
        finally:
            with self.lock:
                self.impl.cache = own
