"""The one interface between ``Engine.complete`` and what runs the model.

A backend builds a request's context from the text around the cursor and then either lets the
engine run the refinement steps on it (``supports.steps``: it encodes the context and offers a
``model`` with ``span_step``, which ``diffusion.py`` drives), or completes the whole request itself
(a remote server).  ``Supports`` says which of the engine's features it can serve; the engine asks
it instead of asking which backend it has.  A new backend is one new ``backend_*.py`` file with a
class like those below, and one line in ``open_backend``.

- ``backend_ours.py``: our model directory (eager PyTorch, traced graphs, ONNX Runtime);
- ``backend_hf.py``: a public diffusion model from a transformers directory;
- ``backend_remote.py``: ``celeris-complete serve`` (or an OpenAI-compatible server) over HTTP.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .config import Settings

if TYPE_CHECKING:
    import threading

    import torch

    from .context import Context
    from .context_cache import ContextCache
    from .diffusion import SpecialIds


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


def open_backend(settings: Settings, trace_in_background: bool = False) -> Backend:
    """The backend the settings ask for: a remote server when ``endpoint`` is set, else the model
    directory's kind (a transformers config.json, or our own format)."""
    if settings.endpoint:
        from .backend_remote import RemoteBackend

        return RemoteBackend(settings)
    import torch

    from .hf_model import is_transformers_dir
    from .model_dir import default_model_dir

    path = Path(settings.model).expanduser() if settings.model else default_model_dir()
    device = resolve_device(settings)
    if settings.threads:
        torch.set_num_threads(settings.threads)
    if is_transformers_dir(path):
        from .backend_hf import TransformersBackend

        return TransformersBackend(path, device, settings)
    from .backend_ours import OurBackend

    return OurBackend(path, device, settings, trace_in_background)
