"""The infill engine: text around the cursor in, completion and timings out.

Everything slow (loading, quantizing, thread set-up, lookup tables) happens in
the constructor; ``complete`` is the hot path: build the context, take its
keys/values from the cache (encoding only the tokens the cache lacks), run a
few refinement steps on the span canvas, detokenize, post-process.  Alternatives (an invoked
completion) ride along: the same decode, then the sampled canvases as one batch on the same cached
context, starting from the first step's prediction (see ``diffusion.py``).

Two model adapters: our own model directory (``model.py``, or its ONNX export) and a
transformers directory of a public diffusion model (``hf_model.py``), chosen by the
directory's config.json.  Decoding (``diffusion.py``) is the same for both.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from .config import OPTIONS, Settings
from .context import build_context
from .context_cache import ContextCache
from .diffusion import Cancelled, DecodeSettings, SpecialIds, diffuse, expand_kv, span_tokens
from .drafts import MAX_LINE, Draft, LineTable, PreviousCompletions, draft_tokens, find_drafts
from .errors import CelerisError
from .hardware import cpu_has_bf16_units
from .hf_model import is_transformers_dir
from .model import quantize_int8
from .model_dir import default_model_dir, load_model_dir
from .postprocess import choose_mode, postprocess
from .traced import TracedModel

__all__ = ["Cancelled", "Completion", "Engine"]

MASKED_SLOT = "\u2591"  # how canvas_text shows a slot the model has not committed yet
DECODE_KEYS = ("steps", "threshold", "eos_penalty", "eos_penalty_line", "canvas_line", "canvas_block", "prefix_tokens")
# Alternatives are drawn at this temperature among each slot's likeliest tokens (the tail of a small
# model's distribution is noise, and a race over the whole vocabulary costs ~5 ms per canvas and step).
ALTERNATIVE_TEMPERATURE = 0.8
ALTERNATIVE_TOP_K = 16


@dataclass
class Completion:
    text: str
    mode: str
    steps: int
    tokens: int
    cache: str  # "hit", "partial" or "miss"
    context_tokens: int
    timings_ms: dict = field(default_factory=dict)  # per phase; "steps" holds each refinement step
    raw: str = ""  # the decoded span before post-processing, starting with ``heal``
    heal: str = ""  # text cut from before the cursor that the span rewrites (token healing)
    snippet_tokens: int = 0  # context tokens taken by snippets from other files
    draft: dict | None = None  # the draft offered: its source, its tokens, how many the model kept
    alternatives: tuple[str, ...] = ()  # sampled completions, as ``text`` (they may repeat it or each other)


def has_int8_kernels() -> bool:
    quantized = torch.backends.quantized
    return quantized.engine != "none" and quantized.engine in quantized.supported_engines


class Engine:
    def __init__(self, settings: Settings, trace_in_background: bool = False) -> None:
        """``trace_in_background``: answer with the eager model at once and switch to the traced
        graphs (about a second of work) when they are ready; for a server that should be ready soon."""
        path = Path(settings.model).expanduser() if settings.model else default_model_dir()
        device = settings.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        elif device == "cuda" and not torch.cuda.is_available():
            warnings.warn("device cuda requested but no CUDA GPU is available; using the CPU", stacklevel=2)
            device = "cpu"
        if settings.threads:
            torch.set_num_threads(settings.threads)
        self.hf = None
        hf = is_transformers_dir(path)
        # auto: int8 for our own models on the CPU (about 1.5x faster than fp32 with HumanEval figures
        # within noise of it, and flat memory: see the README); fp32 elsewhere.
        quant = settings.quant
        if quant == "auto":
            int8 = device == "cpu" and settings.backend != "onnx" and not hf and has_int8_kernels()
            quant = "int8" if int8 else "none"
        if hf:
            self._init_transformers(path, device, settings, quant)
            return
        loaded = load_model_dir(path, device=device)
        self.recommended = {k: v for k, v in loaded.meta.get("decode", {}).items() if k in DECODE_KEYS}
        self.path = path
        self.use_settings(settings)
        self.device = device
        self.tok = tok = loaded.tokenizer
        self.model = loaded.model
        self.meta = loaded.meta
        self.max_context = loaded.config.max_positions - loaded.config.max_canvas
        self.max_canvas = loaded.config.max_canvas
        self.quant = quant
        self.backend = "torch"
        if settings.backend == "onnx":
            self._use_onnx(loaded, path, device, settings, quant)
        if self.backend == "onnx":
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
                warnings.warn("this CPU has no bf16 matrix units (AMX): quant bf16 will be slow", stacklevel=2)
            self.model = self.model.to(torch.bfloat16)
        unused = range(tok.vocab_size, loaded.config.vocab_size)
        self.ids = SpecialIds(tok.mask_id, tok.eos_id, (tok.mask_id, tok.suf_id, tok.pre_id, tok.file_id, *unused))
        self.cache = ContextCache(capacity=4)  # about 5 MB each at the full context
        self.lock = threading.Lock()
        self.previous = PreviousCompletions()  # earlier answers, drafts for the same line
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
        self._starts_line = torch.from_numpy(starts_line).to(self.device)
        self.tracer: threading.Thread | None = None
        if self.backend == "torch" and settings.trace:
            if trace_in_background:
                # Not a daemon: interpreter shutdown waits for it (killing it inside TorchScript aborts).
                self.tracer = threading.Thread(target=self._trace, args=(device,), name="celeris-trace")
                self.tracer.start()
            else:
                self._trace(device)

    def _trace(self, device: str) -> None:
        try:
            traced = TracedModel(self.model, device, self.tok.mask_id)
        except Exception as exc:  # an odd platform or model: the eager model gives the same answers
            warnings.warn(f"could not trace the model ({exc}); running it eagerly", stacklevel=2)
            return
        with self.lock:
            self.model = traced

    def _init_transformers(self, path: Path, device: str, settings: Settings, quant: str) -> None:
        """A public diffusion model through transformers: no token healing, no snippets, and
        nothing cached across requests (see hf_model.py)."""
        from .hf_model import HfDiffusionModel

        if settings.backend == "onnx":
            warnings.warn("the onnx backend serves our own model format only; using torch", stacklevel=3)
        self.hf = self.model = HfDiffusionModel(path, device, quant, settings.trust_remote_code)
        self.recommended = {}
        self.path = path
        self.use_settings(settings)
        self.device = device
        self.tok = self.model.tok
        self.meta = {"family": self.model.family.name, "parameters": self.model.params}
        self.max_canvas = max(OPTIONS["canvas_block"].maximum, OPTIONS["canvas_line"].maximum)
        self.max_context = self.model.max_positions - self.max_canvas - 1
        self.quant = quant
        self.backend = "torch"
        self.ids = self.model.ids
        self.cache = ContextCache(capacity=0)  # its stats only: every request is a miss
        self.lock = threading.Lock()

    def use_settings(self, settings: Settings) -> None:
        """Take new settings (those that need no reload). Decoding settings the model recommends
        (tuned on validation data) replace built-in defaults only, never a value the user set."""
        tuned = {k: v for k, v in self.recommended.items() if settings.source(k) == "default"}
        self.settings = settings.with_overrides(tuned, f"{self.path}/config.json (decode)") if tuned else settings

    def _use_onnx(self, loaded, path: Path, device: str, settings: Settings, quant: str) -> None:
        from .model_dir import WEIGHTS
        from .onnx_backend import OnnxModel

        if quant in ("fp16", "bf16"):
            raise CelerisError(f"quant {quant} is not offered by the onnx backend; use none or int8")
        try:
            self.model = OnnxModel(loaded.model, path / WEIGHTS, device, quant, settings.threads)
        except CelerisError as exc:
            warnings.warn(f"{exc}; using the torch backend instead", stacklevel=3)
            return
        self.backend = "onnx"
        self.onnx_device = device
        self.device = "cpu"  # the engine's own tensors; ONNX Runtime moves data to its provider

    def tokens_starting_with(self, text: str) -> torch.Tensor:
        head = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
        n = min(len(head), self._token_matrix.shape[1])
        ok = (self._token_len >= n) & (self._token_matrix[:, :n] == head[:n]).all(axis=1)
        return torch.from_numpy(ok).to(self.device)

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
        key = np.asarray(tokens, dtype=np.int64)
        past, n = self.cache.lookup(key)
        if past is not None and n == len(tokens):
            return past, "hit"
        new = torch.tensor([tokens[n:]], dtype=torch.long, device=self.device)
        _, kv = self.model.encode_context(new, past=past)
        self.cache.store(key, kv)
        return kv, "miss" if past is None else "partial"

    def complete(
        self,
        prefix: str,
        suffix: str,
        mode: str | None = None,
        max_tokens: int | None = None,
        steps: int | None = None,
        deadline_ms: float | None = None,
        should_cancel=None,
        threshold: float | None = None,
        file_start: bool = True,
        file_end: bool = True,
        temperature: float | None = None,
        seed: int | None = None,
        snippets: Sequence[str] = (),
        lines: LineTable | None = None,
        source: str | None = None,
        alternatives: int = 1,
        on_step=None,
        drafts: Sequence[Draft] = (),
    ) -> Completion:
        """Complete at the cursor between ``prefix`` and ``suffix``.

        ``deadline_ms`` (from the call) makes the answer anytime: the remaining slots are
        committed when it passes.  ``should_cancel()`` is asked between steps; yes raises
        ``Cancelled``.  Safe to call from several threads (one runs the model at a time).
        ``file_start``/``file_end`` say whether ``prefix``/``suffix`` reach the file's start/end
        (callers may pass a slice of a huge document around the cursor).  ``snippets``: text
        from other files that may help, most relevant first.  ``lines``: the workspace's lines, for
        drafts (``source`` is the document's key there, left out of its own drafts); ``drafts``: cheaper
        drafts found by the caller (the language server's typing cache), tried first.
        ``alternatives`` > 1: also that many completions less one, sampled (``Completion.alternatives``);
        the answer itself is the same as without them.
        ``on_step(step, text)``, when given, sees the whole canvas as text after every refinement
        step (see ``canvas_text``), before post-processing.
        """
        s = self.settings
        t0 = time.perf_counter()
        mode = choose_mode(prefix, mode or s.mode)
        canvas = max_tokens or (s.canvas_line if mode == "line" else s.canvas_block)
        canvas = max(1, min(canvas, int(self.max_canvas)))
        budget_suffix = min(s.suffix_tokens, self.max_context // 4)
        budget_prefix = min(s.prefix_tokens, self.max_context - budget_suffix - 4)
        budget_snippets = min(s.snippet_tokens, self.max_context - budget_suffix - budget_prefix - 4)
        if self.hf is not None:
            ctx = self.hf.context(prefix, suffix, budget_prefix, budget_suffix)
        else:
            ctx = build_context(
                self.tok,
                prefix,
                suffix,
                budget_prefix,
                budget_suffix,
                file_start=file_start,
                file_end=file_end,
                snippets=snippets,
                snippet_budget=budget_snippets,
            )
        first_allowed = self.tokens_starting_with(ctx.heal) if ctx.heal else None
        if mode == "line" and self.hf is None and not prefix[prefix.rfind("\n") + 1 :].strip():
            # At a blank line an answer that first ends the line would be empty after post-processing.
            first_allowed = self._starts_line if first_allowed is None else first_allowed & self._starts_line
        settings = DecodeSettings(
            steps=steps or s.steps,
            threshold=s.threshold if threshold is None else threshold,
            eos_penalty=s.eos_penalty_line if mode == "line" and s.eos_penalty_line is not None else s.eos_penalty,
            temperature=s.temperature if temperature is None else temperature,
            seed=s.seed if seed is None else seed,
        )
        t_draft0 = time.perf_counter()
        offers, draft_ids = [], None
        if s.drafts and settings.temperature == 0 and self.hf is None:
            cheap = (*drafts, *self.previous.drafts(source, prefix))
            offers = find_drafts(prefix, suffix, lines, source, s.draft_candidates, cheap)
            line = "" if "\n" in ctx.heal else prefix[prefix.rfind("\n") + 1 : len(prefix) - len(ctx.heal)][-MAX_LINE:]
            # A line ends the span; a block's first line is drafted and the model writes the rest.
            end, tail = ([self.ids.eos], "") if mode == "line" else ([], "\n")
            draft_ids = [
                torch.tensor((draft_tokens(self.tok.encode, line, ctx.heal + d.text + tail) + end)[:canvas])
                for d in offers
            ] or None
        t_draft = time.perf_counter()
        kept: list[int] = []
        chosen: list[int] = []
        first = [] if alternatives > 1 else None  # the first step's prediction, for the alternatives
        report = None
        if on_step is not None:

            def report(step: int, x: torch.Tensor) -> None:
                on_step(step, self.canvas_text(x[0], ctx.heal))

        deadline = None if deadline_ms is None else t0 + deadline_ms / 1000.0
        should_stop = None if deadline is None else (lambda: time.perf_counter() >= deadline)
        t1 = time.perf_counter()
        with self.lock, torch.inference_mode():
            if should_cancel is not None and should_cancel():
                raise Cancelled
            t_locked = time.perf_counter()
            if self.hf is not None:
                kv, cache_state = self.hf.begin(ctx), "miss"
                self.cache.stats.misses += 1
            else:
                kv, cache_state = self._context_kv(ctx.tokens)
            t2 = time.perf_counter()
            step_times: list[float] = []
            out, ran = diffuse(
                self.model,
                kv,
                canvas,
                self.ids,
                settings,
                should_stop,
                should_cancel,
                first_allowed,
                step_times,
                draft_ids,
                s.draft_threshold,
                kept,
                first_probs=first,
                on_step=report,
                draft_veto=s.draft_veto,
                draft_conditioned=s.draft_batch,
                draft_chosen=chosen,
            )
            t3 = time.perf_counter()
            if first is not None:
                sampled = replace(
                    settings, temperature=ALTERNATIVE_TEMPERATURE, top_k=ALTERNATIVE_TOP_K, seed=settings.seed or 0
                )
                rows = self._alternatives(
                    kv, ctx, canvas, sampled, alternatives - 1, first, first_allowed, mode, should_stop, should_cancel
                )
        t_alt = time.perf_counter()
        span = span_tokens(out[0], self.ids.eos)
        raw = self.tok.decode(span)
        after_cursor = raw[len(ctx.heal) :] if raw.startswith(ctx.heal) else raw
        t4 = time.perf_counter()
        text = postprocess(after_cursor, prefix, suffix, mode)
        others = () if first is None else tuple(self._text(row, ctx.heal, prefix, suffix, mode) for row in rows)
        t5 = time.perf_counter()
        timings = {
            "tokenize": (t_draft0 - t0) * 1e3,
            "draft": (t_draft - t_draft0) * 1e3,
            "queue": (t_locked - t1) * 1e3,
            "context_encode": (t2 - t_locked) * 1e3,
            "refine": (t3 - t2) * 1e3,
            "detokenize": (t4 - t_alt) * 1e3,
            "postprocess": (t5 - t4) * 1e3,
            "total": (t5 - t0) * 1e3,
        }
        timings["steps"] = [round(t * 1e3, 3) for t in step_times]
        if first is not None:
            timings["alternatives"] = (t_alt - t3) * 1e3  # their decode; their post-processing is in postprocess
        offered = None
        if offers:
            pick = chosen[0] if chosen else 0
            offered = {
                "source": offers[pick].source,
                "votes": offers[pick].count,
                "tokens": int(draft_ids[pick].numel()),
                "kept": kept[0] if kept else 0,
                "candidates": len(offers),
            }
        self.previous.record(source, prefix, text)
        return Completion(
            text, mode, ran, len(span), cache_state, len(ctx.tokens), timings, raw, ctx.heal, ctx.snippet_tokens,
            offered, others,
        )  # fmt: skip

    def _alternatives(
        self, kv, ctx, canvas: int, settings: DecodeSettings, n: int, first: list, first_allowed, mode: str,
        should_stop, should_cancel,
    ) -> torch.Tensor:  # fmt: skip
        """``n`` sampled canvases (n, canvas) of the context whose state ``kv`` the first decode used,
        from that decode's first step: one batch sharing the cached context's keys/values, or one
        canvas at a time where the model's graphs take a single canvas (the ONNX backend)."""
        # An alternative never starts by ending the span (nor a line by ending the line): it would be empty.
        allowed = torch.ones(first[0].shape[-1], dtype=torch.bool, device=first[0].device)
        allowed[self.ids.eos] = False
        if mode == "line" and self.hf is None:
            allowed &= self._starts_line
        if first_allowed is not None:
            allowed &= first_allowed

        def decode(state, one: DecodeSettings) -> torch.Tensor:
            return diffuse(self.model, state, canvas, self.ids, one, should_stop, should_cancel, allowed,
                           first_probs=first)[0]  # fmt: skip

        if self.hf is not None:
            # Its end tokens all end the span, their logits merged on the first; greedy decoding never
            # picks the others, but a draw could: here they are banned, so the first step is drawn anew.
            ids = replace(self.ids, banned=(*self.ids.banned, *self.hf.end_ids[1:]))
            state = self.hf.begin(ctx, batch=n)
            return diffuse(self.model, state, canvas, ids, settings, should_stop, should_cancel, allowed)[0]
        if getattr(self.model, "batched", True):  # False: the ONNX graphs, or a trace that froze the batch size
            return decode(expand_kv(kv, n), settings)
        return torch.cat([decode(kv, replace(settings, seed=settings.seed + i)) for i in range(n)])

    def _text(self, row: torch.Tensor, heal: str, prefix: str, suffix: str, mode: str) -> str:
        """A canvas as the text an editor shows (as for the answer in ``complete``)."""
        raw = self.tok.decode(span_tokens(row, self.ids.eos))
        return postprocess(raw[len(heal) :] if raw.startswith(heal) else raw, prefix, suffix, mode)
