"""Public masked-diffusion code models from a local directory, through transformers.

The engine's second model adapter (``model.py`` is the first).  Both offer
``span_step(canvas_ids, state) -> logits (batch, canvas, vocab)``, so the
decoding in ``diffusion.py`` runs unchanged on either.  Here ``state`` is a
``SpanState`` holding the prefix and suffix ids; every step runs the family's
layout ``prefix [MASK]*C suffix`` through the transformers model with full
(bidirectional) attention and returns the logits for the canvas slots.

Per family: the mask id (config, else tokenizer, else a known id), whether
token i is predicted at position i-1 ("shifted": Dream, DiffuCoder, CoDA,
Open-dCoder) or at i (LLaDA), what leads the sequence, and the end-of-span
token that fills unused slots (the config's end-of-sequence token; the
tokenizer's end tokens all count as end-of-span).

Architectures transformers has natively (Qwen2, LLaMA) load without running
any code from the model directory; their attention is made bidirectional by
passing a full 4-D attention mask.  Other architectures ship their own Python
code and load only with ``trust_remote_code``.  For native architectures the
refinement steps after the first reuse the prefix/suffix keys/values of the
first (Fast-dLLM's approximate dual cache); remote-code models run the whole
sequence every step.  Nothing is cached across requests: with bidirectional
attention, a context's keys/values depend on the span.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import json
import os
import struct
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from celeris_complete.errors import CelerisError
from celeris_complete.model.context import Context
from celeris_complete.model.diffusion import SpecialIds
from celeris_complete.system.hardware import cpu_has_bf16_units

CONFIG = "config.json"
# Architectures whose transformers class is used directly, with a full attention mask (tested).
NATIVE = ("Qwen2ForCausalLM", "LlamaForCausalLM")
WINDOW_CHARS_PER_TOKEN = 16  # characters cut around the cursor per token of budget (generous)
MEMORY_OVERHEAD = 1.2  # weights times this: activations, logits, allocator slack
TRUST_FLAG = "--trust-remote-code"


@dataclass(frozen=True)
class Family:
    name: str
    label: str
    shifted: bool  # token i is predicted by the logits at position i-1
    known_mask_id: int | None  # used when neither the config nor the tokenizer names a mask token
    bos_first: bool = False  # the sequence starts with the tokenizer's BOS token


FAMILIES = {
    "dream": Family("dream", "Dream / Dream-Coder / DiffuCoder", shifted=True, known_mask_id=151666),
    "open-dcoder": Family("open-dcoder", "Open-dCoder (Qwen2 masked diffusion)", shifted=True, known_mask_id=None),
    "coda": Family("coda", "CoDA", shifted=True, known_mask_id=None),
    "llada": Family("llada", "LLaDA", shifted=False, known_mask_id=126336, bos_first=True),
}
SUPPORTED = "Dream / Dream-Coder / DiffuCoder, Open-dCoder, CoDA, LLaDA"


def read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def is_transformers_dir(path: Path) -> bool:
    """A directory whose config.json is a transformers config (not our own format)."""
    data = read_json(Path(path) / CONFIG) if Path(path).is_dir() else None
    return data is not None and "format" not in data and ("model_type" in data or "architectures" in data)


def detect_family(config: dict) -> Family:
    model_type = str(config.get("model_type", "")).lower()
    archs = [str(a) for a in config.get("architectures") or []]
    arch = archs[0] if archs else ""
    if model_type == "dream" or arch.startswith("Dream"):
        return FAMILIES["dream"]
    if model_type.startswith("llada") or arch.startswith("LLaDA"):
        return FAMILIES["llada"]
    if model_type == "coda" or arch.startswith("CoDA"):
        return FAMILIES["coda"]
    if model_type == "qwen2" or arch == "Qwen2ForCausalLM":
        return FAMILIES["open-dcoder"]
    raise CelerisError(
        f"model_type {config.get('model_type')!r} (architecture {arch or 'not given'}) is not a supported "
        f"masked-diffusion family; supported: {SUPPORTED}"
    )


def needs_remote_code(config: dict) -> bool:
    archs = config.get("architectures") or []
    return not (archs and archs[0] in NATIVE)


def resolve_mask_id(family: Family, config: dict, tokenizer) -> int:
    """The config's mask_token_id, else the tokenizer's mask token, else the family's known id."""
    for candidate in (config.get("mask_token_id"), getattr(tokenizer, "mask_token_id", None), family.known_mask_id):
        if isinstance(candidate, int) and not isinstance(candidate, bool):
            return candidate
    raise CelerisError(
        f"no mask token: {CONFIG} has no mask_token_id and the tokenizer no mask token, "
        f"so this is not a masked-diffusion model this tool can drive ({family.label})"
    )


def end_ids(config: dict, tokenizer) -> list[int]:
    """End-of-span tokens, the one that fills unused slots first: config eos, tokenizer eos, pad."""
    out: list[int] = []
    for value in (config.get("eos_token_id"), getattr(tokenizer, "eos_token_id", None), config.get("pad_token_id")):
        for i in value if isinstance(value, list) else [value]:
            if isinstance(i, int) and not isinstance(i, bool) and i not in out:
                out.append(i)
    if not out:
        raise CelerisError(f"no end-of-sequence token in {CONFIG} or the tokenizer; cannot end a span")
    return out


def safetensors_parameters(path: Path) -> int:
    """Parameters in the directory's *.safetensors files, from their headers (no weights read)."""
    files = sorted(path.glob("*.safetensors"))
    if not files:
        pickles = [p.name for p in path.glob("*.bin")] + [p.name for p in path.glob("*.pt")]
        hint = f" (found {', '.join(pickles[:3])}: pickled weights are never loaded)" if pickles else ""
        raise CelerisError(f"{path}: no *.safetensors weights{hint}")
    total = 0
    for f in files:
        try:
            with f.open("rb") as fh:
                (size,) = struct.unpack("<Q", fh.read(8))
                header = json.loads(fh.read(size))
        except (OSError, struct.error, ValueError) as exc:
            raise CelerisError(f"{f}: corrupt or not a safetensors file ({exc})") from None
        for name, info in header.items():
            if name != "__metadata__":
                n = 1
                for d in info.get("shape", []):
                    n *= int(d)
                total += n
    return total


def available_memory(device: str) -> int | None:
    """Bytes free for the model on ``device`` (None when unknown)."""
    if device == "cuda":
        free, _ = torch.cuda.mem_get_info()
        return int(free)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(path: Path, label: str, params: int, bytes_per_param: int, precision: str, device: str) -> None:
    need = int(params * bytes_per_param * MEMORY_OVERHEAD)
    have = available_memory(device)
    if have is not None and need > have:
        where = "GPU memory free" if device == "cuda" else "RAM available"
        advice = (
            "free GPU memory or use a smaller model"
            if device == "cuda"
            else "use a machine with more memory, a GPU (device cuda), or a smaller model"
        )
        raise CelerisError(
            f"{path}: this {label} model has {params / 1e9:.2f}B parameters and needs about "
            f"{need / 2**30:.1f} GiB in {precision} on {device}, but only {have / 2**30:.1f} GiB of {where}; "
            f"{advice}"
        )


@contextlib.contextmanager
def quiet_transformers():
    """No progress bars or 'model type mismatch' notices while loading (the CLI prints a completion)."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


class HfTokenizer:
    """The text side of a transformers tokenizer, as the engine uses ours: encode and decode."""

    def __init__(self, hf) -> None:
        self.hf = hf

    def encode(self, text: str) -> list[int]:
        return list(self.hf.encode(text, add_special_tokens=False)) if text else []

    def decode(self, ids) -> str:
        return self.hf.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)


@dataclass
class SpanState:
    """One request's context: prefix and suffix ids (1, n) on the model's device."""

    prefix: torch.Tensor
    suffix: torch.Tensor
    batch: int
    device: torch.device
    cache: object = None  # the dual cache: keys/values of prefix and suffix from the first step
    cached: int = 0  # how many positions the cache holds
    canvas: int = 0


class HfDiffusionModel:
    """A masked-diffusion model from a local transformers directory."""

    def __init__(self, path: Path, device: str = "cpu", quant: str = "none", trust_remote_code: bool = False) -> None:
        path = Path(path).expanduser()
        config = read_json(path / CONFIG)
        if config is None:
            raise CelerisError(f"{path / CONFIG}: missing or not valid JSON")
        self.path = path
        self.family = family = detect_family(config)
        self.remote = needs_remote_code(config)
        if self.remote and not trust_remote_code:
            auto_map = config.get("auto_map") or {}
            files = sorted({str(v).split(".")[0] + ".py" for v in auto_map.values() if isinstance(v, str)})
            arch = (config.get("architectures") or ["(none)"])[0]
            raise CelerisError(
                f"{path}: the {family.label} model's architecture {arch} is not part of transformers; it "
                f"runs Python code shipped in the model directory ({', '.join(files) or 'auto_map'}), which "
                f"is off by default. If you trust that directory, pass {TRUST_FLAG} (or set "
                f"trust_remote_code = true in the config): it runs code from {path}"
            )
        if self.remote and not config.get("auto_map"):
            raise CelerisError(f"{path / CONFIG}: architecture {config.get('architectures')} is unknown to this tool")
        try:
            import transformers
        except ImportError:
            raise CelerisError("transformers models need the transformers package: pip install -e '.[hf]'") from None

        if quant == "int8" and device != "cpu":
            raise CelerisError("quant int8 runs on the CPU; use fp16 or bf16 (none means bf16) on CUDA")
        if quant == "fp16" and device == "cpu":
            raise CelerisError("quant fp16 needs a CUDA device; use int8, bf16 or none on the CPU")
        with quiet_transformers():
            try:
                tokenizer = transformers.AutoTokenizer.from_pretrained(
                    str(path), local_files_only=True, trust_remote_code=trust_remote_code
                )
            except Exception as exc:
                raise CelerisError(f"{path}: the tokenizer does not load ({type(exc).__name__}: {exc})") from None
        self.tok = HfTokenizer(tokenizer)
        self.device = torch.device(device)
        self._special_ids(config, tokenizer)
        self.max_positions = next(
            (
                int(config[k])
                for k in ("max_position_embeddings", "max_sequence_length")
                if isinstance(config.get(k), int)
            ),
            4096,
        )

        if device == "cuda":
            dtype = torch.float16 if quant == "fp16" or not torch.cuda.is_bf16_supported() else torch.bfloat16
            self.precision, per_param = ("fp16" if dtype == torch.float16 else "bf16"), 2
        elif quant == "bf16":
            if not cpu_has_bf16_units():
                warnings.warn("this CPU has no bf16 matrix units (AMX): quant bf16 will be slow", stacklevel=3)
            dtype, self.precision, per_param = torch.bfloat16, "bf16", 2
        else:
            dtype, self.precision, per_param = torch.float32, "fp32", 4  # int8 quantizes after loading in fp32
        self.params = safetensors_parameters(path)
        check_memory(path, family.label, self.params, per_param, self.precision, device)
        with quiet_transformers():
            model = self._load(transformers, path, config, dtype, device)
        if quant == "int8":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch's own deprecation notice for quantized tensors
                model = torch.ao.quantization.quantize_dynamic(
                    model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True
                )
            self.precision = "int8"
        self.model = model.eval()
        self.dual_cache = not self.remote  # the approximate prefix/suffix reuse between steps
        if not self.remote:
            from transformers import DynamicCache

            self._cache_cls = DynamicCache
            params = inspect.signature(self.model.forward).parameters
            self._cache_kw = "cache" if "cache" in params else "past_key_values"  # transformers 5 / 4
            self._keep_kw = "logits_to_keep" if "logits_to_keep" in params else None

    def _special_ids(self, config: dict, tokenizer) -> None:
        """Mask, end-of-span (the fill token first), BOS, and the ids a slot may never hold."""
        vocab = int(config.get("vocab_size") or len(tokenizer))
        self.mask_id = resolve_mask_id(self.family, config, tokenizer)
        self.end_ids = [i for i in end_ids(config, tokenizer) if i < vocab]
        if not 0 <= self.mask_id < vocab or not self.end_ids:
            raise CelerisError(f"{self.path}: mask id {self.mask_id} or end ids outside the vocabulary of {vocab}")
        self.bos_id = getattr(tokenizer, "bos_token_id", None) if self.family.bos_first else None
        specials = set(getattr(tokenizer, "all_special_ids", []))
        for i, added in getattr(tokenizer, "added_tokens_decoder", {}).items():
            if getattr(added, "special", False):
                specials.add(int(i))
        unused = range(len(tokenizer), vocab)  # embedding rows no token maps to
        banned = sorted(({self.mask_id} | specials | set(unused)) - set(self.end_ids))
        self.ids = SpecialIds(self.mask_id, self.end_ids[0], tuple(i for i in banned if i < vocab))
        self._merge_end = torch.tensor(self.end_ids, device=self.device) if len(self.end_ids) > 1 else None

    # ---- loading ----------------------------------------------------------------------------------
    def _load(self, transformers, path: Path, config: dict, dtype, device: str):
        major = int(transformers.__version__.split(".")[0])
        kwargs = {"local_files_only": True, "use_safetensors": True, ("dtype" if major >= 5 else "torch_dtype"): dtype}
        if device == "cuda" and (major >= 5 or importlib.util.find_spec("accelerate")):
            kwargs["device_map"] = device  # straight onto the GPU
        try:
            if self.remote:
                auto_map = config["auto_map"]
                auto = transformers.AutoModel if "AutoModel" in auto_map else transformers.AutoModelForCausalLM
                model = auto.from_pretrained(str(path), trust_remote_code=True, **kwargs)
            else:
                cls = getattr(transformers, config["architectures"][0])
                cfg = cls.config_class.from_pretrained(str(path), local_files_only=True)
                model = cls.from_pretrained(str(path), config=cfg, attn_implementation="sdpa", **kwargs)
        except CelerisError:
            raise
        except Exception as exc:
            raise CelerisError(f"{path}: the model does not load ({type(exc).__name__}: {exc})") from None
        if device == "cuda" and next(model.parameters()).device.type != "cuda":
            model = model.to(device)
        return model

    # ---- one request ------------------------------------------------------------------------------
    def context(self, prefix: str, suffix: str, prefix_budget: int, suffix_budget: int) -> Context:
        """Token windows around the cursor: ``tokens`` is the sequence's head (up to the span) and its
        tail (after it); ``prefix_tokens`` says where the span goes.  No token healing, no snippets."""
        start = max(0, len(prefix) - prefix_budget * WINDOW_CHARS_PER_TOKEN)
        if start > 0 and (newline := prefix.find("\n", start)) >= 0:
            start = newline + 1  # begin on a line, so the first token is a whole one
        pre = self.tok.encode(prefix[start:])[-prefix_budget:] if prefix_budget > 0 else []
        window = suffix[: suffix_budget * WINDOW_CHARS_PER_TOKEN]
        if len(window) < len(suffix) and (newline := window.rfind("\n")) > 0:
            window = window[: newline + 1]
        suf = self.tok.encode(window)[:suffix_budget] if suffix_budget > 0 else []
        lead = []
        if self.bos_id is not None:
            lead = [self.bos_id]
        elif self.family.shifted and not pre:
            lead = [self.ids.eos]  # slot 0 is predicted at the position before it: start a document
        head = lead + pre
        return Context(head + suf, len(head), len(suf))

    def begin(self, ctx: Context, batch: int = 1) -> SpanState:
        ids = torch.tensor(ctx.tokens, dtype=torch.long, device=self.device).unsqueeze(0)
        cut = ctx.prefix_tokens
        return SpanState(ids[:, :cut], ids[:, cut:], batch, self.device)

    def layout(self, x: torch.Tensor, state: SpanState) -> torch.Tensor:
        """The family's whole sequence: prefix, canvas, suffix (the natural order)."""
        b = x.shape[0]
        return torch.cat((state.prefix.expand(b, -1), x, state.suffix.expand(b, -1)), dim=1)

    def canvas_logit_positions(self, state: SpanState, canvas: int) -> torch.Tensor:
        """Where in the natural sequence the logits for each canvas slot are read."""
        start = state.prefix.shape[1] - int(self.family.shifted)
        return torch.arange(start, start + canvas, device=self.device)

    @torch.no_grad()
    def span_step(self, x: torch.Tensor, state: SpanState) -> torch.Tensor:
        """Logits (batch, canvas, vocab) for the canvas slots ``x``, given the request's context."""
        c = x.shape[1]
        if self.remote:
            out = self.model(input_ids=self.layout(x, state))
            logits = out.logits if hasattr(out, "logits") else out[0]
            logits = logits[:, self.canvas_logit_positions(state, c)]
        else:
            logits = self._native_step(x, state)
        logits = logits.float()
        if self._merge_end is not None:  # every end token ends the span: their probabilities add up
            logits[..., self.ids.eos] = torch.logsumexp(logits[..., self._merge_end], dim=-1)
        return logits

    def _native_step(self, x: torch.Tensor, state: SpanState) -> torch.Tensor:
        """Run "stable" positions (prefix up to the last one a slot reads, suffix) first and the
        "active" ones (the rest of the prefix, the canvas) last, with their true position ids: with
        full attention the order does not matter, and the active logits come last
        (``logits_to_keep``).  With the dual cache, later steps run only the active positions
        against the stable positions' keys/values from the first step."""
        b, c = x.shape
        p, s = state.prefix.shape[1], state.suffix.shape[1]
        a0 = p - int(self.family.shifted)
        active_ids = torch.cat((state.prefix[:, a0:].expand(b, -1), x), dim=1)
        active_pos = torch.arange(a0, p + c, device=self.device)
        kwargs = {}
        if self.dual_cache and state.cache is not None and state.canvas == c:
            cache = state.cache
            if hasattr(cache, "crop") and cache.get_seq_length() > state.cached:
                cache.crop(state.cached - cache.get_seq_length())  # drop the last step's active positions
            ids, pos, keys = active_ids, active_pos, state.cached + active_ids.shape[1]
            kwargs = {self._cache_kw: cache, "use_cache": True}
        else:
            stable_ids = torch.cat((state.prefix[:, :a0], state.suffix), dim=1).expand(b, -1)
            stable_pos = torch.cat(
                (torch.arange(a0, device=self.device), torch.arange(p + c, p + c + s, device=self.device))
            )
            ids = torch.cat((stable_ids, active_ids), dim=1)
            pos = torch.cat((stable_pos, active_pos))
            keys = ids.shape[1]
            if self.dual_cache:
                try:
                    cache = self._cache_cls(config=self.model.config)
                except TypeError:
                    cache = self._cache_cls()
                state.cache, state.cached, state.canvas = cache, stable_ids.shape[1], c
                kwargs = {self._cache_kw: cache, "use_cache": True}
            else:
                kwargs = {"use_cache": False}
        full = torch.zeros(b, 1, ids.shape[1], keys, dtype=self.model_dtype(), device=self.device)
        if self._keep_kw:
            kwargs[self._keep_kw] = active_ids.shape[1]
        out = self.model(input_ids=ids, position_ids=pos.unsqueeze(0).expand(b, -1), attention_mask=full, **kwargs)
        return out.logits[:, -active_ids.shape[1] :][:, :c]

    def model_dtype(self) -> torch.dtype:
        return self.model.get_input_embeddings().weight.dtype
