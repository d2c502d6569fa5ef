"""What this machine has: CPU model and cores, bf16 matrix units, a CUDA GPU."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import torch

from celeris_complete.errors import CelerisError


def cpu_has_bf16_units() -> bool:
    """Native bf16 matrix units (Intel AMX): where bf16 beats fp32 on the CPU."""
    try:
        return bool(torch.cpu._is_amx_tile_supported())
    except AttributeError:
        return False


def cpu_has_bf16_dot() -> bool:
    """bf16 dot-product instructions (AVX512-BF16 or AMX): where bf16 autocast trains faster than fp32
    (2.2x on this project's 2-core AMD EPYC: ``celeris-complete bench train-speed``)."""
    if cpu_has_bf16_units():
        return True
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return "avx512_bf16" in line.split()
    except OSError:
        pass
    return False


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def hardware() -> dict:
    info = {
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cuda_gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "cpu_bf16_units": cpu_has_bf16_units(),
        "cpu_bf16_dot": cpu_has_bf16_dot(),
    }
    return info


def pick_device(name: str) -> str:
    """The device a training or validation run asked for ("auto": a CUDA GPU when one is visible)."""
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise CelerisError("--device cuda: no CUDA GPU is visible to PyTorch")
    return name


def pick_autocast(precision: str, device: str) -> torch.dtype | None:
    """bf16 autocast where it pays off ("auto"), or as asked; None: fp32."""
    if precision == "fp32":
        return None
    if precision == "bf16":
        return torch.bfloat16
    if device == "cuda":
        return torch.bfloat16
    return torch.bfloat16 if cpu_has_bf16_dot() else None  # pays off with native bf16 instructions only
