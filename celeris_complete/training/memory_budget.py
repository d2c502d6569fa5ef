"""Training within a memory budget on the CPU: how many samples one forward and backward pass may hold.

A training step's batch (the effective batch, what the optimizer averages over) is split into
micro-batches whose gradients are accumulated, so the batch a run asks for never decides how much
memory it takes.  The micro-batch is sized for the machine the run is on: one backward pass of one
and of two samples of the longest context is measured (the process's peak resident memory, reset
between them through ``/proc/self/clear_refs``), which gives what a step costs per sample and what it
costs regardless; where the peak cannot be reset (not Linux), an estimate from the model's shape
stands in.  The budget is for the whole process: Python, PyTorch, the model, its gradients and the
optimizer's state included.
"""

from __future__ import annotations

import math
import resource
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from celeris_complete.errors import CelerisError

MB = 1024 * 1024
# The share of the budget the plan fills: the rest for what the allocator keeps aside, the optimizer's
# temporaries and the evaluations (a 3 x 1,024-token plan of a 2,048 MB budget at 0.9 peaked at 2,102 MB).
HEADROOM = 0.8
# A budget larger than the memory the machine has free is cut to this share of it.
AVAILABLE_SHARE = 0.8
# With no budget given, a CPU run takes this share of the memory available when it starts.
DEFAULT_SHARE = 0.5

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_mb(key: str) -> float | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def resident_mb() -> float | None:
    """The process's resident memory now (Linux), in MiB."""
    return _status_mb("VmRSS")


def peak_resident_mb() -> float:
    """The most resident memory the process has held since it started (or since ``reset_peak``), in MiB."""
    peak = _status_mb("VmHWM")
    if peak is not None:
        return peak
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss / MB if sys.platform == "darwin" else maxrss / 1024  # bytes on macOS, KiB elsewhere


def reset_peak() -> bool:
    """Start the peak (``VmHWM``) over from the memory held now; False where the system cannot."""
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return _status_mb("VmHWM") is not None


def available_mb() -> float | None:
    """Memory the system can give without swapping (``MemAvailable``), in MiB; None where unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def budget_mb(asked: float | None) -> float | None:
    """The budget a CPU run keeps to: ``asked`` (MiB), else a share of what is available; never more than
    most of what is available.  None: nothing known and nothing asked (no limit)."""
    free = available_mb()
    if asked is None:
        return None if free is None else DEFAULT_SHARE * (free + (resident_mb() or 0.0))
    if asked <= 0:
        raise CelerisError(f"a memory budget of {asked:g} MB: give a positive number of MB")
    if free is not None:
        return min(asked, AVAILABLE_SHARE * free + (resident_mb() or 0.0))
    return asked


def estimate_sample_mb(tokens: int, d_model: int, n_layers: int, vocab_size: int) -> float:
    """A training sample's memory from the model's shape, where it cannot be measured: activations kept
    for the backward pass (about 96 bytes per layer, token and model dimension, in mixed precision)
    and the logits with their gradients (about 14 bytes per token and vocabulary entry).  Fitted above
    the measured 320 MB of a 1,088-token sample of the 13.8M model (6 layers, d=384, 8,192 entries)."""
    return tokens * (96 * n_layers * d_model + 14 * vocab_size) / MB


@dataclass(frozen=True)
class MemoryPlan:
    budget_mb: float
    fixed_mb: float  # the process, the model, its gradients and the optimizer's state
    sample_mb: float  # one more sample of the longest context in a forward and backward pass
    micro_batch: int  # samples of the longest context per forward and backward pass
    measured: bool  # measured on this machine, or estimated from the model's shape

    def micro_batch_for(self, tokens: int, longest: int, batch: int, inference: bool = False) -> int:
        """Samples of ``tokens`` per pass (a sample's memory grows with its tokens), at most ``batch``.
        ``inference``: a pass without gradients, which keeps no activations for a backward pass (40 MB
        a sample measured against 320 MB in training; half is counted)."""
        per_sample = self.sample_mb * tokens / longest / (2 if inference else 1)
        room = HEADROOM * self.budget_mb - self.fixed_mb
        return max(1, min(batch, int(room // per_sample)))

    def describe(self) -> str:
        how = "measured" if self.measured else "estimated"
        return (
            f"memory budget {self.budget_mb:,.0f} MB: {self.fixed_mb:,.0f} MB for the process and model, "
            f"{self.sample_mb:,.0f} MB per sample ({how})"
        )


def plan(
    budget: float,
    batch: int,
    optimizer_mb: float,
    step: Callable[[int], None],
    estimate: float,
) -> MemoryPlan:
    """Size the micro-batch of the longest context within ``budget`` MiB.

    ``step(n)`` runs a forward and backward pass of ``n`` samples of the longest context and drops its
    gradients; ``optimizer_mb`` is the optimizer state not yet allocated; ``estimate`` a sample's MiB
    from the model's shape, used where the peak cannot be measured.  Raises a clear error when even one
    sample does not fit."""
    measured = reset_peak()
    if measured:
        before = resident_mb() or 0.0
        step(1)
        one = peak_resident_mb()
        if one + optimizer_mb > HEADROOM * budget:
            _too_small(budget, one + optimizer_mb)
        if one + optimizer_mb + (one - before) > HEADROOM * budget:
            # No room to measure two samples: one per pass, its cost bounded by what one took.
            return MemoryPlan(budget, before + optimizer_mb, one - before, 1, measured)
        reset_peak()
        step(2)
        two = peak_resident_mb()
        sample_mb = max(two - one, 1.0)
        fixed = max(one - sample_mb, 0.0) + optimizer_mb
    else:
        sample_mb = estimate
        fixed = (resident_mb() or peak_resident_mb()) + 3 * optimizer_mb / 2  # and the gradients, at most half as much
    room = HEADROOM * budget - fixed
    if room < sample_mb:
        _too_small(budget, fixed + sample_mb)
    micro = max(1, min(batch, math.floor(room / sample_mb)))
    return MemoryPlan(budget, fixed, sample_mb, micro, measured)


def _too_small(budget: float, needed: float) -> None:
    raise CelerisError(
        f"training needs about {needed:,.0f} MB with a single sample per pass, over the memory budget of "
        f"{budget:,.0f} MB: give a larger --memory-mb (or free some memory), or a shorter --context-len"
    )
