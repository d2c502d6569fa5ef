"""The infill engine: text around the cursor in, completion and timings out.

Everything slow (loading, quantizing, thread set-up) happens in the
constructor; ``complete`` is the hot path: tokenize, encode the context once,
run a few refinement steps on the span canvas against the cached context,
detokenize, post-process.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .config import Settings
from .context import build_context
from .diffusion import DecodeSettings, SpecialIds, diffuse, span_tokens
from .errors import CelerisError
from .model_dir import default_model_dir, load_model_dir
from .postprocess import choose_mode, postprocess


@dataclass
class Completion:
    text: str
    mode: str
    steps: int
    tokens: int
    timings_ms: dict[str, float] = field(default_factory=dict)
    raw: str = ""


class Engine:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        path = Path(settings.model).expanduser() if settings.model else default_model_dir()
        device = settings.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        elif device == "cuda" and not torch.cuda.is_available():
            warnings.warn("device cuda requested but no CUDA GPU is available; using the CPU", stacklevel=2)
            device = "cpu"
        if settings.threads:
            torch.set_num_threads(settings.threads)
        loaded = load_model_dir(path, device=device)
        self.path = path
        self.device = device
        self.tok = loaded.tokenizer
        self.model = loaded.model
        self.meta = loaded.meta
        self.max_context = loaded.config.max_positions - loaded.config.max_canvas
        if settings.quant == "int8":
            if device != "cpu":
                raise CelerisError("quant int8 runs on the CPU; use fp16 on CUDA")
            self.model = torch.ao.quantization.quantize_dynamic(self.model, {torch.nn.Linear}, dtype=torch.qint8)
        elif settings.quant == "fp16":
            if device == "cpu":
                raise CelerisError("quant fp16 needs a CUDA device; use int8 or none on the CPU")
            self.model = self.model.half()
        tok = self.tok
        self.ids = SpecialIds(tok.mask_id, tok.eos_id, (tok.mask_id, tok.suf_id, tok.pre_id, tok.file_id))

    def complete(
        self,
        prefix: str,
        suffix: str,
        mode: str | None = None,
        max_tokens: int | None = None,
        steps: int | None = None,
        deadline_ms: float | None = None,
    ) -> Completion:
        s = self.settings
        t0 = time.perf_counter()
        mode = choose_mode(prefix, mode or s.mode)
        canvas = max_tokens or (s.canvas_line if mode == "line" else s.canvas_block)
        canvas = max(1, min(canvas, self.model.cfg.max_canvas))
        budget_suffix = min(s.suffix_tokens, self.max_context // 4)
        budget_prefix = min(s.prefix_tokens, self.max_context - budget_suffix - 4)
        ctx = build_context(self.tok, prefix, suffix, budget_prefix, budget_suffix)
        t1 = time.perf_counter()
        ids = torch.tensor([ctx.tokens], dtype=torch.long, device=self.device)
        with torch.inference_mode():
            _, kv = self.model.encode_context(ids)
            t2 = time.perf_counter()
            deadline = None if deadline_ms is None else t0 + deadline_ms / 1000.0
            settings = DecodeSettings(
                steps=steps or s.steps,
                threshold=s.threshold,
                eos_penalty=s.eos_penalty,
                temperature=s.temperature,
                seed=s.seed,
            )
            should_stop = None if deadline is None else (lambda: time.perf_counter() >= deadline)
            out, ran = diffuse(self.model, kv, canvas, self.ids, settings, should_stop)
        t3 = time.perf_counter()
        span = span_tokens(out[0], self.ids.eos)
        raw = self.tok.decode(span)
        t4 = time.perf_counter()
        text = postprocess(raw, prefix, suffix, mode)
        t5 = time.perf_counter()
        timings = {
            "tokenize": (t1 - t0) * 1e3,
            "context_encode": (t2 - t1) * 1e3,
            "refine": (t3 - t2) * 1e3,
            "detokenize": (t4 - t3) * 1e3,
            "postprocess": (t5 - t4) * 1e3,
            "total": (t5 - t0) * 1e3,
        }
        return Completion(text, mode, ran, len(span), timings, raw)
