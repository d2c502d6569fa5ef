"""The engine on the real shipped model: mechanics that must hold whatever the model predicts."""

from pathlib import Path

import pytest

from celeris_complete.checks.languages import MAX_CURSOR_LINE
from celeris_complete.config import load_settings
from celeris_complete.drafts.table import Draft
from celeris_complete.engine import Completion, Engine, InfillRequest
from tests.test_engine_mechanics import first_step_logits

PROMPTS = [
    ("def add(a, b):\n    return ", "\n"),
    ("import os\n\n\ndef list_dir(path):\n    return os.", "\n"),
    ("class Point:\n    def __init__(self, x, y):\n        self.x = x\n        ", "\n"),
    ("for i in range(", "):\n    print(i)\n"),
]


@pytest.fixture(scope="module")
def engine(shipped_model_dir):  # fp32: the reference the other backends and quantizations are compared with
    settings = load_settings(
        {"model": str(shipped_model_dir), "quant": "none"}, environ={}, user_file=shipped_model_dir / "none"
    )
    return Engine(settings)


def test_quant_auto_is_int8_on_the_cpu_for_the_torch_backend(shipped_model_dir):
    def auto(**values):
        values = {"model": str(shipped_model_dir), **values}
        return Engine(load_settings(values, environ={}, user_file=shipped_model_dir / "x")).quant

    assert auto() == "int8" and auto(device="cpu", backend="torch") == "int8"


@pytest.fixture(scope="module")
def engine_int8(shipped_model_dir):
    settings = load_settings(
        {"model": str(shipped_model_dir), "quant": "int8"}, environ={}, user_file=shipped_model_dir / "none"
    )
    return Engine(settings)


def test_completions_are_real_and_deterministic(engine):
    texts = [engine.complete(InfillRequest(p, s)).text for p, s in PROMPTS]
    assert texts == [engine.complete(InfillRequest(p, s)).text for p, s in PROMPTS]
    assert sum(bool(t.strip()) for t in texts) >= 3, texts


def test_line_mode_returns_one_line(engine):
    for prefix, suffix in PROMPTS:
        done = engine.complete(InfillRequest(prefix, suffix, mode="line"))
        assert "\n" not in done.text and done.text == done.text.rstrip()


def test_where_the_line_cannot_end_at_the_cursor_the_answer_does_not_end_it(engine):
    prompts = [
        ("def merge(*dicts):\n    rv = dict()\n    for d in dicts:\n        rv.", "\n    return rv\n"),
        ("def f(a, b):\n    return (a +", "\n"),
        ("def f(items):\n    total = 0\n    for item in ", "\n        total += item\n    return total\n"),
    ]
    for prefix, suffix in prompts:
        done = engine.complete(InfillRequest(prefix, suffix, mode="line"))
        written = done.raw[len(done.heal) :]
        assert written and not written.startswith("\n"), (prefix, done.raw)


def test_steps_cap_and_timings(engine):
    done = engine.complete(InfillRequest(*PROMPTS[0], steps=2))
    assert 1 <= done.steps <= 2
    assert set(done.timings_ms) >= {"tokenize", "context_encode", "refine", "detokenize", "postprocess", "total"}


def test_one_step_per_token_is_also_a_valid_decode(engine):
    done = engine.complete(InfillRequest(*PROMPTS[0], steps=24, max_tokens=24))
    assert done.steps <= 24 and "\n" not in done.text


def test_deadline_gives_a_whole_answer(engine):
    done = engine.complete(InfillRequest(*PROMPTS[1], steps=16, deadline_ms=0.0))
    assert done.steps == 1  # the remaining slots were committed after the first step


def test_int8_mostly_agrees_with_fp32(engine, engine_int8):
    same = sum(
        engine.complete(InfillRequest(p, s)).text == engine_int8.complete(InfillRequest(p, s)).text for p, s in PROMPTS
    )
    assert same >= len(PROMPTS) // 2


def test_bf16_mostly_agrees_with_fp32(engine, shipped_model_dir):
    import warnings

    settings = load_settings(
        {"model": str(shipped_model_dir), "quant": "bf16"}, environ={}, user_file=shipped_model_dir / "none"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # slow on CPUs without AMX, but it must work
        bf16 = Engine(settings)
    same = sum(engine.complete(InfillRequest(p, s)).text == bf16.complete(InfillRequest(p, s)).text for p, s in PROMPTS)
    assert same >= len(PROMPTS) // 2


def test_odd_input_never_crashes(engine):
    """Odd text around the cursor, with and without the compiler's check: an answer each time (no exception)
    that an editor can take (valid Unicode; one line, not ending in blanks, in line mode; a context cut to the
    model's window), and where the odd text surrounds an ordinary place, an answer that is not empty."""
    odd = [
        ("", ""),  # an empty file
        ("\x00\x01", ""),  # control characters (the compiler takes no NUL)
        ("😀" * 5000, "é" * 5000),  # far more than the window, none of it ASCII
        ("\r\n" * 100, "\t" * 100),
        ("x = '\udcff'\ny = ", "\n"),  # a lone surrogate: an editor's buffer can hold one, JSON carries it
    ]
    (add, end), (os_prefix, _) = PROMPTS[0], PROMPTS[1]
    ordinary = [
        ("\x00" * 10 + "\n" + add, end),
        ("😀" * 5000 + "\n" + add, "\n" + "é" * 5000),
        (add.replace("\n", "\r\n"), "\r\n"),
        ("\ufeff" + os_prefix, end),  # a byte order mark
        ("x = '\udcff'\n" + add, end),
    ]
    for prefix, suffix in odd + ordinary:
        for mode in ("line", "block"):
            for language in (None, "python"):
                done = engine.complete(InfillRequest(prefix, suffix, mode=mode, language=language))
                case = (prefix[-30:], suffix[:10], mode, language, done.text)
                assert isinstance(done, Completion) and done.mode == mode, case
                done.text.encode("utf-8")  # valid Unicode: raises on a lone surrogate
                cursor_line = prefix[prefix.rfind("\n") + 1 :] + suffix.split("\n", 1)[0]
                if len(cursor_line) > MAX_CURSOR_LINE:  # a minified line: nothing, and no model call
                    assert (done.text, done.syntax, done.steps) == ("", "minified", 0), case
                    continue
                assert 0 < done.context_tokens <= engine.max_context and done.steps >= 1, case
                if mode == "line":
                    assert "\n" not in done.text and done.text == done.text.rstrip(), case
                if (prefix, suffix) in ordinary and language is None:  # (the compiler may withhold an answer)
                    assert done.text.strip(), case


def test_cache_hit_equals_miss_on_the_shipped_model(engine):
    for prefix, suffix in PROMPTS:
        engine.cache.clear()
        miss = engine.complete(InfillRequest(prefix, suffix))
        hit = engine.complete(InfillRequest(prefix, suffix))
        assert (miss.cache, hit.cache) == ("miss", "hit") and miss.raw == hit.raw


def test_one_step_and_many_steps_both_fill_the_canvas(engine):
    one = engine.complete(InfillRequest(*PROMPTS[0], steps=1))
    many = engine.complete(InfillRequest(*PROMPTS[0], steps=8))
    assert one.steps == 1 and 1 <= many.steps <= 8
    assert one.tokens <= engine.settings.canvas_line and many.tokens <= engine.settings.canvas_line


def test_end_of_span_rule_on_the_shipped_model(engine):
    import torch

    from celeris_complete.model.context import build_context
    from celeris_complete.model.diffusion import DecodeSettings, diffuse

    ended = 0
    for prefix, suffix in PROMPTS:
        tokens = build_context(engine.tok, prefix, suffix, 192, 96).tokens
        with torch.inference_mode():
            kv, _ = engine._context_kv(tokens)
            out, _ = diffuse(engine.model, kv, 24, engine.ids, DecodeSettings(steps=3, threshold=0.9))
        row = out[0].tolist()
        assert engine.ids.mask not in row  # every slot committed within the step cap
        if engine.ids.eos in row:
            ended += 1
            first = row.index(engine.ids.eos)
            assert row[first:] == [engine.ids.eos] * (len(row) - first)
    assert ended >= 2  # the rule was exercised, not skipped


def test_threshold_zero_commits_everything_at_once(engine):
    done = engine.complete(InfillRequest(*PROMPTS[1], steps=8, threshold=0.0))
    assert done.steps == 1


def distinct(done) -> list[str]:
    """The completions an invoked request offers: the answer and its alternatives, non-empty, once each."""
    return list(dict.fromkeys(t for t in (done.text, *done.alternatives) if t.strip()))


def test_alternatives_leave_the_answer_as_it_was_and_differ_from_it(engine, engine_int8):
    for eng in (engine, engine_int8):
        base = eng.settings
        offered = []
        try:  # one penalty in both modes: line answers that are not empty, so that there are three to offer
            eng.use_settings(base.with_overrides({"eos_penalty_line": base.eos_penalty}, "test"))
            for prefix, suffix in PROMPTS:
                alone = eng.complete(InfillRequest(prefix, suffix))
                done = eng.complete(InfillRequest(prefix, suffix, alternatives=3))
                assert (done.text, done.raw, done.steps, done.tokens) == (
                    alone.text, alone.raw, alone.steps, alone.tokens
                )  # fmt: skip
                assert len(done.alternatives) == 2 and done.timings_ms["alternatives"] > 0
                assert (
                    eng.complete(InfillRequest(prefix, suffix, alternatives=3)).alternatives == done.alternatives
                )  # seeded
                offered.append(distinct(done))
        finally:
            eng.use_settings(base)
        assert sum(len(texts) == 3 for texts in offered) >= 2, offered
    assert engine.complete(InfillRequest(*PROMPTS[0])).alternatives == ()


@pytest.fixture(scope="module")
def onnx_graphs(tmp_path_factory):
    """One export of the shipped model (most of a minute: torch.export) for both ONNX tests."""
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    yield
    patch.undo()


def test_onnx_backend_matches_torch_on_the_shipped_model(engine, shipped_model_dir, onnx_graphs):
    settings = load_settings(
        {"model": str(shipped_model_dir), "backend": "onnx"}, environ={}, user_file=shipped_model_dir / "none"
    )
    onnx = Engine(settings)
    assert onnx.backend == "onnx"
    for prefix, suffix in PROMPTS:
        assert onnx.complete(InfillRequest(prefix, suffix)).raw == engine.complete(InfillRequest(prefix, suffix)).raw
    # The cache works on the stacked keys/values too: typing reuses the context.
    typed_prefix = "def add(first, second):\n    total = first + second\n    return tot"
    typed = []
    for each in (onnx, engine):  # the same history for both: what was shown before is part of the answer
        each.cache.clear()
        each.complete(InfillRequest(typed_prefix[:-2], "\n"))
        typed.append(each.complete(InfillRequest(typed_prefix, "\n")))
    assert typed[0].cache == "partial" and typed[0].raw == typed[1].raw
    # Its graphs take one canvas: alternatives are decoded one after another (each with its own seed).
    assert not onnx.model.batched
    # One penalty in both modes (as in the batched test above), so that line alternatives need not be empty.
    onnx.use_settings(onnx.settings.with_overrides({"eos_penalty_line": onnx.settings.eos_penalty}, "test"))
    offered = []
    for prefix, suffix in PROMPTS:
        done = onnx.complete(InfillRequest(prefix, suffix, alternatives=3))
        assert done.raw == onnx.complete(InfillRequest(prefix, suffix)).raw and len(done.alternatives) == 2
        offered.append({done.text, *done.alternatives})
    assert any(len(texts) == 3 for texts in offered), offered


def test_onnx_int8_runs_on_the_shipped_model(engine, shipped_model_dir, onnx_graphs):
    import onnx

    settings = load_settings(
        {"model": str(shipped_model_dir), "backend": "onnx", "quant": "int8"},
        environ={},
        user_file=shipped_model_dir / "none",
    )
    int8 = Engine(settings)  # the graphs the test above exported, their int8 versions
    assert int8.backend == "onnx" and int8.quant == "int8"
    # Both sessions run the int8 graphs: matrix products in integers, weights stored as int8.
    for session in (int8.model.span, int8.model.context):
        path = Path(session._model_path)
        assert path.name.startswith("int8-"), path
        graph = onnx.load(path).graph
        assert {n.op_type for n in graph.node} & {"MatMulInteger", "DynamicQuantizeMatMul"}, path
        assert any(t.data_type == onnx.TensorProto.INT8 for t in graph.initializer), path
    # Int8 arithmetic: logits off fp32's, by no more than the torch backend's int8 are (on this model,
    # enough to change some answers: what int8 ONNX is compared with is int8 torch's own distance).
    fp32 = first_step_logits(engine)
    gap = (first_step_logits(int8) - fp32).abs().max().item()
    settings = load_settings(
        {"model": str(shipped_model_dir), "quant": "int8"}, environ={}, user_file=shipped_model_dir / "none"
    )
    torch_gap = (first_step_logits(Engine(settings)) - fp32).abs().max().item()
    assert 1e-4 < gap < 1.5 * torch_gap, (gap, torch_gap)


def test_the_line_mode_end_of_span_penalty_applies_to_line_answers_only(engine):
    base = engine.settings
    try:
        engine.use_settings(base.with_overrides({"eos_penalty": 0.0, "eos_penalty_line": 20.0}, "test"))
        line = engine.complete(InfillRequest(*PROMPTS[0], mode="line", max_tokens=8))
        assert line.tokens == 8, line  # the span can never end: every slot holds a token
        block_with = engine.complete(InfillRequest(*PROMPTS[1], mode="block", max_tokens=16)).raw
        engine.use_settings(base.with_overrides({"eos_penalty": 0.0, "eos_penalty_line": 0.0}, "test"))
        assert engine.complete(InfillRequest(*PROMPTS[1], mode="block", max_tokens=16)).raw == block_with
        engine.use_settings(base.with_overrides({"eos_penalty": 20.0, "eos_penalty_line": 0.0}, "test"))
        assert engine.complete(InfillRequest(*PROMPTS[1], mode="block", max_tokens=16)).tokens == 16
    finally:
        engine.use_settings(base)


# ---- drafts verified by the model -------------------------------------------------------------

POINT = "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y"
TOTALS = (
    "def run(items):\n"
    + "".join(f"    total = compute_total(items, rate={i}, strict=True)\n" for i in range(3))
    + "    total = compute_total("
)


def complete(engine, prefix, draft=None, suffix="\n", **settings):
    base = engine.settings
    engine.settings = base.with_overrides(settings, "test")
    try:
        drafts = [Draft(draft, "typing-cache", 1)] if draft is not None else []
        return engine.complete(InfillRequest(prefix, suffix, mode="line", drafts=drafts))
    finally:
        engine.settings = base


def test_a_draft_accepted_whole_ends_decoding_in_one_step(engine):
    own = complete(engine, POINT, drafts=False)
    assert own.text != " = y" and own.steps > 1  # the model alone writes something else, in more steps
    got = complete(engine, POINT, " = y")
    assert got.text == " = y" and got.steps == 1
    assert got.draft["kept"] == got.draft["tokens"] and got.draft["source"] == "typing-cache"


def test_a_draft_is_kept_up_to_the_slot_the_model_is_confident_about_and_the_rest_refined(engine):
    # Judged with its own tokens in the canvas, the model is sure a comma follows "items" (p ~0.86):
    # the semicolon is vetoed, "items" kept, and the model writes the rest in the steps left.
    got = complete(engine, TOTALS, "items; rate=3, strict=True)", draft_batch=True, draft_veto=0.8)
    assert 0 < got.draft["kept"] < got.draft["tokens"] and got.steps > 1
    assert got.text.startswith("items") and not got.text.startswith("items;")
    assert complete(engine, TOTALS, "items; rate=3, strict=True)", draft_batch=True).text.startswith("items;")


def test_a_model_confident_that_a_draft_is_wrong_writes_its_own_answer(engine):
    # After "sel" (token healing) the model is all but certain of " self"; a draft that reads
    # " selection" is refused at its first slot and the model's own answer stands.
    prefix = "class A:\n    def f(self):\n        return sel"
    own = complete(engine, prefix, drafts=False)
    got = complete(engine, prefix, "ection", draft_veto=0.9)
    assert own.text.startswith("f")  # " self", whatever follows it
    assert got.draft["kept"] == 0 and got.text == own.text
    assert complete(engine, prefix, "f", draft_veto=0.9).draft["kept"] == 2  # a draft it agrees with stands


def test_the_previous_completion_on_the_same_line_is_a_draft(engine):
    engine.previous.record("p.py", "x = 1\nresult = session.query(", "User).filter(User.id == uid).one()")
    got = engine.complete(InfillRequest("x = 1\nresult = session.query(User).fil", ")\n", mode="line", source="p.py"))
    assert got.draft is not None and got.draft["source"] == "previous"
    assert got.text.startswith("ter(User.id == uid).one()")
    other = engine.complete(InfillRequest("x = 1\nresult = session.query(User).fil", ")\n", mode="line", source="q.py"))
    assert other.draft is None  # another document's answers are not this one's
    elsewhere = engine.complete(
        InfillRequest("x = 2\nresult = session.query(User).fil", ")\n", mode="line", source="p.py")
    )
    assert elsewhere.draft is None  # nor those given at another place


def test_an_invoked_request_offers_the_next_drafts_before_any_sample(engine):
    # Three calls with other arguments above the cursor: the model judges the first draft (the copy among
    # the most alike lines), the next two are the alternatives as they are, and nothing is sampled.
    prefix = (
        "def run(items, rate):\n    total = compute_total(items, rate)\n    return total\n\n"
        "def keep(items):\n    total = compute_total(items, 0)\n    return total\n\n"
        "def check(items, strict):\n    total = compute_total(items, strict=strict)\n    return total\n\n"
        "def again(items, rate):\n    total = compute_total("
    )
    alone = engine.complete(InfillRequest(prefix, "\n    return total\n", mode="line"))
    done = engine.complete(InfillRequest(prefix, "\n    return total\n", mode="line", alternatives=3))
    assert (done.text, done.raw, done.draft) == (alone.text, alone.raw, alone.draft)
    assert done.draft["source"] == "document" and alone.text == "items, rate)"
    assert done.alternatives == ("items, 0)", "items, strict=strict)")  # as alike: the fewer names first
    assert done.timings_ms["alternatives"] < 1.0  # no model call for them
    # One draft only: the second alternative is sampled.
    two = engine.complete(
        InfillRequest(prefix.replace("strict=strict", "rate"), "\n    return total\n", mode="line", alternatives=3)
    )
    assert two.alternatives[0] == "items, 0)" and len(two.alternatives) == 2


def test_a_draft_offered_as_an_alternative_never_replaces_an_answer_the_compiler_blames(engine, monkeypatch):
    from celeris_complete.engine import checking as engine_module

    seen = []
    real = engine_module.check

    def check(text, prefix, suffix, others=(), *rest):
        seen.append(others)
        return real(text, prefix, suffix, others, *rest)

    monkeypatch.setattr(engine_module, "check", check)
    prefix = (
        "def run(items, rate):\n    total = compute_total(items, rate)\n    return total\n\n"
        "def keep(items):\n    total = compute_total(items, 0)\n    return total\n\n"
        "def check(items, rate):\n    total = compute_total(items, strict=rate)\n    return total\n\n"
        "def again(items, rate):\n    total = compute_total("
    )
    done = engine.complete(
        InfillRequest(prefix, "\n    return total\n", mode="line", alternatives=3, language="python")
    )
    drafts = {"items, rate)", "items, strict=rate)", "items, 0)"}  # the three calls' arguments
    assert done.text in drafts and set(done.alternatives) == drafts - {done.text}
    assert seen == [()]  # the check saw no alternative to replace a blamed answer with: no sample was drawn


def test_a_line_draft_the_compiler_blames_gives_way_to_the_next_one(engine):
    # The document's other hole (a line cut short) is drafted for this one: the compiler blames it where
    # the function compiles without it, so the model's answer is judged without it, not withheld after it.
    prefix = "def lines(path):\n    with open(path) as f:\n        return "
    suffix = "\n\n\ndef names(d):\n    return [n for n in d if ]\n"
    broken = Draft("[n for n in d if ]", "typing-cache", 1)
    unchecked = engine.complete(InfillRequest(prefix, suffix, mode="line", drafts=[broken]))
    assert unchecked.draft["source"] == "typing-cache" and unchecked.text == "[n for n in d if ]"
    got = engine.complete(InfillRequest(prefix, suffix, mode="line", drafts=[broken], language="python"))
    assert got.draft is None or got.draft["source"] != "typing-cache"
    assert "if ]" not in got.text and got.syntax in ("ok", "replaced", "reindented", "withheld")
    fine = [Draft("f.read()", "typing-cache", 1)]
    good = engine.complete(InfillRequest(prefix, suffix, mode="line", drafts=fine, language="python"))
    assert good.draft["source"] == "typing-cache" and good.text == "f.read()"  # one that compiles stands
    # At a blank line a draft the check would only re-indent stays the model's to judge.
    prefix, suffix = "def f(xs):\n    for x in xs:\n", "\n    return xs\n"
    moved = engine.complete(
        InfillRequest(prefix, suffix, mode="line", drafts=[Draft("break", "typing-cache", 1)], language="python")
    )
    assert moved.draft["source"] == "typing-cache" and (moved.text, moved.syntax) == ("        break", "reindented")
