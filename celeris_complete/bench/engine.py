"""Engine benchmark: latency, throughput, parallel-decoding speedup, exact match and memory,
for each backend and quantization, each measured in a fresh process."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np

from celeris_complete.bench.selftest import run_selftest
from celeris_complete.engine import Engine, InfillRequest
from celeris_complete.system.hardware import cpu_has_bf16_units


def default_configs() -> list[str]:
    """fp32 and int8 on both backends, and PyTorch bf16 where the CPU has bf16 matrix units."""
    bf16 = ["torch:bf16"] if cpu_has_bf16_units() else []
    return ["torch:none", "torch:int8", *bf16, "onnx:none", "onnx:int8"]


def validation_exact_match(engine: Engine, samples: int, seed: int = 0) -> dict:
    """Decode held-out spans through the whole engine (text in, text out) and compare the raw span."""
    from celeris_complete.training.data import SpanSampler
    from celeris_complete.training.validation import held_out_tokens

    if samples <= 0:
        return {"exact_match": None, "empty_rate": None, "samples": 0}
    tok = engine.tok
    tokens, _ = held_out_tokens(engine.path, tok)
    sampler = SpanSampler(tokens, tok, 320, 64)
    rng = np.random.default_rng(seed)
    exact = total = empty = 0
    while total < samples:
        batch = sampler.sample(rng, 16, 32)
        for ctx, canvas, n in zip(batch.context, batch.canvas, batch.span_len.tolist()):
            if n >= 32 or tok.file_id in ctx or n == 0:
                continue
            pre = int(np.flatnonzero(ctx == tok.pre_id)[0])
            prefix, suffix = tok.decode(ctx[pre + 1 :].tolist()), tok.decode(ctx[1:pre].tolist())
            truth = tok.decode(canvas[:n].tolist())
            # The text is a window cut from a file: it neither starts nor ends the file.
            done = engine.complete(
                InfillRequest(prefix, suffix, mode="block", max_tokens=32, file_start=False, file_end=False)
            )
            after_cursor = done.raw[len(done.heal) :]  # the healed token is rewritten by the model
            exact += after_cursor == truth
            empty += done.tokens == 0
            total += 1
            if total >= samples:
                break
    return {"exact_match": round(exact / total, 4), "empty_rate": round(empty / total, 4), "samples": total}


def measure(settings, requests: int, samples: int) -> dict:
    engine = Engine(settings)
    result = run_selftest(engine, settings.budget_ms, requests=requests)
    # The engine's own peak, before the exact-match pass reads the corpus to find held-out files.
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    result["validation"] = validation_exact_match(engine, samples)
    return result


def run_all(configs: list[str], model: str | None, requests: int, samples: int, threads: int | None) -> list[dict]:
    rows = []
    for config in configs:
        backend, quant = config.split(":")
        cmd = [
            sys.executable,
            "-m",
            "celeris_complete.cli",
            "bench",
            "engine-one",
            "--backend",
            backend,
            "--quant",
            quant,
            "--requests",
            str(requests),
            "--samples",
            str(samples),
        ]
        if model:
            cmd += ["--model", model]
        if threads is not None:
            cmd += ["--threads", str(threads)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            rows.append({"config": config, "error": proc.stderr.strip().splitlines()[-1:]})
            continue
        rows.append({"config": config, **json.loads(proc.stdout)})
    return rows


def table(rows: list[dict]) -> str:
    head = (
        "| backend:quant | keystroke p50 / p95 / p99 ms | new place p50 / p95 / p99 ms "
        "| 1k context (uncached) p50 / p99 ms | step p50 ms | tokens/s "
        "| speedup vs 1 token/step | exact match | peak RSS MB |"
    )
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['config']} | error: {r['error']} |" + " |" * 7)
            continue
        k, m, lc = r["keystroke_ms"], r["cache_miss_ms"], r.get("long_context_ms")
        long = f"{lc['p50']:.1f} / {lc['p99']:.1f} ({lc['context_tokens_p50']} tokens)" if lc else "-"
        lines.append(
            f"| {r['config']} | {k['p50']:.1f} / {k['p95']:.1f} / {k['p99']:.1f} | {m['p50']:.1f} / {m['p95']:.1f} / "
            f"{m['p99']:.1f} | {long} | {r['phases_ms_p50']['refine_step']:.2f} | {r['tokens_per_second']} | "
            f"{r['one_token_per_step']['speedup']}x | {r['validation']['exact_match']} | {r['peak_rss_mb']} |"
        )
    return "\n".join(lines)


def save(rows: list[dict], path: Path) -> None:
    path.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
