"""The one interface between ``Engine.complete`` and what runs the model.

A backend builds a request's context from the text around the cursor and then either lets the
engine run the refinement steps on it (``supports.steps``: it encodes the context and offers a
``model`` with ``span_step``, which ``diffusion.py`` drives), or completes the whole request itself
(a remote server).  ``Supports`` says which of the engine's features it can serve; the engine asks
it instead of asking which backend it has.  A new backend is one new module in this package with a
class like those below, and one line in ``open.open_backend``.  Every backend answers with a
``Completion``.

- ``ours.py``: our model directory (eager PyTorch, traced graphs, ONNX Runtime);
- ``hf.py``: a public diffusion model from a transformers directory;
- ``remote.py``: ``celeris-complete serve`` (or an OpenAI-compatible server) over HTTP.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from celeris_complete.config import Settings

if TYPE_CHECKING:
    import threading

    import torch

    from celeris_complete.model.context import Context
    from celeris_complete.model.context_cache import ContextCache
    from celeris_complete.model.diffusion import SpecialIds


@dataclass
class Completion:
    text: str
    mode: str
    steps: int
    tokens: int
    cache: str  # "hit", "partial" or "miss"; "remote" from a remote backend
    context_tokens: int
    timings_ms: dict = field(default_factory=dict)  # per phase; "steps" holds each refinement step
    raw: str = ""  # the decoded span before post-processing, starting with ``heal``
    heal: str = ""  # text cut from before the cursor that the span rewrites (token healing)
    snippet_tokens: int = 0  # context tokens taken by snippets from other files
    draft: dict | None = None  # the draft offered: its source, its tokens, how many the model kept
    # Other drafts, then sampled completions, as ``text`` (they may repeat it or each other).
    alternatives: tuple[str, ...] = ()
    # The compiler's verdict (Python; see checks/syntax.py): "ok", "elsewhere" (the window is broken
    # whatever the answer), or for an answer it blamed: "reindented", "shortened", "closed", "replaced" (by a
    # sampled answer), "withheld" or "kept"; "" when not checked.
    syntax: str = ""
    # What says how likely the answer is to be right as shown (engine/confidence.py); None: not known
    # (a backend that completes whole).
    features: dict | None = None
    # The calibrated probability that ``text`` is right as shown (None: an empty answer, or no calibration).
    confidence: float | None = None
    # The threshold in force for this answer (Engine.min_confidence_for): the language server holds back
    # an automatic answer whose confidence is below it.
    min_confidence: float = 0.0


@dataclass(frozen=True)
class Supports:
    steps: bool = True  # the engine runs the refinement steps (False: the backend completes whole)
    token_healing: bool = True  # the context may cut a word's last token for the span to rewrite
    snippets: bool = True  # text from other files in the context
    caching: bool = True  # encoded contexts kept across requests
    drafts: bool = True  # a drafted line verified in the decode
    alternatives: bool = True  # sampled alternatives on the same context
    on_step: bool = True  # every step's canvas shown to the caller
    line_rules: bool = True  # knows which tokens start a line (the blank-line rule)


class Backend(Protocol):
    name: str  # "torch", "onnx", "transformers", "remote": what the status and selftest show
    supports: Supports
    path: Path | str  # the model directory, or the endpoint
    device: str
    quant: str
    meta: dict
    recommended: dict  # decoding settings the model recommends (see Engine.use_settings)
    max_context: int
    max_canvas: int
    cache: ContextCache
    lock: threading.Lock  # held while the model runs

    def context(
        self, prefix: str, suffix: str, prefix_budget: int, suffix_budget: int, file_start: bool, file_end: bool,
        snippets: Sequence[str], snippet_budget: int,
    ) -> Any: ...  # fmt: skip


class StepBackend(Backend, Protocol):
    """A backend whose refinement steps the engine runs (``supports.steps``)."""

    tok: Any  # encode / decode
    ids: SpecialIds
    model: Any  # span_step(canvas, state) -> logits; may be swapped (tracing) under ``lock``
    starts_line: torch.Tensor | None  # tokens that may start a line (``supports.line_rules``)

    def context(
        self, prefix: str, suffix: str, prefix_budget: int, suffix_budget: int, file_start: bool, file_end: bool,
        snippets: Sequence[str], snippet_budget: int,
    ) -> Context: ...  # fmt: skip

    def encode(self, ctx: Context) -> tuple[Any, str]:
        """The context's state for ``span_step`` and how much of it was cached: "hit", "partial", "miss"."""
        ...

    def tokens_starting_with(self, text: str) -> torch.Tensor: ...

    def alternatives_state(self, ctx: Context, state: Any, n: int) -> tuple[Any, SpecialIds, bool] | None:
        """The state for ``n`` canvases decoded as one batch, the ids they use, and whether they start
        from the answer's first step (its prediction shared); None: decode them one at a time."""
        ...


def resolve_device(settings: Settings) -> str:
    import torch

    device = settings.device
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        warnings.warn("device cuda requested but no CUDA GPU is available; using the CPU", stacklevel=3)
        return "cpu"
    return device
