"""The server's continuous batching (serve_batch.py, batch_step.py) in process: answers identical to
one request at a time, deadlines and cancellation per request, requests joining a running batch."""

from __future__ import annotations

import queue
import threading
import time

import pytest
import torch

from celeris_complete.bench.serve import places
from celeris_complete.config import load_settings
from celeris_complete.engine import Engine, InfillRequest
from celeris_complete.model.context_cache import ContextCache
from celeris_complete.model.diffusion import Cancelled
from celeris_complete.serve.batch import BatchScheduler
from celeris_complete.serve.batch_step import BatchStep, eager_model
from celeris_complete.serve.scheduler import Job, Scheduler


@pytest.fixture(scope="module")
def engine(shipped_model_dir):
    return Engine(load_settings(overrides={"model": str(shipped_model_dir), "threads": 1}))


class Collect:
    """A job's events, as the server's handler receives them."""

    def __init__(self) -> None:
        self.events: queue.Queue = queue.Queue()
        self.steps: list[tuple] = []

    def __call__(self, event: tuple) -> None:
        if event[0] == "step":
            self.steps.append(event)
        else:
            self.events.put(event)

    def result(self, timeout: float = 120):
        return self.events.get(timeout=timeout)


def submit_all(scheduler: BatchScheduler, jobs: list[dict]) -> list[Collect]:
    out = []
    for spec in jobs:
        c = Collect()
        scheduler.submit(Job(emit=c, **spec))
        out.append(c)
    return out


@pytest.fixture
def scheduler(engine):
    s = BatchScheduler(64, 16, on_batch=batches.append)
    batches.clear()
    s.start(engine)
    yield s
    s.close()


batches: list[int] = []


def test_batched_answers_are_those_of_one_request_at_a_time(engine, scheduler):
    specs = [
        # A client of its own each: a context that extends another's cached one (the same client's; a
        # partial hit) is encoded in two parts, whose last bits may differ from one encoded whole (found
        # when the places changed: a 3-token hit turned 'ai==rep,' into 'ai=='), which is the cache's
        # matter, not batching's. So every request here is its client's first, and each one alone below
        # starts from an empty cache too.
        {"prefix": b["prompt"], "suffix": b["suffix"], "mode": b["mode"], "client": f"c{i}"}
        for i, b in enumerate(places(8, seed=5))
    ]
    specs[1]["max_tokens"] = 7  # canvases of different lengths in one batch
    specs[2].update(n=3, temperature=0.8, seed=42)  # sampled choices, each its own row
    specs[3]["steps"] = 9
    # At a blank line (the cursor at its start, after its indentation): the blank-line rules.
    blank_line = "def add(a, b):\n    total = a + b\n"
    for indent in ("", "    "):
        for m in ("line", "block"):
            specs.append({"prefix": blank_line + indent, "suffix": "\n", "mode": m, "client": f"b{indent}{m}"})
    # Mid-line where the line cannot end yet (``self.``, ``data = {``): the open-line rule, as alone (without
    # it the shipped model ends both lines at once: an empty answer).
    for open_line, below in (("    result = self.", "\n    pass\n"), ("    data = {", "\n")):
        prefix = "def h(a, b):\n    c = a\n" + open_line
        specs.append({"prefix": prefix, "suffix": below, "mode": "line", "client": open_line})
    got = [c.result() for c in submit_all(scheduler, specs)]
    assert max(batches) >= 4, f"the requests were not batched: {batches}"
    for spec, (kind, result) in zip(specs, got):
        assert kind == "done", result
        n, seed = spec.get("n", 1), spec.get("seed")
        for i, c in enumerate(result.completions):
            with engine.using_cache(ContextCache()):  # a miss, as each client's first request above
                alone = engine.complete(InfillRequest(
                    spec["prefix"], spec["suffix"], mode=spec["mode"], max_tokens=spec.get("max_tokens"),
                    steps=spec.get("steps"), temperature=spec.get("temperature"),
                    seed=None if seed is None else seed + i,
                ))  # fmt: skip
            assert (c.raw, c.text, c.steps, c.mode) == (alone.raw, alone.text, alone.steps, alone.mode), spec
        assert len(result.completions) == n
        assert result.completions[0].timings_ms["refine"] > 0 and result.queue_ms >= 0


def test_a_client_typing_extends_its_cached_context(scheduler):
    text = "def total(values):\n    result = 0\n    for v in values:\n        result += v\n    return res"
    states = []
    for typed in (text, text + "ult * 2 + 1", text + "ult * 2 + 1"):
        (c,) = submit_all(scheduler, [{"prefix": typed, "suffix": "\n", "client": "typist"}])
        states.append(c.result()[1].completions[0].cache)
    assert states == ["miss", "partial", "hit"]
    (c,) = submit_all(scheduler, [{"prefix": text, "suffix": "\n", "client": "someone else"}])
    assert c.result()[1].completions[0].cache == "miss", "contexts are cached per client"


def test_one_at_a_time_clients_typing_in_turn_keep_their_own_contexts(engine):
    """Without batching too: many clients typing in turn each extend their own last context (one shared
    cache of a few contexts would be a miss for every request)."""
    one = Scheduler(64)
    one.start(engine)
    try:
        own_before = vars(engine.cache.stats).copy()
        engine.previous._answers.pop(None, None)
        keys_before = set(engine.previous._answers)
        bodies = places(6, seed=3)
        states = []
        for typed in range(3):  # six clients, each types into its place, in turn
            for k, b in enumerate(bodies):
                prefix = b["prompt"] + "x = 1" * typed
                (c,) = submit_all(one, [{"prefix": prefix, "suffix": b["suffix"], "mode": "line", "client": f"c{k}"}])
                states.append(c.result()[1].completions[0].cache)
        assert states[:6] == ["miss"] * 6 and set(states[6:]) == {"partial"}, states
        assert vars(engine.cache.stats) == own_before, "the engine's own cache was left alone"
        # Earlier answers become drafts for their own client only, never for another one.
        kept = set(engine.previous._answers) - keys_before
        assert kept and kept <= {f"client:c{k}" for k in range(6)}, kept
    finally:
        one.close()


def test_deadlines_and_cancellation_per_request(scheduler):
    body = places(3, seed=9)
    long = {"prefix": body[0]["prompt"], "suffix": body[0]["suffix"], "mode": "block", "steps": 64, "max_tokens": 64}
    leaving, late, other = submit_all(
        scheduler,
        [
            {**long, "stream_steps": True},
            {**long, "deadline": float("inf")},
            {"prefix": body[1]["prompt"], "suffix": body[1]["suffix"], "mode": body[1]["mode"]},
        ],
    )
    # The first request's client leaves after its first step: it stops, the others go on.
    while not leaving.steps:
        threading.Event().wait(0.005)
    scheduler.rows[0].request.job.cancel.set()
    kind, exc = leaving.result()
    assert kind == "error" and isinstance(exc, Cancelled)
    assert other.result()[0] == "done" and late.result()[0] == "done"
    # A request whose deadline passes mid-decode gets an anytime answer (the open slots committed): fewer
    # steps than the same request takes without one.
    t0 = time.perf_counter()
    (alone,) = submit_all(scheduler, [long])
    kind, result = alone.result()
    took = time.perf_counter() - t0
    full = result.completions[0].steps
    assert kind == "done" and full >= 8, full
    (quick,) = submit_all(scheduler, [{**long, "deadline": time.perf_counter() + took / 4}])
    kind, result = quick.result()
    assert kind == "done" and 1 <= result.completions[0].steps < full, (result.completions[0].steps, full)


def test_batch_step_matches_the_model_row_by_row(engine):
    model = eager_model(engine.model)
    batch = BatchStep(model, 4, engine.ids.mask)
    gen = torch.Generator().manual_seed(0)
    rows = []
    with torch.inference_mode():
        for length, canvas in ((30, 24), (200, 64), (75, 5)):
            _, kv = model.encode_context(torch.randint(0, 8000, (1, length), generator=gen))
            slots = torch.randint(0, 8000, (1, canvas), generator=gen)
            slots[0, ::2] = engine.ids.mask
            batch.add(kv)
            rows.append((kv, slots))
        batch.remove(0)  # the last row moves into its place
        rows = [rows[2], rows[1]]
        out = batch.step([s for _, s in rows])
        for (kv, slots), logits in zip(rows, out):
            assert torch.equal(logits, model.span_step(slots, kv)), "int8: row by row, bit for bit"


def test_a_request_alone_takes_the_engines_own_step(engine, scheduler, monkeypatch):
    """One row in the batch: no batched pass (its overhead is what a lone client would pay), same answer."""
    batched = []
    step = scheduler.batch.step
    monkeypatch.setattr(scheduler.batch, "step", lambda slots: batched.append(len(slots)) or step(slots))
    body = places(1, seed=11)[0]
    (c,) = submit_all(scheduler, [{"prefix": body["prompt"], "suffix": body["suffix"], "mode": body["mode"]}])
    kind, result = c.result()
    assert kind == "done" and batched == []
    alone = engine.complete(InfillRequest(body["prompt"], body["suffix"], mode=body["mode"]))
    assert (result.completions[0].raw, result.completions[0].steps) == (alone.raw, alone.steps)


def test_by_default_an_int8_model_on_the_cpu_is_served_one_request_at_a_time(engine):
    assert engine.quant == "int8" and engine.device == "cpu"
    for auto, batched in ((True, False), (False, True)):
        s = BatchScheduler(8, 4, auto=auto)
        s.start(engine)
        try:
            assert (s.batch is not None) == batched
            (c,) = submit_all(s, [{"prefix": "def add(a, b):\n    return ", "suffix": "\n", "mode": "line"}])
            assert c.result()[0] == "done"
        finally:
            s.close()
