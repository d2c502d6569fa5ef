"""scripts/gpu_check.py, the device run's check of the GPU paths, on CPU configurations (so it cannot rot
between the sessions that have a GPU)."""

import importlib.util
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "gpu_check.py"


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_check_compares_with_the_cpu_and_reports_failures(shipped_model_dir):
    gpu_check = load_script()
    configs = [("torch", "none"), ("torch", "fp16")]  # fp16 needs CUDA: on a CPU it must come back as a failure
    report = gpu_check.check("cpu", configs, str(shipped_model_dir), places=3, requests=3)
    same, fp16 = report["rows"]
    assert same["ok"] and same["agree_with_cpu_fp32"] == "3/3"  # the reference itself: deterministic
    assert same["keystroke_ms"]["n"] == 12 and same["long_context_ms"]["n"] == 4
    assert not fp16["ok"] and "fp16 needs a CUDA device" in fp16["error"]
    rendered = gpu_check.table(report)
    assert "| torch:none | torch:none on cpu | 3/3 |" in rendered and "| torch:fp16 | failed:" in rendered


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here")
def test_gpu_check_refuses_to_run_without_a_gpu_unless_asked(tmp_path):
    assert load_script().main([str(tmp_path)]) == 2
