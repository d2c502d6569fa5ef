"""The traced refinement step (traced.py) on the real shipped model: the same answers as the eager one."""

import os
import shutil
import threading
import time
from pathlib import Path

import pytest
import torch
from torch import nn

from celeris_complete.backends import trace_store
from celeris_complete.backends.traced import TracedModel, _close, tolerance
from celeris_complete.config import load_settings
from celeris_complete.engine import Engine, InfillRequest
from celeris_complete.model.directory import load_model_dir

PROMPTS = [
    ("def add(a, b):\n    return ", "\n"),
    ("import os\n\n\ndef list_dir(path):\n    return os.", "\n"),
    ("class Point:\n    def __init__(self, x, y):\n        self.x = x\n        ", "\n"),
    ("for i in range(", "):\n    print(i)\n"),
]


def engine(model_dir, **overrides) -> Engine:
    values = {"model": str(model_dir), **overrides}
    return Engine(load_settings(values, environ={}, user_file=model_dir / "none"))


@pytest.mark.parametrize("quant", ["none", "int8"])
def test_traced_engine_answers_as_the_eager_one(shipped_model_dir, quant):
    traced, eager = engine(shipped_model_dir, quant=quant), engine(shipped_model_dir, quant=quant, trace=False)
    assert isinstance(traced.model, TracedModel) and not isinstance(eager.model, TracedModel)
    for prefix, suffix in PROMPTS:
        for mode in ("line", "block"):
            assert (
                traced.complete(InfillRequest(prefix, suffix, mode=mode)).raw
                == eager.complete(InfillRequest(prefix, suffix, mode=mode)).raw
            )


def test_graphs_are_kept_loaded_at_the_next_start_and_traced_again_when_broken(tiny_model_dir, tmp_path):
    kept = tmp_path / "traced"
    first = engine(tiny_model_dir, trace_cache=str(kept))
    assert isinstance(first.model, TracedModel) and not first.model.from_store
    (folder,) = kept.iterdir()
    assert sorted(p.name for p in folder.iterdir()) == ["extend.pt", "fresh.pt", "step.pt"]
    want = [first.complete(InfillRequest(p, s, mode=m)).raw for p, s in PROMPTS for m in ("line", "block")]

    def started(where: Path = kept) -> TracedModel:
        e = engine(tiny_model_dir, trace_cache=str(where))
        assert isinstance(e.model, TracedModel)
        assert [e.complete(InfillRequest(p, s, mode=m)).raw for p, s in PROMPTS for m in ("line", "block")] == want
        return e.model

    assert started().from_store
    assert engine(tiny_model_dir, quant="none", trace_cache=str(kept)).model.from_store is False  # run otherwise
    assert len(list(kept.iterdir())) == 2
    step = folder / "step.pt"
    step.write_bytes(step.read_bytes()[:1000])  # cut short: traced again, and replaced
    assert not started().from_store
    assert started().from_store
    shutil.copy(folder / "fresh.pt", step)  # loads, but is another call's graph
    assert not started().from_store
    assert started().from_store
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert not started(blocked / "traced").from_store  # cannot be written: traced at every start
    assert not started(blocked / "traced").from_store


def test_graphs_that_cannot_be_written_are_used_all_the_same(tiny_model_dir, tmp_path, monkeypatch):
    def full(*args, **kwargs):
        raise RuntimeError("PytorchStreamWriter failed writing file data: No space left on device")

    monkeypatch.setattr(torch.jit, "save", full)  # (a full disk, as torch reports it)
    traced = engine(tiny_model_dir, trace_cache=str(tmp_path / "traced"))
    assert isinstance(traced.model, TracedModel) and not traced.model.from_store
    assert list((tmp_path / "traced").iterdir()) == []  # nothing half-written left behind
    assert (
        traced.complete(InfillRequest(*PROMPTS[0])).raw
        == engine(tiny_model_dir, trace=False).complete(InfillRequest(*PROMPTS[0])).raw
    )


def test_traced_graphs_follow_lengths_and_canvas(shipped_model_dir):
    loaded = load_model_dir(shipped_model_dir)
    model = loaded.model.eval()
    traced = TracedModel(model, "cpu", loaded.tokenizer.mask_id)
    with torch.inference_mode():
        for context, canvas in [(5, 1), (200, 24), (440, 64)]:
            ids = torch.randint(0, 8000, (1, context))
            _, kv = model.encode_context(ids)
            torch.testing.assert_close(traced.encode_context(ids)[1], kv)
            slots = torch.randint(0, 8000, (1, canvas))
            torch.testing.assert_close(traced.span_step(slots, kv), model.span_step(slots, kv))
        for past_len, new in [(1, 1), (100, 1), (300, 17)]:  # a cached context extended by typed tokens
            ids = torch.randint(0, 8000, (1, past_len + new))
            _, past = model.encode_context(ids[:, :past_len])
            want = model.encode_context(ids[:, past_len:], past)[1]
            torch.testing.assert_close(traced.encode_context(ids[:, past_len:], past)[1], want, atol=1e-4, rtol=1e-4)
        # a context 52 positions short of the model's limit: a 64-slot canvas or 60 more tokens pass it
        _, kv = model.encode_context(torch.randint(0, 8000, (1, model.cfg.max_positions - 52)))
        with pytest.raises(ValueError, match="exceeds max_positions"):
            traced.span_step(torch.randint(0, 8000, (1, 64)), kv)  # the eager model's bounds, kept
        with pytest.raises(ValueError, match="exceeds max_positions"):
            traced.encode_context(torch.randint(0, 8000, (1, 60)), kv)


def test_a_failed_trace_falls_back_to_the_eager_step(shipped_model_dir, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no tracing here")

    monkeypatch.setattr(torch.jit, "trace", broken)
    with pytest.warns(UserWarning, match="could not trace the model"):
        fallback = engine(shipped_model_dir, quant="none", trace_cache="off")  # (kept graphs are not traced)
    assert not isinstance(fallback.model, TracedModel)
    assert (
        fallback.complete(InfillRequest(*PROMPTS[0])).text
        == engine(shipped_model_dir, quant="none", trace=False).complete(InfillRequest(*PROMPTS[0])).text
    )


def test_tracing_in_the_background_answers_at_once_and_then_switches(shipped_model_dir, monkeypatch):
    import celeris_complete.backends.ours as backend_ours

    # Tracing in another thread waits for the test's word: the engine must answer (eagerly) meanwhile.
    caller, entered, go, threads = threading.current_thread(), threading.Event(), threading.Event(), []

    def held_trace(*args, **kwargs):
        threads.append(threading.current_thread())
        entered.set()
        if threading.current_thread() is not caller:
            assert go.wait(300), "the test never let tracing go on"
        return TracedModel(*args, **kwargs)

    monkeypatch.setattr(backend_ours, "TracedModel", held_trace)
    settings = load_settings({"model": str(shipped_model_dir), "quant": "none"}, environ={}, user_file=None)
    background = Engine(settings, trace_in_background=True)
    try:
        assert entered.wait(300), "tracing never started"
        assert threads == [background.tracer] and threads[0] is not caller, "tracing ran in the caller's thread"
        first = background.complete(InfillRequest(*PROMPTS[1])).raw  # while tracing waits: the eager model answers
        assert not isinstance(background.model, TracedModel) and background.tracer.is_alive()
    finally:
        go.set()
    background.tracer.join(timeout=300)
    assert not background.tracer.is_alive(), "tracing in the background did not end in 300 s"
    assert isinstance(background.model, TracedModel), "the engine did not switch to the traced model"
    assert (
        background.complete(InfillRequest(*PROMPTS[1])).raw
        == first
        == engine(shipped_model_dir, quant="none").complete(InfillRequest(*PROMPTS[1])).raw
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_half_precision_graph_may_round_differently_but_not_answer_differently(dtype):
    # A fused graph rounds at other places than the eager operations: a few units in the last place
    # of the weights' type, over the layers, is not a failed trace; logits of another length are.
    model = nn.Linear(4, 4).to(dtype)
    tol = tolerance(model)
    assert tol > tolerance(nn.Linear(4, 4))  # fp32 keeps the strict check
    want = (torch.randn(2, 64, 512, generator=torch.Generator().manual_seed(0)) * 4).to(dtype)
    few_ulps = want + want.abs() * 4 * torch.finfo(dtype).eps
    assert _close(few_ulps, want, tol) and not _close(few_ulps, want, 1e-3)
    other = (torch.randn(2, 64, 512, generator=torch.Generator().manual_seed(1)) * 4).to(dtype)
    assert not _close(other, want, tol)
    assert not _close(want[:, :63], want[:, 1:], tol)  # shifted by a position


def test_the_store_keeps_the_most_recently_used_models_graphs(tmp_path):
    now = time.time()
    for i in range(trace_store.KEEP + 2):  # the oldest first
        (tmp_path / f"model{i}").mkdir()
        os.utime(tmp_path / f"model{i}", (now - 100 + i, now - 100 + i))
    (tmp_path / "model9.tmp-1-2").mkdir()  # half-written by a process that died
    os.utime(tmp_path / "model9.tmp-1-2", (now - 2 * trace_store.STALE_S,) * 2)
    (tmp_path / "model8.tmp-3-4").mkdir()  # being written now
    trace_store.TraceStore(tmp_path / "model0").evict()
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert kept == [f"model{i}" for i in range(2, trace_store.KEEP + 2)] + ["model8.tmp-3-4"]
