"""The infill transformer: one file, plain PyTorch.

Sequence layout for one request::

    [SUF] suffix... [PRE] prefix...  |  slot_0 slot_1 ... slot_{C-1}
    <----- context: causal ------->     <-- span canvas: bidirectional -->

Context tokens attend causally, so typing at the cursor only appends to the
context and its keys/values can be cached and extended.  The span's slots
attend to the whole context and to each other.  Each refinement step of the
diffusion decoder runs only the slots against the cached context keys/values.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 8192
    d_model: int = 256
    n_layers: int = 6
    n_heads: int = 4
    mlp_ratio: int = 4
    max_positions: int = 1024  # context + canvas
    max_canvas: int = 64
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown model config keys: {sorted(unknown)}")
        return cls(**data)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


# One layer's cached keys and values: (batch, heads, time, head_dim) each.
KV = tuple[torch.Tensor, torch.Tensor]


def rotary_tables(cfg: ModelConfig) -> tuple[torch.Tensor, torch.Tensor]:
    half = cfg.head_dim // 2
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(half, dtype=torch.float32) / half))
    angles = torch.outer(torch.arange(cfg.max_positions, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate (B, H, T, D) by per-position tables of shape (T, D/2)."""
    x1, x2 = x.chunk(2, dim=-1)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        past: KV | None,
        causal: bool,
    ) -> tuple[torch.Tensor, KV]:
        """Returns the output and this call's own keys/values (not the past's)."""
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        new_kv = (k, v)
        mask = None
        if past is not None:
            p = past[0].shape[2]
            k = torch.cat((past[0], k), dim=2)
            v = torch.cat((past[1], v), dim=2)
            if causal:
                # New context tokens see all of the past and causally among themselves. (Built from
                # positions, not Python numbers, so that a traced graph follows the lengths.)
                mask = torch.arange(p + t, device=x.device) <= torch.arange(p, p + t, device=x.device)[:, None]
            causal = False
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
        return self.proj(y.transpose(1, 2).reshape(b, t, d)), new_kv


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.up = nn.Linear(cfg.d_model, cfg.mlp_ratio * cfg.d_model, bias=False)
        self.down = nn.Linear(cfg.mlp_ratio * cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.norm1 = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.attn = Attention(cfg)
        self.norm2 = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, past: KV | None, causal: bool) -> tuple[torch.Tensor, KV]:
        a, kv = self.attn(self.norm1(x), cos, sin, past, causal)
        x = x + a
        return x + self.mlp(self.norm2(x)), kv


class InfillModel(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.slot_embed = nn.Embedding(cfg.max_canvas, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        # The output layer is the embedding, transposed; inference may put a module of its own here
        # (an int8 copy: see ``quantize_int8``).
        self.head: nn.Module | None = None
        cos, sin = rotary_tables(cfg)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.apply(self._init_weights)
        # Scaled init of residual projections (GPT-2 / nanoGPT).
        for name, p in self.named_parameters():
            if name.endswith("proj.weight") or name.endswith("down.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layers))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        if self.head is not None:
            return self.head(self.norm(h))
        return F.linear(self.norm(h), self.embed.weight)  # tied output layer

    def _tables(self, start: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        end = start + length
        if end > self.cfg.max_positions:
            raise ValueError(f"sequence of {end} positions exceeds max_positions={self.cfg.max_positions}")
        return self.rope_cos[start:end], self.rope_sin[start:end]

    def encode_context(self, ids: torch.Tensor, past: list[KV] | None = None) -> tuple[torch.Tensor, list[KV]]:
        """Run context tokens causally, after an optional cached past.

        Returns the hidden states of the new tokens and the full keys/values
        (past plus new) for every layer.
        """
        start = 0 if past is None else past[0][0].shape[2]
        cos, sin = self._tables(start, ids.shape[1])
        h = self.embed(ids)
        kvs: list[KV] = []
        for i, block in enumerate(self.blocks):
            layer_past = None if past is None else past[i]
            h, kv = block(h, cos, sin, layer_past, causal=True)
            if layer_past is not None:
                kv = (torch.cat((layer_past[0], kv[0]), 2), torch.cat((layer_past[1], kv[1]), 2))
            kvs.append(kv)
        return h, kvs

    def span_step(self, slot_ids: torch.Tensor, context_kv: list[KV]) -> torch.Tensor:
        """One refinement step: logits for every canvas slot, given the context."""
        c = slot_ids.shape[1]
        ctx_len = context_kv[0][0].shape[2]
        cos, sin = self._tables(ctx_len, c)
        h = self.embed(slot_ids) + self.slot_embed.weight[:c]
        for block, kv in zip(self.blocks, context_kv):
            h, _ = block(h, cos, sin, kv, causal=False)
        return self.logits(h)

    def forward(self, context: torch.Tensor, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Training pass: (context logits, slot logits) for a batch of equal-length samples."""
        b, t = context.shape
        c = slots.shape[1]
        cos, sin = self._tables(0, t + c)
        hc = self.embed(context)
        hs = self.embed(slots) + self.slot_embed.weight[:c]
        for block in self.blocks:
            hc, kv = block(hc, cos[:t], sin[:t], None, causal=True)
            hs, _ = block(hs, cos[t:], sin[t:], kv, causal=False)
        return self.logits(hc), self.logits(hs)


def quantize_int8(model: InfillModel) -> InfillModel:
    """Dynamic int8 quantization of every linear layer, the tied output layer included (it holds
    about a third of a refinement step's multiply-adds on a line canvas). Weights get one scale per
    output row: with one scale per matrix, the output layer's rows (token embeddings of very different
    norms) lost enough precision to leave 16% of multi-line answers empty instead of 11%."""
    from torch.ao.quantization import per_channel_dynamic_qconfig

    head = nn.Linear(model.cfg.d_model, model.cfg.vocab_size, bias=False)
    head.weight = model.embed.weight
    model.head = head
    return torch.ao.quantization.quantize_dynamic(model, {nn.Linear: per_channel_dynamic_qconfig})


def flatten_kv(kv: list[KV]) -> tuple[torch.Tensor, ...]:
    """Per-layer (keys, values) as one flat tuple k0, v0, k1, v1, ...: how graphs take them."""
    return tuple(t for pair in kv for t in pair)


def pair_kv(tensors) -> list[KV]:
    return list(zip(tensors[0::2], tensors[1::2]))


class FlatSpanStep(nn.Module):
    """``span_step`` with the keys/values as flat arguments, for graph capture (ONNX export, tracing)."""

    def __init__(self, model: InfillModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, slots: torch.Tensor, *kv: torch.Tensor) -> torch.Tensor:
        return self.model.span_step(slots, pair_kv(kv))


class FlatContextEncode(nn.Module):
    """``encode_context`` with flat keys/values in and out (no past arguments: a fresh context)."""

    def __init__(self, model: InfillModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor, *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return flatten_kv(self.model.encode_context(ids, pair_kv(past) if past else None)[1])
