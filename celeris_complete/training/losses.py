"""The training objective: the masked span's loss and the context's, and the optimizer."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from celeris_complete.model.network import InfillModel
from celeris_complete.model.tokenizer import CodeTokenizer
from celeris_complete.training.data import Batch


def span_loss(
    logits: torch.Tensor,
    canvas: torch.Tensor,
    masked: torch.Tensor,
    t: torch.Tensor,
    span_len: torch.Tensor,
    eos_id: int,
    eos_weight: float,
) -> torch.Tensor:
    c = canvas.shape[1]
    ce = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), canvas.reshape(-1), reduction="none")
    ce = ce.view(canvas.shape)
    slot = torch.arange(c, device=canvas.device)
    weight = torch.where((canvas == eos_id) & (slot > span_len[:, None]), eos_weight, 1.0)
    per_sample = (ce * weight * masked).sum(1) / t / weight.sum(1)
    return per_sample.mean()


def context_loss(logits: torch.Tensor, context: torch.Tensor, canvas: torch.Tensor, ignore: list[int]) -> torch.Tensor:
    """Next-token loss on the causal context; the last context token predicts the span's first."""
    targets = torch.cat((context[:, 1:], canvas[:, :1]), dim=1).clone()
    for i in ignore:
        targets[targets == i] = -100
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)


def losses(
    model: torch.nn.Module,
    batch: Batch,
    t: torch.Tensor,
    masked: torch.Tensor,
    tok: CodeTokenizer,
    device: str,
    amp: torch.dtype | None,
    eos_weight: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(total, context, span) losses of one batch: the forward pass of a training step."""
    ctx = torch.from_numpy(batch.context).to(device)
    can = torch.from_numpy(batch.canvas).to(device)
    span_len = torch.from_numpy(batch.span_len).to(device)
    x = torch.where(masked, tok.mask_id, can)
    with torch.autocast(device_type=device, dtype=amp, enabled=amp is not None):
        ctx_logits, span_logits = model(ctx, x)
    loss_ctx = context_loss(ctx_logits, ctx, can, [tok.suf_id, tok.pre_id])
    loss_span = span_loss(span_logits, can, masked, t, span_len, tok.eos_id, eos_weight)
    return loss_ctx + loss_span, loss_ctx, loss_span


def _optimizer(model: InfillModel, lr: float) -> torch.optim.AdamW:
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "embed" not in n)]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8)
