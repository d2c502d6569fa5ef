"""A deeper model from a trained one, computing the same function until training moves it.

Each new block is a copy of the block before it with its two residual outputs (the attention's
projection and the MLP's down projection) zeroed: with pre-norm blocks, such a block adds nothing
to the residual stream, so the grown model's logits equal the original's, and training starts from
what the original knew instead of from scratch (block expansion, as in LLaMA Pro). The zeroed
projections get gradients at once; the copied weights give the new block useful features to start.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import torch

from celeris_complete.errors import CelerisError
from celeris_complete.model.network import InfillModel


def insert_positions(old_layers: int, new_layers: int) -> list[int]:
    """Indices (in the old model) of the blocks after which a new block goes, spread evenly."""
    if new_layers <= old_layers:
        raise CelerisError(f"growing to {new_layers} layers: the model already has {old_layers}")
    extra = new_layers - old_layers
    return [(i + 1) * old_layers // extra - 1 for i in range(extra)]


@torch.no_grad()
def grow_depth(model: InfillModel, n_layers: int) -> InfillModel:
    """A new model of ``n_layers`` blocks holding ``model``'s weights and identity blocks between them."""
    after = insert_positions(model.cfg.n_layers, n_layers)
    grown = InfillModel(replace(model.cfg, n_layers=n_layers))
    blocks = []
    for i, block in enumerate(model.blocks):
        blocks.append(copy.deepcopy(block))
        for _ in range(after.count(i)):
            new = copy.deepcopy(block)
            new.attn.proj.weight.zero_()
            new.mlp.down.weight.zero_()
            blocks.append(new)
    grown.blocks = torch.nn.ModuleList(blocks)
    grown.embed.load_state_dict(model.embed.state_dict())
    grown.slot_embed.load_state_dict(model.slot_embed.state_dict())
    grown.norm.load_state_dict(model.norm.state_dict())
    return grown
