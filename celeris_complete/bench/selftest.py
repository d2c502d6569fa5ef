"""`celeris-complete selftest`: latency on this machine against the keystroke budget, and what to change."""

from __future__ import annotations

import dataclasses
import os
import random
import time
from pathlib import Path

import torch

from celeris_complete.backends.traced import TracedModel
from celeris_complete.engine import Engine, InfillRequest
from celeris_complete.engine.tiers import Tier
from celeris_complete.errors import CelerisError
from celeris_complete.system.hardware import cpu_has_bf16_units, hardware

SOURCES = Path(__file__).resolve().parents[1]  # this package's own code: present on every install


def source_files() -> list[Path]:
    """The package's own Python files, in every subpackage, in a fixed order."""
    return sorted(p for p in SOURCES.rglob("*.py") if "__pycache__" not in p.parts)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def sample_cursors(n: int, seed: int = 0, min_offset: int = 0) -> list[tuple[str, int, str]]:
    """(text, cursor offset, mode) at realistic places in real source files: ends of indentation
    (a new statement) and the middle of lines (finishing one), early and late in files (at least
    ``min_offset`` characters in)."""
    rng = random.Random(seed)
    files = source_files()
    texts = [p.read_text(encoding="utf-8") for p in files]
    if min_offset:
        texts = [t for t in texts if t[min_offset:].strip()]
        if not texts:
            raise ValueError(f"no source file here is longer than {min_offset} characters")
    out = []
    while len(out) < n:
        text = rng.choice(texts)
        lines = text.split("\n")
        i = rng.randrange(1, len(lines) - 1)
        line = lines[i]
        if not line.strip():
            continue
        start = sum(len(x) + 1 for x in lines[:i])
        if start < min_offset:
            continue
        indent = len(line) - len(line.lstrip())
        if rng.random() < 0.5:
            out.append((text, start + indent, "block"))
        else:
            col = rng.randrange(indent + 1, len(line)) if len(line) > indent + 1 else len(line)
            out.append((text, start + col, "line"))
    return out


def summarize(values: list[float]) -> dict:
    return {
        "p50": round(percentile(values, 50), 2),
        "p95": round(percentile(values, 95), 2),
        "p99": round(percentile(values, 99), 2),
        "n": len(values),
    }


def one_token_per_step(engine: Engine, cursors: list, steps: int | None = None) -> dict:
    """Refinement time of ``steps`` parallel steps vs one token per step, at equal completion length:
    both fill the whole line canvas (end-of-span is held off), so both write the same number of tokens."""
    base = engine.settings
    canvas = base.canvas_line
    parallel_ms, sequential_ms, parallel_tokens, sequential_tokens = [], [], 0, 0
    engine.use_settings(base.with_overrides({"eos_penalty": 20.0, "eos_penalty_line": 20.0}, "equal-length comparison"))
    try:
        for text, at, _ in cursors:
            a = engine.complete(InfillRequest(text[:at], text[at:], mode="line", max_tokens=canvas, steps=steps))
            b = engine.complete(
                InfillRequest(text[:at], text[at:], mode="line", max_tokens=canvas, steps=canvas, threshold=2.0)
            )
            parallel_ms.append(a.timings_ms["refine"])
            sequential_ms.append(b.timings_ms["refine"])
            parallel_tokens += a.tokens
            sequential_tokens += b.tokens
    finally:
        engine.use_settings(base)
    return {
        "steps": steps or base.steps,
        "canvas": canvas,
        "parallel_refine_ms_mean": round(sum(parallel_ms) / len(parallel_ms), 2),
        "sequential_refine_ms_mean": round(sum(sequential_ms) / len(sequential_ms), 2),
        "speedup": round(sum(sequential_ms) / max(1e-9, sum(parallel_ms)), 2),
        "parallel_tokens": parallel_tokens,
        "sequential_tokens": sequential_tokens,
    }


LONG_CONTEXT = 1024  # tokens: the benchmark's "1k-token context, not cached" case


def long_context_latency(engine: Engine, requests: int, tokens: int = LONG_CONTEXT) -> dict:
    """New places deep in files with the context budget raised to ``tokens`` (or the model's
    limit, when smaller: ``context_tokens_p50`` says what was used), nothing cached."""
    base = engine.settings
    target = min(tokens, engine.max_context - 8)
    suffix = min(base.suffix_tokens, target // 4)
    wide = {"prefix_tokens": target - suffix - 4, "suffix_tokens": suffix, "snippet_tokens": 0}
    engine.use_settings(base.with_overrides(wide, "long-context measurement"))
    times, sizes = [], []
    try:
        for text, at, mode in sample_cursors(requests, seed=3, min_offset=6 * tokens):
            engine.cache.clear()
            done = engine.complete(InfillRequest(text[:at], text[at:], mode=mode))
            times.append(done.timings_ms["total"])
            sizes.append(done.context_tokens)
    finally:
        engine.use_settings(base)
    return {**summarize(times), "context_tokens_p50": percentile(sizes, 50), "model_max_context": engine.max_context}


def run_selftest(
    engine: Engine, budget_ms: float, requests: int = 24, keystrokes: int = 4, long_requests: int | None = None
) -> dict:
    """``long_requests``: places measured with a 1k-token context (default: half of ``requests``; 0: none)."""
    cursors = sample_cursors(requests)
    for text, at, mode in cursors[:3]:  # warm-up
        engine.complete(InfillRequest(text[:at], text[at:], mode=mode))
    miss, keystroke, phases = [], [], {k: [] for k in ("tokenize", "context_encode", "detokenize", "postprocess")}
    tiers = TierReport(engine.settings)
    keystroke_encode, steps, tokens, refine_s = [], [], 0, 0.0
    for text, at, mode in cursors:
        # The user writes the rest of this line anew: the suffix is what follows the line.
        line_end = text.find("\n", at)
        line_end = len(text) if line_end < 0 else line_end
        suffix = text[line_end:]
        engine.cache.clear()
        # As the language server's automatic requests: checked by the compiler, no samples drawn for it.
        done = engine.complete(InfillRequest(text[:at], suffix, mode=mode, language="python", repair_samples=False))
        miss.append(done.timings_ms["total"])
        tiers.local_answer(done, InfillRequest(text[:at], suffix, mode=mode, language="python"))
        for k in phases:
            phases[k].append(done.timings_ms[k])
        steps += done.timings_ms["steps"]
        tokens += done.tokens
        refine_s += done.timings_ms["refine"] / 1e3
        for k in range(1, keystrokes + 1):  # typing inserts characters; the suffix stays
            done = engine.complete(InfillRequest(
                text[: min(line_end, at + k)], suffix, mode=mode, language="python", repair_samples=False
            ))
            keystroke.append(done.timings_ms["total"])
            keystroke_encode.append(done.timings_ms["context_encode"])
    local = engine.supports.steps  # else a remote server: only the latencies as the editor sees them
    speedup = one_token_per_step(engine, cursors[: max(4, requests // 3)]) if local else None
    cache_stats = vars(engine.cache.stats).copy()
    long_requests = max(4, requests // 2) if long_requests is None else long_requests
    long_requests = long_requests if local else 0
    long_context = long_context_latency(engine, long_requests) if long_requests else None
    keystroke_s, miss_s = summarize(keystroke), summarize(miss)
    result = {
        "hardware": hardware(),
        "engine": {
            "model": str(engine.path),
            "device": engine.device,
            "backend": engine.backend,
            "quant": engine.quant,
            "steps": engine.settings.steps,
            "prefix_tokens": engine.settings.prefix_tokens,
            "suffix_tokens": engine.settings.suffix_tokens,
        },
        "budget_ms": budget_ms,
        "keystroke_ms": keystroke_s,  # the context was cached up to the typed characters
        "cache_miss_ms": miss_s,  # a new place in a file: the whole context encoded
        "long_context_ms": long_context,  # a new place with a 1k-token context (or the model's most)
        "phases_ms_p50": {
            **{k: round(percentile(v, 50), 3) for k, v in phases.items()},
            "context_encode_keystroke": round(percentile(keystroke_encode, 50), 3),
            "refine_step": round(percentile(steps, 50), 3),
        },
        "tokens_per_second": round(tokens / refine_s, 1) if refine_s else None,
        "one_token_per_step": speedup,
        "cache": cache_stats,
        "tiers": tiers.result(),  # which tier answered the new places (a second one: asked when unsure)
    }
    ok = keystroke_s["p95"] <= budget_ms and miss_s["p95"] <= budget_ms
    result["verdict"] = "pass" if ok else "fail"
    result["advice"] = [] if ok else advice(engine, result)
    return result


class TierReport:
    """Which tier answers the new places: the local engine, and with ``escalate_endpoint`` set the second
    tier, asked (as the language server asks it) where the local answer is below its threshold.  Its
    latencies are its own: the local ones above are measured without it."""

    def __init__(self, settings) -> None:
        self.tier = Tier(settings) if settings.escalate_endpoint else None
        self.budget_ms = settings.escalate_budget_ms
        self.answers = self.unsure = self.asked = self.answered = self.empty = self.failed = 0
        self.latencies: list[float] = []
        self.errors: list[str] = []

    def local_answer(self, done, req: InfillRequest) -> None:
        if not done.text.strip():
            return
        self.answers += 1
        if done.confidence is None or done.confidence >= done.min_confidence:
            return
        self.unsure += 1
        if self.tier is None:
            return
        self.asked += 1
        t0 = time.perf_counter()
        try:
            escalated = self.tier.complete(dataclasses.replace(req, deadline_ms=self.budget_ms))
        except CelerisError as exc:
            self.failed += 1
            if str(exc) not in self.errors:
                self.errors.append(str(exc))
            return
        self.answered += 1
        self.latencies.append((time.perf_counter() - t0) * 1e3)
        if escalated is None or not escalated.text.strip():
            self.empty += 1  # (nothing to say there, or an answer the checks here withheld)

    def result(self) -> dict:
        out: dict = {"local": {"answers": self.answers, "unsure": self.unsure}, "second": None}
        if self.tier is not None:
            out["second"] = {
                "endpoint": self.tier.endpoint,
                "asked": self.asked,
                "answered": self.answered,
                "empty": self.empty,
                "failed": self.failed,
                "p50_ms": round(percentile(self.latencies, 50), 1) if self.latencies else None,
                "errors": self.errors[:3],
            }
        return out


def advice(engine: Engine, result: dict) -> list[str]:
    tips = []
    s = engine.settings
    if torch.cuda.is_available() and engine.device == "cpu":
        tips.append("a CUDA GPU is present: use --device cuda")
    if engine.backend == "torch" and engine.hf is None and not isinstance(engine.model, TracedModel):
        tips.append("run the model as traced graphs: trace = true")
    if engine.device == "cpu" and engine.quant in ("none", "bf16"):
        tips.append("quantize the linear layers: --quant int8 (about 1.5x faster than fp32 on a 2-core Xeon)")
    if engine.device == "cpu" and engine.quant == "none" and cpu_has_bf16_units() and engine.backend == "torch":
        tips.append("this CPU has bf16 matrix units (AMX): --quant bf16 (the same answers as fp32)")
    if s.steps > 2:
        tips.append(f"fewer refinement steps: --steps {max(1, s.steps // 2)} (now {s.steps})")
    phases = result["phases_ms_p50"]
    if result["cache_miss_ms"]["p95"] > result["budget_ms"] and phases["context_encode"] > phases["refine_step"] * 2:
        tips.append(f"a smaller context: prefix_tokens = {max(32, s.prefix_tokens // 2)} (now {s.prefix_tokens})")
    if s.threads == 0 and (os.cpu_count() or 1) > 8:
        tips.append("fewer CPU threads often help small models: threads = 4")
    if not tips:
        tips.append(f"a larger budget: budget_ms = {int(result['keystroke_ms']['p95'] * 1.5)}")
    return tips


def tier_lines(tiers: dict | None) -> list[str]:
    if not tiers:
        return []
    local, second = tiers["local"], tiers["second"]
    lines = [f"tiers      local answered {local['answers']} new places, {local['unsure']} below min_confidence"]
    if second is None:
        lines[0] += " (no second tier: escalate_endpoint)"
        return lines
    p50 = f", p50 {second['p50_ms']:.0f} ms" if second["p50_ms"] is not None else ""
    lines.append(
        f"           second tier {second['endpoint']}: asked {second['asked']}, answered {second['answered']} "
        f"({second['empty']} empty), failed {second['failed']}{p50}"
    )
    lines += [f"           second tier error: {e}" for e in second["errors"]]
    return lines


def render(result: dict) -> str:
    hw, eng = result["hardware"], result["engine"]
    k, m, p = result["keystroke_ms"], result["cache_miss_ms"], result["phases_ms_p50"]
    sp = result["one_token_per_step"]
    lines = [
        f"hardware   {hw['cpu']}, {hw['cores']} cores, torch {hw['torch']} ({hw['torch_threads']} threads)"
        + (f", GPU {hw['cuda_gpu']}" if hw["cuda_gpu"] else ", no CUDA GPU"),
        f"engine     {eng['backend']} on {eng['device']}, quant {eng['quant']}, {eng['steps']} steps, "
        f"model {eng['model']}",
        f"keystroke  p50 {k['p50']:.1f} ms  p95 {k['p95']:.1f} ms  p99 {k['p99']:.1f} ms  ({k['n']} requests, cached)",
        f"new place  p50 {m['p50']:.1f} ms  p95 {m['p95']:.1f} ms  p99 {m['p99']:.1f} ms  "
        f"({m['n']} requests, uncached)",
        *(
            [
                f"long ctx   p50 {lc['p50']:.1f} ms  p95 {lc['p95']:.1f} ms  p99 {lc['p99']:.1f} ms  "
                f"({lc['n']} requests, uncached, {lc['context_tokens_p50']} context tokens: "
                f"{'the 1k target' if lc['context_tokens_p50'] >= 0.9 * LONG_CONTEXT else 'the model holds no more'})"
            ]
            if (lc := result.get("long_context_ms"))
            else []
        ),
        f"phases p50 tokenize {p['tokenize']:.2f} | context {p['context_encode']:.2f} "
        f"(keystroke {p['context_encode_keystroke']:.2f}) | step {p['refine_step']:.2f} | "
        f"detokenize {p['detokenize']:.2f} | postprocess {p['postprocess']:.2f} ms",
        *(
            [
                f"throughput {result['tokens_per_second']} tokens/s; parallel decoding {sp['speedup']}x faster than "
                f"one token per step ({sp['parallel_refine_ms_mean']:.1f} vs {sp['sequential_refine_ms_mean']:.1f} ms)"
            ]
            if sp
            else ["remote     phases are the server's (Server-Timing); the rest is the network and this client"]
        ),
        *tier_lines(result.get("tiers")),
        f"verdict    {result['verdict'].upper()} against a {result['budget_ms']:.0f} ms budget (p95)",
    ]
    lines += [f"  try: {tip}" for tip in result["advice"]]
    return "\n".join(lines)
