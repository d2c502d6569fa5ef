"""Engine mechanics on a small model written by the real training pipeline."""

import pytest

from celeris_complete.config import load_settings
from celeris_complete.engine import Cancelled, Engine
from celeris_complete.errors import CelerisError

PREFIX = "def add(first, second):\n    total = first + second\n    return tot"


def make_engine(model_dir, **overrides):
    return Engine(load_settings({"model": str(model_dir), **overrides}, environ={}, user_file=model_dir / "none"))


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    return make_engine(tiny_model_dir)


def test_cache_hit_equals_miss(engine):
    engine.cache.clear()
    first = engine.complete(PREFIX, "\n", mode="block")
    again = engine.complete(PREFIX, "\n", mode="block")
    assert (first.cache, again.cache) == ("miss", "hit")
    assert again.text == first.text and again.raw == first.raw


def test_typing_reuses_the_context(engine):
    engine.cache.clear()
    engine.complete(PREFIX[:-3], "\n")
    typed = engine.complete(PREFIX, "\n")
    assert typed.cache == "partial"
    engine.cache.clear()
    fresh = engine.complete(PREFIX, "\n")
    assert fresh.cache == "miss" and fresh.raw == typed.raw
    assert engine.cache.stats.partial >= 1 and engine.cache.stats.misses >= 2


def test_token_healing_constrains_the_first_token(engine):
    from celeris_complete.context import build_context

    heal = build_context(engine.tok, PREFIX, "\n", 256, 64).heal
    assert heal and "tot".endswith(heal.lstrip())
    done = engine.complete(PREFIX, "\n", mode="line")
    assert done.raw.startswith(heal)  # the model rewrites the cut token, then goes on
    assert not done.text.startswith(heal)


def test_cancel_between_steps(tiny_model_dir):
    engine = make_engine(tiny_model_dir, drafts=False)  # a draft taken whole would finish in one step
    with pytest.raises(Cancelled):
        engine.complete(PREFIX, "\n", should_cancel=lambda: True)
    calls = {"n": 0}

    def cancel_after_first_step():
        calls["n"] += 1
        return calls["n"] > 2

    with pytest.raises(Cancelled):
        engine.complete(PREFIX, "\n", steps=8, should_cancel=cancel_after_first_step)


def test_int8_runs(tiny_model_dir):
    done = make_engine(tiny_model_dir, quant="int8").complete(PREFIX, "\n")
    assert isinstance(done.text, str)


def test_bf16_runs(tiny_model_dir):
    import warnings

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = make_engine(tiny_model_dir, quant="bf16")
    assert next(engine.model.parameters()).dtype == torch.bfloat16
    assert isinstance(engine.complete(PREFIX, "\n").text, str)


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


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory):
    import os

    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        del os.environ["XDG_CACHE_HOME"]
    else:
        os.environ["XDG_CACHE_HOME"] = old


def test_onnx_backend_matches_torch(tiny_model_dir, onnx_cache):
    torch_engine = make_engine(tiny_model_dir)
    onnx_engine = make_engine(tiny_model_dir, backend="onnx")
    assert onnx_engine.backend == "onnx"
    for prefix, suffix in PROMPTS:
        a = torch_engine.complete(prefix, suffix, mode="block")
        b = onnx_engine.complete(prefix, suffix, mode="block")
        assert a.raw == b.raw
    # The cache works on the stacked keys/values too: typing reuses the context.
    onnx_engine.cache.clear()
    onnx_engine.complete(PREFIX[:-2], "\n")
    typed = onnx_engine.complete(PREFIX, "\n")
    assert typed.cache == "partial" and typed.raw == torch_engine.complete(PREFIX, "\n").raw


def test_onnx_int8_runs(tiny_model_dir, onnx_cache):
    engine = make_engine(tiny_model_dir, backend="onnx", quant="int8")
    assert engine.backend == "onnx" and isinstance(engine.complete(*PROMPTS[1]).text, str)


def test_missing_onnxruntime_falls_back_with_one_warning(tiny_model_dir, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails as if not installed
    with pytest.warns(UserWarning, match="onnxruntime is not installed.*torch backend"):
        engine = make_engine(tiny_model_dir, backend="onnx")
    assert engine.backend == "torch" and isinstance(engine.complete(*PROMPTS[0]).text, str)


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
            done = engine.complete(cursor, "\n", mode=mode, steps=steps)
            assert done.tokens > 0 and not done.raw.startswith(("\n", "\r")), done.raw
            assert done.raw.strip(), "an answer that opens a blank line is not its indentation alone"
    allowed = engine._starts_line
    blank = engine.ids.blank
    assert blank[engine.tok.encode("    ")].all() and not blank[engine.tok.encode("\n")].any()
    nl = [i for i, b in enumerate(engine.tok.token_bytes) if b.startswith(b"\n")]
    assert nl and not allowed[nl].any() and not allowed[engine.tok.eos_id]
    assert allowed.sum() > len(engine.tok.token_bytes) // 2
