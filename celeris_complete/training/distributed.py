"""Data-parallel training under torchrun: which process this is, and the few things processes agree on.

Every process draws the same global batch from the same random state and trains on its own slice;
DistributedDataParallel averages the gradients, so the run follows the one-process run at the same
global batch, and one checkpoint (written by rank 0) holds the random state of all of them.
"""

from __future__ import annotations

import gc
import os
import sys
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

LEAVING = "celeris/leaving"  # the store keys each process sets as it leaves the group
LEFT = "celeris/left"  # ... and after tearing down their connections
LEAVE_TIMEOUT = timedelta(minutes=2)


@dataclass(frozen=True)
class Processes:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    local_world: int = 1
    group: object = None  # a gloo group for the small exchanges on CPU tensors (NCCL takes GPU tensors only)

    @property
    def main(self) -> bool:
        return self.rank == 0

    def slice(self, n: int) -> slice:
        """This process's share of a global batch of n samples."""
        per = n // self.world
        return slice(self.rank * per, (self.rank + 1) * per)

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier(group=self.group)

    def agree(self, value: float) -> float:
        """Rank 0's value, on every process (time-based decisions must not differ between them)."""
        if self.world == 1:
            return value
        t = torch.tensor([value], dtype=torch.float64)
        dist.broadcast(t, 0, group=self.group)
        return float(t.item())

    def mean(self, values: tuple[float, ...]) -> tuple[float, ...]:
        if self.world == 1:
            return values
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t, group=self.group)
        return tuple((t / self.world).tolist())

    def close(self) -> None:
        """Leave the group after the run or a stretch ended the same way on every process.

        Three precautions against gloo's teardown aborting a process at exit ("terminate called without
        an active exception", seen once in five CI runs, rank 1, after the model was written): what
        still holds the group (DistributedDataParallel's reducer) is freed first, while the group is
        whole; the processes meet through the rendezvous store before tearing down their gloo
        connections (a process that closes them right after a gloo barrier can abort a peer still
        finishing it, gloo issue 155); and they meet again after, so none exits, closing its sockets,
        while a peer is still tearing down. The command then ends the process without the interpreter's
        finalization (``exit_after_group``). Not called when a process fails: a peer may be inside a
        collective that would keep the teardown waiting for the group's timeout; the launcher ends the
        others instead.
        """
        if self.world == 1 or not dist.is_initialized():
            return
        gc.collect()
        store = dist.distributed_c10d._get_default_store()
        self._meet(store, LEAVING)
        dist.destroy_process_group()
        self._meet(store, LEFT)

    def _meet(self, store, key: str) -> None:
        store.set(f"{key}/{self.rank}", b"1")
        try:
            store.wait([f"{key}/{r}" for r in range(self.world)], LEAVE_TIMEOUT)
        except RuntimeError:  # DistStoreError, or rank 0 (the store's host) gone: nothing left to wait for
            pass


def exit_after_group(code: int = 0) -> None:
    """End a torchrun process that left its group: output flushed, no interpreter finalization (where
    objects freed late can still reach gloo's worker threads and abort the process)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def start(device: str) -> Processes:
    """This process's place in a torchrun launch (one process when not launched by torchrun)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return Processes()
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device == "cuda":
        torch.cuda.set_device(local_rank)
    # Long: the others wait while rank 0 prepares the data (tokenizing a large corpus takes minutes).
    dist.init_process_group("nccl" if device == "cuda" else "gloo", timeout=timedelta(hours=3))
    group = dist.new_group(backend="gloo") if device == "cuda" else None
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    return Processes(rank, world, local_rank, local_world, group)
