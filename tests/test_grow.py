import pytest
import torch

from celeris_complete.errors import CelerisError
from celeris_complete.model.network import InfillModel, ModelConfig
from celeris_complete.training.grow import grow_depth, insert_positions


def trained_like_model(seed=0):
    """A small model with every weight random (a fresh model's residual outputs are near zero)."""
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=128, d_model=32, n_layers=3, n_heads=2, max_positions=96, max_canvas=16)
    m = InfillModel(cfg)
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, 0.3)
    return m.eval()


def test_new_blocks_spread_over_the_depth():
    assert insert_positions(6, 8) == [2, 5]
    assert insert_positions(3, 4) == [2]
    assert insert_positions(2, 4) == [0, 1]
    with pytest.raises(CelerisError, match="already has 6"):
        insert_positions(6, 6)


def test_grown_model_answers_as_the_original():
    m = trained_like_model()
    g = grow_depth(m, 5).eval()
    assert g.cfg.n_layers == 5 and len(g.blocks) == 5
    assert g.num_parameters() > m.num_parameters()
    ctx = torch.randint(0, 120, (2, 20))
    slots = torch.randint(0, 120, (2, 8))
    with torch.no_grad():
        want = m(ctx, slots)
        got = g(ctx, slots)
    for a, b in zip(want, got):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)


def test_grown_model_learns_in_its_new_blocks():
    """The zeroed projections get gradients: training can move the new blocks off identity."""
    m = trained_like_model()
    g = grow_depth(m, 4)
    new = g.blocks[3]  # inserted after the last original block
    assert torch.count_nonzero(new.attn.proj.weight) == 0
    ctx = torch.randint(0, 120, (2, 20))
    slots = torch.randint(0, 120, (2, 8))
    _, logits = g(ctx, slots)
    logits.logsumexp(-1).sum().backward()
    assert new.attn.proj.weight.grad.abs().sum() > 0
    assert new.mlp.down.weight.grad.abs().sum() > 0
