"""The completion pipeline's stages one by one (engine/): planning the span, drafting, the compiler's
verdict and the clock, without the model where they need none."""

import time

import pytest
import torch

from celeris_complete.backends.base import Supports
from celeris_complete.checks.window import window
from celeris_complete.config import load_settings
from celeris_complete.drafts.table import Draft, PreviousCompletions
from celeris_complete.engine import InfillRequest
from celeris_complete.engine.clock import Clock
from celeris_complete.engine.drafting import gather_drafts, usable
from celeris_complete.engine.plan import first_slot, plan_span
from celeris_complete.model.context import Context


@pytest.fixture()
def settings(tmp_path):
    return load_settings({}, environ={}, user_file=tmp_path / "none.toml", cwd=tmp_path)


def test_the_span_is_planned_from_the_request_over_the_settings(settings):
    at_line = plan_span(InfillRequest("x = f(", ")\n"), settings, max_context=1024, max_canvas=64)
    assert at_line.mode == "line" and at_line.canvas == settings.canvas_line
    assert (at_line.prefix_budget, at_line.suffix_budget) == (settings.prefix_tokens, settings.suffix_tokens)
    assert at_line.decode.steps == settings.steps and at_line.decode.temperature == settings.temperature
    asked = InfillRequest("def f():\n    ", "\n", mode="block", max_tokens=200, steps=3, threshold=0.5, seed=7)
    block = plan_span(asked, settings, max_context=1024, max_canvas=48)
    assert block.mode == "block" and block.canvas == 48  # never more than the model's canvas
    assert (block.decode.steps, block.decode.threshold, block.decode.seed) == (3, 0.5, 7)
    small = plan_span(InfillRequest("a", "b"), settings, max_context=128, max_canvas=64)
    assert small.suffix_budget == 32 and small.prefix_budget + small.suffix_budget + small.snippet_budget <= 128


class Tokens:
    """The part of a backend the first slot asks: which tokens may start the span, and a line."""

    starts_line = torch.tensor([False, True, True, False])

    def tokens_starting_with(self, text: str) -> torch.Tensor:
        return torch.tensor([True, True, False, False])


def test_the_first_slot_follows_healing_the_blank_line_and_an_open_line(settings):
    b, can = Tokens(), Supports()
    ctx = Context([1, 2], 0, 0, heal="")
    blank = InfillRequest("def f():\n    ", "\n", language="python")
    plan = plan_span(blank, settings, 1024, 64)
    first_slot(plan, blank, ctx, b, can, settings)
    assert plan.first_allowed.tolist() == [False, True, True, False] and plan.decode.open_line
    assert plan.python and plan.checked  # greedy Python with samples: the compiler judges it
    open_line = InfillRequest("x = ", "\n", mode="line")
    plan = plan_span(open_line, settings, 1024, 64)
    first_slot(plan, open_line, Context([1], 0, 0, heal="ab"), b, can, settings)
    assert plan.first_allowed.tolist() == [False, True, False, False] and not plan.decode.open_line
    assert not plan.python and not plan.checked
    done = InfillRequest("x = 1", "\n", mode="line")
    plan = plan_span(done, settings, 1024, 64)
    first_slot(plan, done, ctx, b, Supports(line_rules=False), settings)
    assert plan.first_allowed is None


class Encoder:
    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]


class Ids:
    eos = 0


def test_drafts_are_gathered_in_order_and_judged_by_the_compiler(settings):
    prefix = "def f(items):\n    total = compute(items)\n    other = compute(items)\n    last = comp"
    suffix = "\n    return total\n"
    cached = [Draft("ute(items) +", "typing-cache", 1)]
    req = InfillRequest(prefix, suffix, mode="line", language="python", drafts=cached)
    plan = plan_span(req, settings, 1024, 64)
    plan.checked = True
    drafts = gather_drafts(req, plan, Context([], 0, 0, heal=""), settings, PreviousCompletions(), Encoder(), Ids(),
                           Supports())  # fmt: skip
    assert drafts.win is not None
    # The caller's draft leaves a line the compiler blames: the document's continuation is offered instead.
    assert [d.text for d in drafts.offers] == ["ute(items)"] and drafts.offers[0].source != "typing-cache"
    assert drafts.ids[0].tolist() == [ord(c) for c in "ute(items)"] + [Ids.eos]
    off = settings.with_overrides({"drafts": False}, "test")
    assert gather_drafts(req, plan, Context([], 0, 0, heal=""), off, PreviousCompletions(), Encoder(), Ids(),
                         Supports()).offers == []  # fmt: skip


def test_spare_drafts_shown_are_distinct_non_empty_and_compile():
    prefix, suffix = "def f(x):\n    y = ", "\n    return y\n"
    spare = [Draft("x + 1", "document", 2), Draft("x + 1", "workspace", 1), Draft("   ", "document", 1),
             Draft("x +", "document", 1), Draft("x * 2", "document", 1)]  # fmt: skip
    assert usable(spare, "x * 2", prefix, suffix, "line", None) == ["x + 1", "x +"]
    assert usable(spare, "x * 2", prefix, suffix, "line", window(prefix, suffix)) == ["x + 1"]


def test_the_clock_reports_each_phase_between_its_marks():
    clock = Clock()
    names = ["drafting", "drafted", "queued", "locked", "encoded", "refined", "detokenized", "sampling", "sampled",
             "checking", "done"]  # fmt: skip
    for name in names:
        time.sleep(0.002)
        clock.mark(name)
    t = clock.timings_ms([0.001, 0.0025], alternatives=True)
    m = clock.marks
    assert t["refine"] == pytest.approx((m["refined"] - m["encoded"]) * 1e3)
    assert t["postprocess"] == pytest.approx((m["sampling"] - m["detokenized"] + m["checking"] - m["sampled"]) * 1e3)
    assert t["total"] == pytest.approx((m["done"] - clock.t0) * 1e3) and t["total"] >= 22
    assert t["steps"] == [1.0, 2.5] and t["alternatives"] > 0
    assert "alternatives" not in clock.timings_ms([], alternatives=False)
