"""Process-group helpers: one code path for a single process and `torchrun` DDP.

Rank and world size come from torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK). Every
rank draws the same global batch ids from the same generator and keeps its own slice, so a
W-process run sees exactly the batches of a 1-process run (this replaces a DistributedSampler in
a step-based loop)."""
from __future__ import annotations

import os

import torch
import torch.distributed as dist


def init_distributed(device: str = "cpu") -> tuple[int, int]:
    """Join the process group when launched by torchrun; return (rank, world_size)."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size > 1 and not dist.is_initialized():
        backend = "nccl" if device.startswith("cuda") else "gloo"
        dist.init_process_group(backend)
        if device.startswith("cuda"):
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    return rank_and_size()


def rank_and_size() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def is_main() -> bool:
    return rank_and_size()[0] == 0


def barrier() -> None:
    if rank_and_size()[1] > 1:
        dist.barrier()


def all_reduce_mean(x: torch.Tensor) -> torch.Tensor:
    if rank_and_size()[1] > 1:
        x = x.detach().clone()
        dist.all_reduce(x)
        x /= dist.get_world_size()
    return x


def local_slice(n: int) -> slice:
    """This rank's rows of a global batch of n (n must divide by the world size)."""
    rank, size = rank_and_size()
    if n % size:
        raise ValueError(f"train.batch_size {n} does not divide by the world size {size}")
    b = n // size
    return slice(rank * b, (rank + 1) * b)


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model
