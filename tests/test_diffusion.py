import pytest
import torch

from celeris_complete.model.diffusion import DecodeSettings, SpecialIds, diffuse, expand_kv, span_tokens
from celeris_complete.model.network import InfillModel, ModelConfig

MASK, EOS = 100, 101
IDS = SpecialIds(MASK, EOS, (MASK, 102))


class Scripted(InfillModel):
    """A real model whose slot logits are replaced by a fixed table (to test the decoding rules)."""

    def __init__(self, table: torch.Tensor):
        super().__init__(ModelConfig(vocab_size=128, d_model=16, n_layers=1, n_heads=2, max_positions=64))
        self.table = table
        self.calls = 0

    def span_step(self, slot_ids, context_kv):
        self.calls += 1
        return self.table[: slot_ids.shape[1]].unsqueeze(0).expand(slot_ids.shape[0], -1, -1).clone()


def table(rows):
    """rows: list of (token, confidence-logit) per slot."""
    t = torch.zeros(len(rows), 128)
    for i, (tok, logit) in enumerate(rows):
        t[i, tok] = logit
    return t


def context(model):
    return model.encode_context(torch.zeros(1, 4, dtype=torch.long))[1]


def test_commits_everything_within_the_step_cap():
    m = Scripted(table([(5, 1.0)] * 8))  # nothing is confident
    out, ran = diffuse(m, context(m), 8, IDS, DecodeSettings(steps=3, threshold=0.99))
    assert ran == 3 and not (out == MASK).any()
    assert span_tokens(out[0], EOS) == [5] * 8


def test_confident_slots_commit_in_one_step():
    m = Scripted(table([(5, 20.0)] * 8))
    out, ran = diffuse(m, context(m), 8, IDS, DecodeSettings(steps=8, threshold=0.9))
    assert ran == 1 and span_tokens(out[0], EOS) == [5] * 8


def test_end_of_span_rule():
    m = Scripted(table([(5, 20.0), (EOS, 20.0), (6, 20.0), (7, 20.0)]))
    out, _ = diffuse(m, context(m), 4, IDS, DecodeSettings(steps=2))
    assert out[0].tolist() == [5, EOS, EOS, EOS]


def test_banned_ids_never_appear():
    m = Scripted(table([(MASK, 30.0), (102, 30.0)]))
    out, _ = diffuse(m, context(m), 2, IDS, DecodeSettings(steps=1))
    assert MASK not in out[0].tolist() and 102 not in out[0].tolist()


def test_eos_penalty_prevents_empty_answers():
    t = table([(EOS, 3.0), (EOS, 3.0)])
    t[:, 9] = 2.0
    m = Scripted(t)
    out, _ = diffuse(m, context(m), 2, IDS, DecodeSettings(steps=2))
    assert span_tokens(out[0], EOS) == []
    out, _ = diffuse(m, context(m), 2, IDS, DecodeSettings(steps=2, eos_penalty=2.0))
    assert span_tokens(out[0], EOS) == [9, 9]


BLANK, WORD, NEWLINE = 7, 9, 10


def line_ids() -> SpecialIds:
    """IDS, with token 7 indentation and token 10 a line break (for ``DecodeSettings.open_line``)."""
    blank = torch.zeros(128, dtype=torch.bool)
    blank[BLANK] = True
    opens = torch.ones(128, dtype=torch.bool)
    opens[[EOS, NEWLINE]] = False
    return SpecialIds(MASK, EOS, (MASK, 102), blank, opens)


def test_a_span_opening_a_blank_line_does_not_end_right_after_its_indentation():
    """Indentation and end-of-span committed together (both confident) would be an empty answer: the slot
    after the indentation and the end-of-span slots after it open again for the next steps; in the last
    step that slot takes its likeliest token that may start a line and is not blank; alone and in a
    batch, with a deadline too."""
    for ender in (EOS, NEWLINE):
        t = table([(BLANK, 20.0), (ender, 20.0), (EOS, 20.0), (EOS, 20.0)])
        t[1, WORD] = 5.0
        t[1, BLANK] = 10.0  # more indentation would leave the line empty too
        m = Scripted(t)
        out, _ = diffuse(m, context(m), 4, line_ids(), DecodeSettings(steps=2))
        assert out[0, :2].tolist() == [BLANK, ender]  # without the rule
        for steps in (1, 2):
            for kv in (context(m), expand_kv(context(m), 3)):
                out, _ = diffuse(m, kv, 4, line_ids(), DecodeSettings(steps=steps, open_line=True))
                assert [span_tokens(row, EOS) for row in out] == [[BLANK, WORD]] * out.shape[0]
        settings = DecodeSettings(steps=4, open_line=True)
        out, ran = diffuse(m, context(m), 4, line_ids(), settings, should_stop=lambda: True)
        assert ran == 1 and span_tokens(out[0], EOS) == [BLANK, WORD]


def test_the_blank_line_rule_leaves_a_span_with_content_alone():
    t = table([(BLANK, 20.0), (WORD, 20.0), (EOS, 20.0), (EOS, 20.0)])
    m = Scripted(t)
    for settings in (DecodeSettings(steps=2), DecodeSettings(steps=2, open_line=True)):
        out, _ = diffuse(m, context(m), 4, line_ids(), settings)
        assert span_tokens(out[0], EOS) == [BLANK, WORD]
    out, _ = diffuse(m, context(m), 4, IDS, DecodeSettings(steps=2, open_line=True))  # tokens unknown: no rule
    assert span_tokens(out[0], EOS) == [BLANK, WORD]
    m = Scripted(table([(WORD, 20.0), (EOS, 20.0), (EOS, 20.0)]))  # no indentation: ends after a word
    out, _ = diffuse(m, context(m), 3, line_ids(), DecodeSettings(steps=2, open_line=True))
    assert span_tokens(out[0], EOS) == [WORD]


def test_deadline_commits_remaining_slots():
    m = Scripted(table([(5, 1.0)] * 8))
    out, ran = diffuse(m, context(m), 8, IDS, DecodeSettings(steps=8, threshold=0.99), should_stop=lambda: True)
    assert ran == 1 and not (out == MASK).any()


def test_greedy_is_deterministic_on_a_real_model():
    torch.manual_seed(0)
    m = InfillModel(ModelConfig(vocab_size=128, d_model=32, n_layers=2, n_heads=2, max_positions=64)).eval()
    kv = context(m)
    a, _ = diffuse(m, kv, 10, IDS, DecodeSettings(steps=4))
    b, _ = diffuse(m, kv, 10, IDS, DecodeSettings(steps=4))
    assert torch.equal(a, b)


def draft_probability_table(probs: list[float], draft: list[int], other: int = 7) -> torch.Tensor:
    """Slot logits where slot i gives the draft token probability about probs[i] (``other`` takes the rest)."""
    t = torch.full((len(probs), 128), -30.0)
    for i, (p, tok) in enumerate(zip(probs, draft)):
        t[i, tok] = float(torch.log(torch.tensor(p)))
        t[i, other] = float(torch.log(torch.tensor(1 - p)))
    return t


def test_a_draft_the_model_accepts_whole_finishes_in_one_step():
    draft = [11, 12, 13, EOS]
    m = Scripted(draft_probability_table([0.3, 0.3, 0.3, 0.3, 0.3, 0.3], draft + [EOS, EOS]))
    kept = []
    out, ran = diffuse(m, context(m), 6, IDS, DecodeSettings(steps=3), draft=torch.tensor(draft),
                       draft_threshold=0.2, draft_kept=kept)  # fmt: skip
    assert ran == 1 and kept == [4]
    assert span_tokens(out[0], EOS) == [11, 12, 13]


def test_a_draft_is_kept_up_to_the_first_slot_the_model_refuses():
    draft = [11, 12, 13, EOS]
    m = Scripted(draft_probability_table([0.9, 0.5, 0.01, 0.9, 0.9, 0.9], draft + [EOS, EOS]))
    kept = []
    out, ran = diffuse(m, context(m), 6, IDS, DecodeSettings(steps=3, threshold=0.99), draft=torch.tensor(draft),
                       draft_threshold=0.2, draft_kept=kept)  # fmt: skip
    assert kept == [2]
    got = out[0].tolist()
    assert got[:2] == [11, 12] and got[2] == 7  # the model's own choice where it refused the draft


def test_without_a_draft_the_same_model_decodes_its_own_answer():
    draft = [11, 12, 13, EOS]
    m = Scripted(draft_probability_table([0.3] * 6, draft + [EOS, EOS]))
    out, _ = diffuse(m, context(m), 6, IDS, DecodeSettings(steps=3))
    assert span_tokens(out[0], EOS) == [7] * 6  # the draft made the difference above


def test_a_draft_token_the_rules_forbid_is_refused_even_at_threshold_zero():
    draft = [102, 12, EOS]  # 102 is banned: the canvas may never hold it
    m = Scripted(draft_probability_table([0.9, 0.9, 0.9, 0.9], [11, 12, EOS, EOS]))
    kept = []
    out, _ = diffuse(m, context(m), 4, IDS, DecodeSettings(steps=3), draft=torch.tensor(draft),
                     draft_threshold=0.0, draft_kept=kept)  # fmt: skip
    assert kept == [0] and 102 not in out[0].tolist()
    allowed = torch.zeros(128, dtype=torch.bool)
    allowed[11] = True  # token healing: slot 0 must start with what was cut before the cursor
    kept = []
    diffuse(m, context(m), 4, IDS, DecodeSettings(steps=3), first_allowed=allowed, draft=torch.tensor([12, EOS]),
            draft_threshold=0.0, draft_kept=kept)  # fmt: skip
    assert kept == [0]


def test_a_draft_token_that_is_the_models_top_token_is_kept_whatever_the_threshold():
    draft = [11, 12, EOS]
    m = Scripted(draft_probability_table([0.6, 0.6, 0.6, 0.6], draft + [EOS]))
    kept = []
    out, ran = diffuse(m, context(m), 4, IDS, DecodeSettings(steps=3), draft=torch.tensor(draft),
                       draft_threshold=0.95, draft_kept=kept)  # fmt: skip
    assert kept == [3] and ran == 1 and span_tokens(out[0], EOS) == [11, 12]


def test_a_model_confident_in_another_token_vetoes_the_draft():
    draft = [11, 12, EOS]
    m = Scripted(draft_probability_table([0.3, 0.9, 0.9, 0.9], draft + [EOS]))  # slot 0: token 7 has 0.7
    kept = []
    out, _ = diffuse(m, context(m), 4, IDS, DecodeSettings(steps=3), draft=torch.tensor(draft),
                     draft_threshold=0.2, draft_kept=kept, draft_veto=0.6)  # fmt: skip
    assert kept == [0] and out[0, 0] == 7  # refused: the model writes its own answer from slot 0
    kept = []
    diffuse(m, context(m), 4, IDS, DecodeSettings(steps=3), draft=torch.tensor(draft),
            draft_threshold=0.2, draft_kept=kept, draft_veto=0.8)  # fmt: skip
    assert kept == [3]  # not confident enough to veto: the draft stands


def test_the_slots_after_a_partly_kept_draft_are_decoded_by_later_steps():
    draft = [11, 12, 13, EOS]
    m = Scripted(draft_probability_table([0.9, 0.9, 0.01, 0.01, 0.9, 0.9], draft + [EOS, EOS]))
    kept, canvases = [], []
    out, ran = diffuse(m, context(m), 6, IDS, DecodeSettings(steps=3, threshold=0.5), draft=torch.tensor(draft),
                       draft_threshold=0.2, draft_kept=kept, on_step=lambda i, x: canvases.append(x[0].tolist()))
    assert kept == [2] and ran > 1
    assert canvases[0] == [11, 12] + [MASK] * 4  # the first step's prediction did not see the kept part
    assert out[0, 2] == 7 and not (out == MASK).any()


def test_of_several_drafts_one_accepted_whole_wins_then_the_likelier():
    m = Scripted(draft_probability_table([0.3, 0.3, 0.3, 0.3, 0.3], [11, 12, 13, EOS, EOS]))
    drafts = [torch.tensor([11, 40, 41, 42, EOS]), torch.tensor([11, 12, EOS]), torch.tensor([11, 12, 13, EOS])]
    kept, chosen = [], []
    out, ran = diffuse(m, context(m), 5, IDS, DecodeSettings(steps=3), draft=drafts, draft_threshold=0.2,
                       draft_kept=kept, draft_chosen=chosen)  # fmt: skip
    # the first is refused at slot 1, the second at its end-of-span (slot 2): the third, longest but whole, wins
    assert chosen == [2] and kept == [4] and ran == 1 and span_tokens(out[0], EOS) == [11, 12, 13]


class Contextual(InfillModel):
    """Slot 1 says token 12 when slot 0 holds 11, else token 7, confidently; other slots say EOS."""

    def __init__(self):
        super().__init__(ModelConfig(vocab_size=128, d_model=16, n_layers=1, n_heads=2, max_positions=64))
        self.batches = []

    def span_step(self, slot_ids, context_kv):
        self.batches.append(slot_ids.shape[0])
        t = torch.full((*slot_ids.shape, 128), -30.0)
        t[:, :, EOS] = 5.0
        t[:, 0, 11] = 6.0
        t[:, 1, EOS] = -30.0
        t[:, 1, 7] = 8.0
        sees = slot_ids[:, 0] == 11
        t[sees, 1, 7], t[sees, 1, 12] = -30.0, 8.0
        return t


def test_a_draft_judged_with_its_own_tokens_in_the_canvas_in_one_batched_call():
    m = Contextual()
    draft = torch.tensor([11, 12, EOS])
    kept = []
    diffuse(m, context(m), 4, IDS, DecodeSettings(steps=3), draft=draft, draft_veto=0.9, draft_kept=kept)
    assert kept == [1]  # the all-masked canvas's slot 1 is sure of 7: vetoed
    kept, m.batches = [], []
    out, ran = diffuse(m, context(m), 4, IDS, DecodeSettings(steps=3), draft=[draft, torch.tensor([9, EOS])],
                       draft_veto=0.9, draft_kept=kept, draft_conditioned=True)  # fmt: skip
    assert kept == [3] and ran == 1 and m.batches == [5]  # all-masked + two canvases per draft
    assert span_tokens(out[0], EOS) == [11, 12]


def real_model() -> InfillModel:
    torch.manual_seed(0)
    return InfillModel(ModelConfig(vocab_size=128, d_model=32, n_layers=2, n_heads=2, max_positions=64)).eval()


def test_each_canvas_of_a_batch_decodes_as_it_would_alone():
    m = real_model()
    kv = context(m)
    alone, _ = diffuse(m, kv, 10, IDS, DecodeSettings(steps=4))
    batch, _ = diffuse(m, expand_kv(kv, 3), 10, IDS, DecodeSettings(steps=4))
    assert batch.shape == (3, 10) and all(torch.equal(row, alone[0]) for row in batch)


def test_the_shared_first_step_replaces_a_model_call_and_changes_nothing():
    m = real_model()
    calls = []
    step = m.span_step
    m.span_step = lambda x, kv: calls.append(x.shape[0]) or step(x, kv)
    kv = context(m)
    first = []
    alone, ran = diffuse(m, kv, 10, IDS, DecodeSettings(steps=4), first_probs=first)
    assert len(first) == 1 and first[0].shape == (1, 10, 128) and len(calls) == ran
    calls.clear()
    again, ran_again = diffuse(m, expand_kv(kv, 2), 10, IDS, DecodeSettings(steps=4), first_probs=first)
    assert ran_again == ran - 1 and calls == [2] * (ran - 1)
    assert torch.equal(again[0], alone[0]) and torch.equal(again[1], alone[0])


def test_the_shared_first_step_takes_a_narrower_first_slot_rule():
    m = Scripted(table([(5, 20.0), (6, 20.0), (7, 20.0)]))
    first = []
    greedy, _ = diffuse(m, context(m), 3, IDS, DecodeSettings(steps=2), first_probs=first)
    allowed = torch.ones(128, dtype=torch.bool)
    allowed[5] = False
    other, _ = diffuse(m, context(m), 3, IDS, DecodeSettings(steps=2), first_allowed=allowed, first_probs=first)
    assert greedy[0].tolist() == [5, 6, 7] and other[0, 0] != 5 and other[0, 1:].tolist() == [6, 7]


def test_sampled_canvases_differ_stay_in_the_top_k_and_repeat_with_the_seed():
    logits = torch.full((4, 128), -30.0)
    logits[:, 10:20] = -torch.arange(10.0) * 0.2  # tokens 10, 11, 12 are each slot's likeliest three
    m = Scripted(logits)
    settings = DecodeSettings(steps=2, temperature=2.0, top_k=3, seed=7)
    first = []
    diffuse(m, context(m), 4, IDS, DecodeSettings(steps=2), first_probs=first)
    a, _ = diffuse(m, expand_kv(context(m), 16), 4, IDS, settings, first_probs=first)
    b, _ = diffuse(m, expand_kv(context(m), 16), 4, IDS, settings, first_probs=first)
    assert torch.equal(a, b)  # the same seed, the same draws
    assert set(a.flatten().tolist()) <= {10, 11, 12} and len({tuple(row) for row in a.tolist()}) > 8
    c, _ = diffuse(m, expand_kv(context(m), 16), 4, IDS, DecodeSettings(steps=2, temperature=2.0, top_k=3, seed=8))
    assert not torch.equal(a, c)


class Changing(Scripted):
    """A scripted model whose table changes between calls (its prediction moves)."""

    def __init__(self, tables: list[torch.Tensor]):
        super().__init__(tables[0])
        self.tables = tables

    def span_step(self, slot_ids, context_kv):
        self.table = self.tables[min(self.calls, len(self.tables) - 1)]
        return super().span_step(slot_ids, context_kv)


def test_the_trace_holds_each_slots_probability_and_step_when_committed():
    from celeris_complete.model.diffusion import SpanTrace

    logits = table([(5, 20.0), (6, 20.0), (7, 1.0), (8, 1.0)])  # two confident slots, two not
    m = Scripted(logits)
    trace: list[SpanTrace] = []
    out, ran = diffuse(m, context(m), 4, IDS, DecodeSettings(steps=2, threshold=0.9), trace=trace)
    (t,) = trace
    allowed = logits.clone()
    allowed[:, list(IDS.banned)] = float("-inf")  # the canvas never holds them: the rest share their mass
    expected = torch.softmax(allowed, -1).gather(-1, out[0].unsqueeze(-1)).squeeze(-1).tolist()
    assert t.prob == pytest.approx(expected, rel=1e-5)
    assert t.step == [0, 0, 1, 1] and t.flips == [0] and not t.forced and t.draft_score is None


def test_the_trace_counts_flips_and_a_forced_last_step():
    from celeris_complete.model.diffusion import SpanTrace

    first, then = table([(5, 1.0)] * 4), table([(9, 1.0)] * 4)  # every slot changes its mind after step 0
    m = Changing([first, then])
    trace: list[SpanTrace] = []
    calls = iter([False, True])  # the deadline passes after the first step
    settings = DecodeSettings(steps=4, threshold=0.99)
    diffuse(m, context(m), 4, IDS, settings, should_stop=lambda: next(calls), trace=trace)
    (t,) = trace
    assert t.forced and t.flips == [3]  # the three slots still masked after step 0 (one committed there)


def test_the_trace_of_a_draft_kept_carries_its_probability_and_score():
    from celeris_complete.model.diffusion import SpanTrace

    draft = [11, 12, 13, EOS]
    m = Scripted(draft_probability_table([0.3, 0.3, 0.3, 0.3, 0.3, 0.3], draft + [EOS, EOS]))
    trace: list[SpanTrace] = []
    diffuse(m, context(m), 6, IDS, DecodeSettings(steps=3), draft=torch.tensor(draft), draft_threshold=0.2,
            draft_kept=[], trace=trace)  # fmt: skip
    (t,) = trace
    assert t.prob[:4] == pytest.approx([0.3] * 4, rel=1e-3) and t.step[:4] == [0, 0, 0, 0]
    assert t.draft_score == pytest.approx(float(torch.log(torch.tensor(0.3))), rel=1e-3)
