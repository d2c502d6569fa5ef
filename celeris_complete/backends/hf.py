"""A public diffusion model from a transformers directory (``hf_model.py``): no token healing, no
snippets, no drafts, and nothing cached across requests (with bidirectional attention a context's
keys/values depend on the span)."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from celeris_complete.backends.base import Supports
from celeris_complete.config import OPTIONS, Settings
from celeris_complete.model.context import Context
from celeris_complete.model.context_cache import ContextCache


class TransformersBackend:
    supports = Supports(token_healing=False, snippets=False, caching=False, drafts=False, line_rules=False)
    name = "torch"
    starts_line = None

    def __init__(self, path: Path, device: str, settings: Settings) -> None:
        from celeris_complete.backends.hf_model import HfDiffusionModel

        quant = "none" if settings.quant == "auto" else settings.quant
        if settings.backend == "onnx":
            warnings.warn("the onnx backend serves our own model format only; using torch", stacklevel=4)
        self.model = HfDiffusionModel(path, device, quant, settings.trust_remote_code)
        self.recommended: dict = {}
        self.path = path
        self.device = device
        self.tok = self.model.tok
        self.meta = {"family": self.model.family.name, "parameters": self.model.params}
        self.max_canvas = max(OPTIONS["canvas_block"].maximum, OPTIONS["canvas_line"].maximum)
        self.max_context = self.model.max_positions - self.max_canvas - 1
        self.quant = quant
        self.ids = self.model.ids
        self.cache = ContextCache(capacity=0)  # its stats only: every request is a miss
        self.lock = threading.Lock()

    def context(
        self, prefix: str, suffix: str, prefix_budget: int, suffix_budget: int, file_start: bool, file_end: bool,
        snippets: Sequence[str], snippet_budget: int,
    ) -> Context:  # fmt: skip
        return self.model.context(prefix, suffix, prefix_budget, suffix_budget)

    def encode(self, ctx: Context):
        self.cache.stats.misses += 1
        return self.model.begin(ctx), "miss"

    def tokens_starting_with(self, text: str):
        raise NotImplementedError("no token healing here")  # supports.token_healing is False: never asked

    def alternatives_state(self, ctx: Context, state, n: int):
        # Its end tokens all end the span, their logits merged on the first; greedy decoding never
        # picks the others, but a draw could: here they are banned, so the first step is drawn anew.
        ids = replace(self.ids, banned=(*self.ids.banned, *self.model.end_ids[1:]))
        return self.model.begin(ctx, batch=n), ids, False
