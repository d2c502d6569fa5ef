"""One refinement step for many requests' span canvases in one forward pass (the server's dynamic batching).

Every row is one canvas with a context of its own, of any length.  The context keys/values of the
rows live in one buffer per layer, ``(rows, heads, W + context, head_dim)``: the slots' own keys and
values first (``W`` = the model's largest canvas, rewritten by every step), then the row's context
(copied in once, when the row joins).  An attention mask hides, per row, the slots past its canvas
and the context past its length; rotary positions are per row (its context length, then the slots).
A row that leaves is replaced by the last row, so the active rows are always the buffer's first ones.

Everything but attention runs on the rows' slots packed one after another (no padding).

With int8 dynamic quantization a linear layer quantizes its input with one scale per call: batching
the rows into one call would quantize each with the batch's scale, and answers would drift from those
of one request at a time; even attention's last-bit differences (another summation order over the
padded keys) move some activations across a rounding step of the next layer's quantization.  So a
quantized model runs ``exact``: its linear layers and attention once per row, on the very tensors an
unbatched step has, and only the rest (embeddings, norms, rotary, activations) once per batch: answers
are those of one request at a time, bit for bit, and the batch saves little.  A float model (fp32,
fp16, bf16) runs everything once per batch, differing from one request at a time in the last bits.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear

from celeris_complete.model.network import KV, InfillModel, apply_rotary


def eager_model(model) -> InfillModel | None:
    """The plain module behind an engine's model (traced graphs keep it as ``.model``), or None for
    adapters this batcher cannot drive (ONNX, transformers)."""
    inner = getattr(model, "model", model)
    return inner if isinstance(inner, InfillModel) else None


class BatchStep:
    def __init__(self, model: InfillModel, capacity: int, mask_id: int) -> None:
        cfg = model.cfg
        self.model = model
        self.capacity = capacity
        self.mask_id = mask_id
        self.width = cfg.max_canvas
        self.room = cfg.max_positions  # the context never reaches it (the engine leaves room for the canvas)
        self.lengths: list[int] = []  # context length of each active row
        self.keys: torch.Tensor | None = None  # (layers, capacity, heads, width + room, head_dim), made at first use
        self.values: torch.Tensor | None = None
        # Int8 dynamic quantization: every row alone through the linear layers and attention (see above).
        self.exact = any(isinstance(mod, DynamicQuantizedLinear) for mod in model.modules())

    @property
    def rows(self) -> int:
        return len(self.lengths)

    def add(self, kv: list[KV]) -> int:
        """A row for a context's keys/values (batch 1); its index."""
        if self.rows >= self.capacity:
            raise RuntimeError("the batch is full")
        k0 = kv[0][0]
        if self.keys is None or self.keys.dtype != k0.dtype or self.keys.device != k0.device:
            shape = (len(kv), self.capacity, k0.shape[1], self.width + self.room, k0.shape[3])
            self.keys = torch.zeros(shape, dtype=k0.dtype, device=k0.device)
            self.values = torch.zeros_like(self.keys)
        row, length, w = self.rows, k0.shape[2], self.width
        for layer, (k, v) in enumerate(kv):
            self.keys[layer, row, :, w : w + length] = k[0]
            self.values[layer, row, :, w : w + length] = v[0]
        self.lengths.append(length)
        return row

    def remove(self, row: int) -> None:
        """Drop a row; the last row takes its place (callers move their own record the same way)."""
        last = self.rows - 1
        if row != last:
            w, length = self.width, self.lengths[last]
            self.keys[:, row, :, w : w + length] = self.keys[:, last, :, w : w + length]
            self.values[:, row, :, w : w + length] = self.values[:, last, :, w : w + length]
            self.lengths[row] = length
        self.lengths.pop()

    def clear(self) -> None:
        self.lengths.clear()

    def step(self, slots: list[torch.Tensor]) -> list[torch.Tensor]:
        """Logits (1, C_i, vocabulary) for each row's canvas ids (1, C_i), rows in order."""
        m = self.model
        b = len(slots)
        assert b == self.rows, "one canvas per active row"
        device = slots[0].device
        sizes = [s.shape[1] for s in slots]
        c = max(sizes)
        if c > self.width:
            raise ValueError(f"a canvas of {c} slots exceeds the model's {self.width}")
        size = torch.tensor(sizes, device=device)
        length = torch.tensor(self.lengths, device=device)
        starts = torch.cumsum(size, 0) - size
        j = torch.arange(c, device=device)
        # Packed slot n = (row, slot); padded (row, j) reads packed slot starts[row] + min(j, size - 1).
        valid = j[None, :] < size[:, None]  # (b, c)
        gather = (starts[:, None] + torch.minimum(j[None, :], size[:, None] - 1)).reshape(-1)
        scatter = valid.reshape(-1).nonzero().squeeze(1)  # padded flat index of each packed slot
        ids = torch.cat([s[0] for s in slots])
        slot_of = (torch.arange(ids.numel(), device=device) - starts.repeat_interleave(size))
        positions = (length[:, None] + j[None, :]).clamp(max=m.cfg.max_positions - 1)
        cos, sin = m.rope_cos[positions].unsqueeze(1), m.rope_sin[positions].unsqueeze(1)  # (b, 1, c, d/2)
        t = max(self.lengths)
        keys = torch.arange(self.width + t, device=device)
        visible = (keys[None, :] < size[:, None]) | (
            (keys[None, :] >= self.width) & (keys[None, :] < self.width + length[:, None])
        )
        mask = visible[:, None, None, :]  # (b, 1, 1, keys)
        h = m.embed(ids) + m.slot_embed.weight[slot_of]  # (n, d)
        heads = m.blocks[0].attn.n_heads
        d = h.shape[-1]
        for layer, block in enumerate(m.blocks):
            attn = block.attn
            qkv = self._linear(attn.qkv, block.norm1(h), sizes)
            q, k, v = qkv[gather].view(b, c, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
            if self.exact:
                y = torch.cat([self._attend_alone(layer, i, q, k, v, n) for i, n in enumerate(sizes)])
            else:
                kbuf, vbuf = self.keys[layer, :b], self.values[layer, :b]
                kbuf[:, :, :c] = k
                vbuf[:, :, :c] = v
                y = F.scaled_dot_product_attention(q, kbuf[:, :, : self.width + t], vbuf[:, :, : self.width + t], mask)
                y = y.transpose(1, 2).reshape(b * c, d)[scatter]
            h = h + self._linear(attn.proj, y, sizes)
            up = F.gelu(self._linear(block.mlp.up, block.norm2(h), sizes), approximate="tanh")
            h = h + self._linear(block.mlp.down, up, sizes)
        h = m.norm(h)
        out = self._linear(m.head, h, sizes) if m.head is not None else F.linear(h, m.embed.weight)
        return [row.unsqueeze(0) for row in out.split(sizes)]

    def _attend_alone(self, layer: int, row: int, q, k, v, n: int) -> torch.Tensor:
        """One row's attention laid out as an unbatched step lays it out (context, then slots; no mask)."""
        w, length = self.width, self.lengths[row]
        keys = torch.cat((self.keys[layer, row : row + 1, :, w : w + length], k[row : row + 1, :, :n]), dim=2)
        values = torch.cat((self.values[layer, row : row + 1, :, w : w + length], v[row : row + 1, :, :n]), dim=2)
        y = F.scaled_dot_product_attention(q[row : row + 1, :, :n], keys, values)
        return y[0].transpose(0, 1).reshape(n, -1)

    def _linear(self, layer: nn.Module, x: torch.Tensor, sizes: list[int]) -> torch.Tensor:
        if self.exact and len(sizes) > 1:
            return torch.cat([layer(part.unsqueeze(0))[0] for part in x.split(sizes)])
        return layer(x)
