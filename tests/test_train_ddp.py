"""`celeris-complete train` under torchrun: two CPU processes (gloo) against one, and resumed stretches."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

from tests.conftest import STDLIB

TORCHRUN = Path(sys.executable).parent / "torchrun"
CLI = Path(sys.executable).parent / "celeris-complete"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Enough real modules for a held-out split (one file in 40 by hash)."""
    root = tmp_path_factory.mktemp("ddp-corpus")
    for path in sorted(STDLIB.glob("*.py"))[:160]:
        shutil.copy(path, root / path.name)
    return root


@pytest.fixture(scope="module")
def one_process(corpus, tiny_model_dir, tmp_path_factory) -> Path:
    """Four steps in one process, the reference the runs under torchrun are compared with."""
    out = tmp_path_factory.mktemp("ddp") / "one"
    run_train(out, corpus, tiny_model_dir, "--steps", "4")
    return out


@pytest.fixture(scope="module")
def prepared(one_process, tmp_path_factory) -> Path:
    """The reference run's tokenized data (not its checkpoint) for every later run, which would otherwise
    gather and tokenize the corpus again."""
    work = tmp_path_factory.mktemp("prepared") / ".work"
    shutil.copytree(one_process / ".work", work, ignore=shutil.ignore_patterns("checkpoint*"))
    return work


def run_train(out: Path, corpus: Path, model: Path, *extra: str, processes: int = 1, work: Path | None = None) -> str:
    if work is not None and not (out / ".work").exists():
        shutil.copytree(work, out / ".work")
    args = ["train", "-o", str(out), "--corpus", str(corpus), "--init-from", str(model), "--batch-size", "4",
            "--context-len", "160", "--eval-every", "1000", "--warmup-steps", "2", "--lr", "3e-3", *extra]  # fmt: skip
    if processes == 1:
        cmd = [str(CLI), *args]
    else:
        cmd = [str(TORCHRUN), "--standalone", f"--nproc_per_node={processes}", "-m", "celeris_complete.cli", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def mean_difference(a: Path, b: Path) -> float:
    wa, wb = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    return sum(float((wa[k] - wb[k]).abs().sum()) for k in wa) / sum(wa[k].numel() for k in wa)


@pytest.fixture(scope="module")
def two_processes(corpus, tiny_model_dir, prepared, tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("ddp") / "two"
    return out, run_train(out, corpus, tiny_model_dir, "--steps", "4", processes=2, work=prepared)


def test_two_processes_follow_one_at_the_same_global_batch(tiny_model_dir, one_process, two_processes):
    two, log = two_processes
    assert "2 processes" in log and log.count("model written to") == 1
    one = one_process
    # The same samples, split over two processes: only the order of float sums differs (Adam turns some
    # near-zero gradients' differences into steps of the learning rate, so means are compared).
    assert mean_difference(one, two) < 0.01 * mean_difference(one, tiny_model_dir)


def test_stretches_under_torchrun_resume_to_the_same_weights(corpus, tiny_model_dir, prepared, two_processes, tmp_path):
    out = tmp_path / "stretched"
    log = run_train(out, corpus, tiny_model_dir, "--steps", "4", "--stretch-steps", "2", processes=2, work=prepared)
    assert "stretch over at step 2" in log and not (out / "model.safetensors").exists()
    assert (out / ".work" / "checkpoint.safetensors").exists()
    log = run_train(out, corpus, tiny_model_dir, "--steps", "4", processes=2)
    assert "resumed from" in log and "at step 2" in log
    assert mean_difference(out, two_processes[0]) == 0.0
