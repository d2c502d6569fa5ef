import torch

from celeris_complete.model.network import InfillModel, ModelConfig


def make_model(seed=0):
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=128, d_model=32, n_layers=2, n_heads=2, max_positions=96, max_canvas=16)
    return InfillModel(cfg).eval()


def test_span_step_matches_training_forward():
    m = make_model()
    ctx = torch.randint(0, 120, (2, 20))
    slots = torch.randint(0, 120, (2, 8))
    with torch.no_grad():
        ctx_logits, slot_logits = m(ctx, slots)
        h, kv = m.encode_context(ctx)
        step_logits = m.span_step(slots, kv)
    torch.testing.assert_close(step_logits, slot_logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(m.logits(h), ctx_logits, atol=1e-5, rtol=1e-5)


def test_context_cache_extends_exactly():
    """Encoding a context in two pieces (typing at the cursor) equals encoding it at once."""
    m = make_model()
    ctx = torch.randint(0, 120, (1, 30))
    slots = torch.randint(0, 120, (1, 6))
    with torch.no_grad():
        _, full = m.encode_context(ctx)
        _, part = m.encode_context(ctx[:, :21])
        _, extended = m.encode_context(ctx[:, 21:], past=part)
        _, one_more = m.encode_context(ctx[:, :29])
        _, by_one = m.encode_context(ctx[:, 29:], past=one_more)
        for (k1, v1), (k2, v2), (k3, _) in zip(full, extended, by_one):
            torch.testing.assert_close(k1, k2, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(v1, v2, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(k1, k3, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(m.span_step(slots, full), m.span_step(slots, extended), atol=1e-5, rtol=1e-5)


def test_context_is_causal_and_slots_see_everything():
    m = make_model()
    ctx = torch.randint(0, 120, (1, 12))
    slots = torch.randint(0, 120, (1, 5))
    changed_ctx = ctx.clone()
    changed_ctx[0, -1] = (ctx[0, -1] + 1) % 120
    changed_slots = slots.clone()
    changed_slots[0, 4] = (slots[0, 4] + 1) % 120
    with torch.no_grad():
        a_ctx, a_slots = m(ctx, slots)
        b_ctx, b_slots = m(changed_ctx, slots)
        c_ctx, c_slots = m(ctx, changed_slots)
    # Changing the last context token leaves earlier context positions alone ...
    torch.testing.assert_close(a_ctx[0, :-1], b_ctx[0, :-1])
    # ... but every slot sees it.
    assert not torch.allclose(a_slots[0, 0], b_slots[0, 0])
    # Slots attend to each other in both directions, and the context never sees them.
    assert not torch.allclose(a_slots[0, 0], c_slots[0, 0])
    torch.testing.assert_close(a_ctx, c_ctx)


def test_slot_index_matters():
    m = make_model()
    ctx = torch.randint(0, 120, (1, 10))
    slots = torch.full((1, 4), 7)
    with torch.no_grad():
        _, logits = m(ctx, slots)
    assert not torch.allclose(logits[0, 0], logits[0, 1])


def test_small_init_starts_near_uniform_loss():
    m = make_model()
    ctx = torch.randint(0, 120, (4, 20))
    slots = torch.randint(0, 120, (4, 8))
    with torch.no_grad():
        _, logits = m(ctx, slots)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 128), slots.reshape(-1))
    assert abs(loss.item() - torch.log(torch.tensor(128.0)).item()) < 0.5
