"""Our own model directory (``model.py``): eager PyTorch, traced graphs (``traced.py``) or ONNX
Runtime (``onnx_backend.py``), with int8/bf16/fp16 variants.  Everything the engine offers: token
healing, snippets, the context cache (typing only appends tokens; their keys/values are reused),
drafts, alternatives as one batch (one at a time for ONNX or a trace that froze the batch size)."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from celeris_complete.backends.base import Supports
from celeris_complete.backends.trace_store import TraceStore
from celeris_complete.backends.traced import TracedModel
from celeris_complete.config import Settings
from celeris_complete.errors import CelerisError
from celeris_complete.model.context import Context, build_context
from celeris_complete.model.context_cache import ContextCache
from celeris_complete.model.diffusion import SpecialIds, expand_kv
from celeris_complete.model.directory import WEIGHTS, load_model_dir
from celeris_complete.model.network import quantize_int8
from celeris_complete.system.hardware import cpu_has_bf16_units

DECODE_KEYS = ("steps", "threshold", "eos_penalty", "eos_penalty_line", "canvas_line", "canvas_block", "prefix_tokens")


def has_int8_kernels() -> bool:
    quantized = torch.backends.quantized
    return quantized.engine != "none" and quantized.engine in quantized.supported_engines


class OurBackend:
    supports = Supports()

    def __init__(self, path: Path, device: str, settings: Settings, trace_in_background: bool = False) -> None:
        # auto: int8 on the CPU (about 1.5x faster than fp32 with HumanEval figures within noise of
        # it, and flat memory: see the README); fp32 elsewhere.
        quant = settings.quant
        if quant == "auto":
            int8 = device == "cpu" and settings.backend != "onnx" and has_int8_kernels()
            quant = "int8" if int8 else "none"
        loaded = load_model_dir(path, device=device)
        self.recommended = {k: v for k, v in loaded.meta.get("decode", {}).items() if k in DECODE_KEYS}
        self.path = path
        self.device = device
        self.tok = tok = loaded.tokenizer
        self.model = loaded.model
        self.meta = loaded.meta
        self.max_context = loaded.config.max_positions - loaded.config.max_canvas
        self.max_canvas = loaded.config.max_canvas
        self.quant = quant
        self.name = "torch"
        if settings.backend == "onnx":
            self._use_onnx(loaded, path, device, settings, quant)
        if self.name == "onnx":
            pass
        elif quant == "int8":
            if device != "cpu":
                raise CelerisError("quant int8 runs on the CPU; use fp16 on CUDA")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch's own deprecation notice for quantized tensors
                self.model = quantize_int8(self.model)
        elif quant == "fp16":
            if device == "cpu":
                raise CelerisError("quant fp16 needs a CUDA device; use int8, bf16 or none on the CPU")
            self.model = self.model.half()
        elif quant == "bf16":
            if device == "cpu" and not cpu_has_bf16_units():
                warnings.warn("this CPU has no bf16 matrix units (AMX): quant bf16 will be slow", stacklevel=3)
            self.model = self.model.to(torch.bfloat16)
        self.cache = ContextCache(capacity=4)  # about 5 MB each at the full context
        self.lock = threading.Lock()
        # Token bytes as a padded matrix, to find the tokens that start with a given text quickly.
        width = max(len(b) for b in tok.token_bytes)
        self._token_matrix = np.zeros((loaded.config.vocab_size, width), dtype=np.uint8)
        self._token_len = np.zeros(loaded.config.vocab_size, dtype=np.int64)
        for i, b in enumerate(tok.token_bytes):
            self._token_matrix[i, : len(b)] = np.frombuffer(b, dtype=np.uint8)
            self._token_len[i] = len(b)
        # What may start a line completion at a blank line: not a line break, not end-of-span.
        starts_line = np.array([not b.startswith((b"\n", b"\r")) for b in tok.token_bytes], dtype=bool)
        starts_line = np.pad(starts_line, (0, loaded.config.vocab_size - len(starts_line)))
        starts_line[tok.eos_id] = False
        self.starts_line = torch.from_numpy(starts_line).to(self.device)
        # Indentation: tokens of spaces and tabs only (see diffusion.open_line).
        blank = np.array([bool(b) and not b.strip(b" \t") for b in tok.token_bytes], dtype=bool)
        blank = torch.from_numpy(np.pad(blank, (0, loaded.config.vocab_size - len(blank)))).to(self.device)
        unused = range(tok.vocab_size, loaded.config.vocab_size)
        banned = (tok.mask_id, tok.suf_id, tok.pre_id, tok.file_id, *unused)
        self.ids = SpecialIds(tok.mask_id, tok.eos_id, banned, blank, self.starts_line)
        self.tracer: threading.Thread | None = None
        self.trace_cache = settings.trace_cache
        if self.name == "torch" and settings.trace:
            if trace_in_background:
                # Not a daemon: interpreter shutdown waits for it (killing it inside TorchScript aborts).
                self.tracer = threading.Thread(target=self._trace, args=(device,), name="celeris-trace")
                self.tracer.start()
            else:
                self._trace(device)

    def _trace(self, device: str) -> None:
        try:
            store = TraceStore.for_model(self.path / WEIGHTS, self.quant, device, self.trace_cache)
            traced = TracedModel(self.model, device, self.tok.mask_id, store)
        except Exception as exc:  # an odd platform or model: the eager model gives the same answers
            warnings.warn(f"could not trace the model ({exc}); running it eagerly", stacklevel=2)
            return
        with self.lock:
            self.model = traced

    def _use_onnx(self, loaded, path: Path, device: str, settings: Settings, quant: str) -> None:
        from celeris_complete.backends.onnx import OnnxModel

        if quant in ("fp16", "bf16"):
            raise CelerisError(f"quant {quant} is not offered by the onnx backend; use none or int8")
        try:
            self.model = OnnxModel(loaded.model, path / WEIGHTS, device, quant, settings.threads)
        except CelerisError as exc:
            warnings.warn(f"{exc}; using the torch backend instead", stacklevel=4)
            return
        self.name = "onnx"
        self.onnx_device = device
        self.device = "cpu"  # the engine's own tensors; ONNX Runtime moves data to its provider

    def context(
        self, prefix: str, suffix: str, prefix_budget: int, suffix_budget: int, file_start: bool, file_end: bool,
        snippets: Sequence[str], snippet_budget: int,
    ) -> Context:  # fmt: skip
        return build_context(
            self.tok, prefix, suffix, prefix_budget, suffix_budget, file_start=file_start, file_end=file_end,
            snippets=snippets, snippet_budget=snippet_budget,
        )  # fmt: skip

    def encode(self, ctx: Context):
        """The context's keys/values, encoding only the tokens the cache lacks."""
        tokens = ctx.tokens
        key = np.asarray(tokens, dtype=np.int64)
        past, n = self.cache.lookup(key)
        if past is not None and n == len(tokens):
            return past, "hit"
        new = torch.tensor([tokens[n:]], dtype=torch.long, device=self.device)
        _, kv = self.model.encode_context(new, past=past)
        self.cache.store(key, kv)
        return kv, "miss" if past is None else "partial"

    def tokens_starting_with(self, text: str) -> torch.Tensor:
        head = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
        n = min(len(head), self._token_matrix.shape[1])
        ok = (self._token_len >= n) & (self._token_matrix[:, :n] == head[:n]).all(axis=1)
        return torch.from_numpy(ok).to(self.device)

    def alternatives_state(self, ctx: Context, state, n: int):
        if getattr(self.model, "batched", True):  # False: the ONNX graphs, or a trace that froze the batch size
            return expand_kv(state, n), self.ids, True
        return None
