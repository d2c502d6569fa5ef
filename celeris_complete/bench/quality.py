"""HumanEval-Infilling quality: pass@1 by execution, exact match and edit similarity.

Candidate programs run in a separate Python process each, with a wall-clock
timeout, CPU-time, memory and file-size limits, and sockets disabled; never in
this process.
"""

from __future__ import annotations

import difflib
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from celeris_complete.engine import Engine, InfillRequest
from celeris_complete.errors import CelerisError

DATA_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "human-eval-infilling"
SETS = {"single": "HumanEval-SingleLineInfilling.jsonl.gz", "multi": "HumanEval-MultiLineInfilling.jsonl.gz"}

# Runs first in every candidate program: no network, no child processes.
GUARD = """\
import socket as _s, os as _o, subprocess as _sp
def _blocked(*a, **k):
    raise OSError("blocked by the benchmark sandbox")
_s.socket = _blocked
_s.create_connection = _blocked
_o.system = _blocked
_sp.Popen = _blocked
del _s, _o, _sp, _blocked
"""


def load_tasks(which: str, limit: int | None = None, data_dir: Path = DATA_DIR) -> list[dict]:
    if which not in SETS:
        raise CelerisError(f"unknown task set {which!r}: choose {', '.join(SETS)}")
    path = data_dir / SETS[which]
    if not path.is_file():
        raise CelerisError(f"{path}: missing (the benchmark data ships in benchmarks/human-eval-infilling/)")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        tasks = [json.loads(line) for line in fh if line.strip()]
    if limit:
        # An even spread over the problems, not the first few.
        step = max(1, len(tasks) // limit)
        tasks = tasks[::step][:limit]
    return tasks


def _limits(cpu_seconds: int, memory_mb: int):
    def apply() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
        os.setsid()

    return apply


def run_program(program: str, timeout: float = 3.0, memory_mb: int = 1024) -> tuple[bool, str]:
    """(passed, reason) for one candidate program, run in a separate process."""
    with tempfile.TemporaryDirectory(prefix="celeris-bench-") as tmp:
        path = Path(tmp) / "candidate.py"
        path.write_text(GUARD + program, encoding="utf-8")
        try:
            proc = subprocess.run(
                [sys.executable, "-I", str(path)],
                cwd=tmp,
                capture_output=True,
                timeout=timeout,
                preexec_fn=_limits(int(timeout) + 1, memory_mb),
                env={"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"},
            )
        except subprocess.TimeoutExpired:
            return False, "timeout"
    if proc.returncode == 0:
        return True, "passed"
    last = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
    return False, last[0][:200]


@dataclass
class TaskResult:
    task_id: str
    passed: bool
    exact: bool
    similarity: float
    latency_ms: float
    empty: bool
    reason: str
    completion: str
    confidence: float | None = None  # the engine's calibrated probability that the answer is right
    min_confidence: float = 0.0  # the threshold in force for it (Engine.min_confidence_for)


def quiet_figures(results: list[TaskResult], in_force: float | dict) -> dict:
    """What the language server's rule (an automatic answer below its threshold is held back) would
    show: right answers (exact, and passing) and wrong ones, shown and held back.  ``in_force``: the
    thresholds, as reported."""
    def held(r: TaskResult) -> bool:
        return r.confidence is not None and r.confidence < r.min_confidence

    answered = [r for r in results if not r.empty]
    out: dict = {"min_confidence": in_force}
    for label, right in (("exact", lambda r: r.exact), ("passed", lambda r: r.passed)):
        counts = {
            "right_shown": sum(right(r) and not held(r) for r in answered),
            "wrong_shown": sum(not right(r) and not held(r) for r in answered),
            "right_held": sum(right(r) and held(r) for r in answered),
            "wrong_held": sum(not right(r) and held(r) for r in answered),
        }
        shown = counts["right_shown"] + counts["wrong_shown"]
        out[label] = {
            **counts,
            "precision": round(counts["right_shown"] / shown, 4) if shown else None,  # of the lines shown, right
            "coverage": round(shown / len(answered), 4) if answered else None,  # of the answers, shown
        }
    return out


def candidate(task: dict, completion: str, which: str) -> str:
    """The filled-in solution text: whole lines, ending in a newline, as the cut-out text did."""
    text = completion if completion.endswith("\n") else completion + "\n"
    if which == "single":
        text = text.split("\n", 1)[0] + "\n"
    return text


def evaluate(
    engine: Engine, which: str, limit: int | None = None, workers: int = 2, steps: int | None = None, progress=None
) -> dict:
    tasks = load_tasks(which, limit)
    mode = "line" if which == "single" else "block"
    generated = []
    for i, task in enumerate(tasks):
        try:
            # The removed lines left as an editor shows them: one empty line, the cursor at its start (the
            # task's suffix starts on the line after). The answer is that line: ``candidate`` ends it.
            suffix = "\n" + task["suffix"]
            done = engine.complete(InfillRequest(task["prompt"], suffix, mode=mode, steps=steps, language="python"))
            text, latency, error, confidence = done.text, done.timings_ms["total"], "", done.confidence
            threshold = done.min_confidence
        except Exception as exc:  # a failure to generate counts as a failure
            text, latency, error, confidence, threshold = "", 0.0, f"generation failed: {exc}", None, 0.0
        generated.append((task, candidate(task, text, which), latency, error, confidence, threshold))
        if progress and (i + 1) % 50 == 0:
            progress(f"generated {i + 1}/{len(tasks)}")

    def score(item) -> TaskResult:
        task, text, latency, error, confidence, threshold = item
        truth = task["canonical_solution"]
        program = f"{task['prompt']}{text}{task['suffix']}\n{task['test']}\ncheck({task['entry_point']})\n"
        passed, reason = (False, error) if error else run_program(program)
        return TaskResult(
            task["task_id"],
            passed,
            text.strip() == truth.strip(),
            difflib.SequenceMatcher(None, text.strip(), truth.strip()).ratio(),
            latency,
            not text.strip(),
            reason,
            text,
            confidence,
            threshold,
        )

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(score, generated))
    n = max(1, len(results))
    latencies = sorted(r.latency_ms for r in results)
    return {
        "set": which,
        "tasks": len(results),
        "pass@1": round(sum(r.passed for r in results) / n, 4),
        "exact_match": round(sum(r.exact for r in results) / n, 4),
        "edit_similarity": round(sum(r.similarity for r in results) / n, 4),
        "empty_rate": round(sum(r.empty for r in results) / n, 4),
        # Some tasks pass with the line left empty (the removed line did not matter): count them apart.
        "passed_empty": sum(r.passed and r.empty for r in results),
        "latency_ms_p50": round(latencies[len(latencies) // 2], 2) if latencies else None,
        "execution_seconds": round(time.perf_counter() - t0, 1),
        # Staying quiet below the threshold in force (the language server's rule for automatic requests).
        "quiet": quiet_figures(results, engine.min_confidence_in_force()),
        "results": [r.__dict__ for r in results],
    }
