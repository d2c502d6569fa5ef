"""The engine's GPU paths on a real GPU: do they answer, agree with the CPU, and how fast are they?

For each configuration (PyTorch on CUDA in fp32, fp16 and bf16; ONNX Runtime's CUDA provider where
onnxruntime-gpu is installed) it completes the same places in real source files as the CPU fp32
reference, counts identical answers, and runs `selftest`'s measurement (keystroke, new place, 1k-token
context). Writes gpu_check.json under OUT (or the folder given) and prints a Markdown table; exits 1
if a configuration fails or agrees with the CPU on fewer than half of the places.

On the device machine (see scripts/device_train.sh, which runs it first):
    python3 scripts/gpu_check.py
A smoke test on a CPU (the same code path, on CPU configurations; PLACES sets the number of places):
    .venv/bin/python scripts/gpu_check.py --cpu /tmp/gpu-check
MODEL=DIR checks another model directory.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import warnings
from pathlib import Path

from celeris_complete.engine import InfillRequest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from celeris_complete.bench.selftest import run_selftest, sample_cursors  # noqa: E402
from celeris_complete.config import load_settings  # noqa: E402
from celeris_complete.engine.pipeline import Engine  # noqa: E402

GPU_CONFIGS = [("torch", "none"), ("torch", "fp16"), ("torch", "bf16"), ("onnx", "none")]
CPU_CONFIGS = [("torch", "bf16"), ("onnx", "none")]  # the smoke test's stand-ins


def engine_for(device: str, backend: str, quant: str, model: str | None) -> Engine:
    overrides = {"device": device, "backend": backend, "quant": quant}
    if model:
        overrides["model"] = model
    return Engine(load_settings(overrides, environ={}, user_file=Path("/nonexistent")))


def answers(engine: Engine, places: list) -> list[str]:
    return [engine.complete(InfillRequest(text[:at], text[at:], mode=mode)).text for text, at, mode in places]


def check(device: str, configs: list, model: str | None, places: int = 24, requests: int = 24) -> dict:
    cursors = sample_cursors(places, seed=11)
    reference = answers(engine_for("cpu", "torch", "none", model), cursors)
    rows = []
    for backend, quant in configs:
        row = {"config": f"{backend}:{quant}", "device": device}
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                engine = engine_for(device, backend, quant, model)
            row["warnings"] = [str(w.message) for w in caught]
            row["ran_on"] = f"{engine.backend}:{engine.quant} on {getattr(engine, 'onnx_device', engine.device)}"
            got = answers(engine, cursors)
            row["agree_with_cpu_fp32"] = f"{sum(a == b for a, b in zip(got, reference))}/{len(cursors)}"
            result = run_selftest(engine, budget_ms=100.0, requests=requests)
            row.update(
                keystroke_ms=result["keystroke_ms"],
                new_place_ms=result["cache_miss_ms"],
                long_context_ms=result["long_context_ms"],
                step_ms_p50=result["phases_ms_p50"]["refine_step"],
                speedup_vs_one_token_per_step=result["one_token_per_step"]["speedup"],
                tokens_per_second=result["tokens_per_second"],
                ok=sum(a == b for a, b in zip(got, reference)) * 2 >= len(cursors),
            )
        except Exception as exc:  # a failing configuration is a finding, not the end of the check
            row.update(ok=False, error=f"{type(exc).__name__}: {exc}", trace=traceback.format_exc()[-2000:])
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "trace"}), flush=True)
    return {
        "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None,
        "torch": torch.__version__,
        "model": model or "models/default",
        "rows": rows,
    }


def table(report: dict) -> str:
    out = [
        "| config | ran on | agrees with CPU fp32 | keystroke p50 / p95 / p99 ms | new place p50 / p95 ms "
        "| long ctx p50 / p99 ms (tokens) | step p50 ms | speedup vs 1 token/step |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        if "error" in r:
            out.append(f"| {r['config']} | failed: {r['error'][:120]} | | | | | | |")
            continue
        k, m, lc = r["keystroke_ms"], r["new_place_ms"], r["long_context_ms"]
        out.append(
            f"| {r['config']} | {r['ran_on']} | {r['agree_with_cpu_fp32']} | {k['p50']} / {k['p95']} / {k['p99']} "
            f"| {m['p50']} / {m['p95']} | {lc['p50']} / {lc['p99']} ({lc['context_tokens_p50']}) "
            f"| {r['step_ms_p50']} | {r['speedup_vs_one_token_per_step']}x |"
        )
    return "\n".join(out)


def main(argv: list[str]) -> int:
    cpu = "--cpu" in argv
    rest = [a for a in argv if not a.startswith("--")]
    out = Path(rest[0] if rest else os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    if not cpu and not torch.cuda.is_available():
        print("gpu_check: no CUDA GPU here (use --cpu for a smoke test on the CPU)", file=sys.stderr)
        return 2
    model = os.environ.get("MODEL")
    places = int(os.environ.get("PLACES", "24"))
    report = check("cpu" if cpu else "cuda", CPU_CONFIGS if cpu else GPU_CONFIGS, model, places, places)
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1) + "\n")
    print(table(report))
    return 0 if all(r["ok"] for r in report["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
