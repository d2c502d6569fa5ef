"""Engine mechanics on a small model written by the real training pipeline."""


import pytest
import torch

from celeris_complete.config import load_settings
from celeris_complete.engine import Cancelled, Engine, InfillRequest
from celeris_complete.errors import CelerisError

PREFIX = "def add(first, second):\n    total = first + second\n    return tot"


def make_engine(model_dir, **overrides):
    return Engine(load_settings({"model": str(model_dir), **overrides}, environ={}, user_file=model_dir / "none"))


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    return make_engine(tiny_model_dir)


def test_cache_hit_equals_miss(engine):
    engine.cache.clear()
    first = engine.complete(InfillRequest(PREFIX, "\n", mode="block"))
    again = engine.complete(InfillRequest(PREFIX, "\n", mode="block"))
    assert (first.cache, again.cache) == ("miss", "hit")
    assert again.text == first.text and again.raw == first.raw


def test_typing_reuses_the_context(engine):
    engine.cache.clear()
    engine.complete(InfillRequest(PREFIX[:-3], "\n"))
    typed = engine.complete(InfillRequest(PREFIX, "\n"))
    assert typed.cache == "partial"
    engine.cache.clear()
    fresh = engine.complete(InfillRequest(PREFIX, "\n"))
    assert fresh.cache == "miss" and fresh.raw == typed.raw
    assert engine.cache.stats.partial >= 1 and engine.cache.stats.misses >= 2


def test_token_healing_constrains_the_first_token(engine):
    from celeris_complete.model.context import build_context

    heal = build_context(engine.tok, PREFIX, "\n", 256, 64).heal
    assert heal and "tot".endswith(heal.lstrip())
    done = engine.complete(InfillRequest(PREFIX, "\n", mode="line"))
    assert done.raw.startswith(heal)  # the model rewrites the cut token, then goes on
    assert not done.text.startswith(heal)


def test_cancel_between_steps(tiny_model_dir):
    engine = make_engine(tiny_model_dir, drafts=False)  # a draft taken whole would finish in one step
    with pytest.raises(Cancelled):
        engine.complete(InfillRequest(PREFIX, "\n", should_cancel=lambda: True))
    calls = {"n": 0}

    def cancel_after_first_step():
        calls["n"] += 1
        return calls["n"] > 2

    with pytest.raises(Cancelled):
        engine.complete(InfillRequest(PREFIX, "\n", steps=8, should_cancel=cancel_after_first_step))


def first_step_logits(engine):
    """The logits of a first refinement step at PREFIX, from what the engine runs (traced graphs, eager
    module or ONNX Runtime's sessions)."""
    ids = torch.tensor([engine.tok.encode(PREFIX)])
    with torch.inference_mode():
        _, kv = engine.model.encode_context(ids)
        return engine.model.span_step(torch.full((1, 8), engine.ids.mask), kv)


def assert_tracks(fp32, int8):
    """Int8 arithmetic (not the float numbers themselves) whose logits and answers stay close to fp32's."""
    a, b = first_step_logits(fp32), first_step_logits(int8)
    gap = (a - b).abs().max().item()
    assert gap > 1e-4, f"the same logits as fp32 (off by {gap:g}): not int8 arithmetic"
    assert gap < 0.2 * a.std().item(), f"logits off by {gap:g} (their spread: {a.std().item():g})"
    same = [
        fp32.complete(InfillRequest(p, s, mode="block")).raw == int8.complete(InfillRequest(p, s, mode="block")).raw
        for p, s in PROMPTS
    ]
    assert sum(same) >= len(PROMPTS) - 1, same


def test_int8_runs(tiny_model_dir):
    from torch import nn
    from torch.ao.nn.quantized.dynamic import Linear as Int8Linear

    fp32, int8 = make_engine(tiny_model_dir, quant="none"), make_engine(tiny_model_dir, quant="int8")
    assert int8.quant == "int8" and fp32.quant == "none"
    # The eager module (the traced graphs are traced from it): every linear layer int8, the tied output
    # layer included, with a scale per output row.
    module = getattr(int8.model, "model", int8.model)
    float_linears = [m for m in getattr(fp32.model, "model", fp32.model).modules() if isinstance(m, nn.Linear)]
    assert not [m for m in module.modules() if isinstance(m, nn.Linear)], "a float linear layer is left"
    linears = [m for m in module.modules() if isinstance(m, Int8Linear)]
    assert len(linears) == len(float_linears) + 1 and module.head in linears
    for m in linears:
        assert m.weight().dtype == torch.qint8 and m.weight().qscheme() == torch.per_channel_affine
    assert_tracks(fp32, int8)


def test_bf16_runs(tiny_model_dir):
    import warnings

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = make_engine(tiny_model_dir, quant="bf16")
    assert next(engine.model.parameters()).dtype == torch.bfloat16
    assert isinstance(engine.complete(InfillRequest(PREFIX, "\n")).text, str)


def test_unavailable_choices_are_clear(tiny_model_dir):
    with pytest.raises(CelerisError, match="fp16 is not offered by the onnx backend"):
        make_engine(tiny_model_dir, backend="onnx", quant="fp16")
    with pytest.raises(CelerisError, match="bf16 is not offered by the onnx backend"):
        make_engine(tiny_model_dir, backend="onnx", quant="bf16")
    with pytest.raises(CelerisError, match="fp16 needs a CUDA device"):
        make_engine(tiny_model_dir, quant="fp16", device="cpu")


def test_no_gpu_falls_back_with_a_warning(tiny_model_dir):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.warns(UserWarning, match="no CUDA GPU"):
        engine = make_engine(tiny_model_dir, device="cuda")
    assert engine.device == "cpu"


PROMPTS = [
    (PREFIX, "\n"),
    ("import os\n\n\ndef walk(root):\n    for name in os.listdir(", "):\n        print(name)\n"),
    ("class A:\n    def __init__(self):\n        ", "\n"),
]


# The ONNX backend's tests are test_engine.py's: one export of the shipped model, which takes most of a
# minute (torch.export), whatever the model's size.


def test_missing_onnxruntime_falls_back_with_one_warning(tiny_model_dir, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails as if not installed
    with pytest.warns(UserWarning, match="onnxruntime is not installed.*torch backend"):
        engine = make_engine(tiny_model_dir, backend="onnx")
    assert engine.backend == "torch" and isinstance(engine.complete(InfillRequest(*PROMPTS[0])).text, str)


def test_model_recommended_decoding_replaces_defaults_only(tiny_model_dir, tmp_path):
    import json
    import shutil

    model = tmp_path / "m"
    shutil.copytree(tiny_model_dir, model, ignore=shutil.ignore_patterns(".work"))
    cfg = json.loads((model / "config.json").read_text())
    cfg["decode"] = {"steps": 6, "eos_penalty": 1.5}
    (model / "config.json").write_text(json.dumps(cfg))
    engine = make_engine(model)
    assert (engine.settings.steps, engine.settings.eos_penalty) == (6, 1.5)
    assert make_engine(model, steps=2).settings.steps == 2  # the user's value wins


def test_a_completion_at_a_blank_line_does_not_start_by_ending_it(engine):
    """At a blank line (the cursor at its start or after its indentation), a completion never starts with
    a line break or end-of-span, which would leave the line empty, nor ends right after its indentation;
    elsewhere it may."""
    prefix = "def add(first, second):\n    total = first + second\n"
    for cursor in (prefix, prefix + "    "):
        for steps, mode in ((1, "line"), (4, "line"), (4, "block")):
            done = engine.complete(InfillRequest(cursor, "\n", mode=mode, steps=steps))
            assert done.tokens > 0 and not done.raw.startswith(("\n", "\r")), done.raw
            assert done.raw.strip(), "an answer that opens a blank line is not its indentation alone"
    allowed = engine._starts_line
    blank = engine.ids.blank
    assert blank[engine.tok.encode("    ")].all() and not blank[engine.tok.encode("\n")].any()
    nl = [i for i, b in enumerate(engine.tok.token_bytes) if b.startswith(b"\n")]
    assert nl and not allowed[nl].any() and not allowed[engine.tok.eos_id]
    assert allowed.sum() > len(engine.tok.token_bytes) // 2
