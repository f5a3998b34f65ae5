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


def all_reduce_max(n: int, device="cpu") -> int:
    """The largest of the ranks' `n` (`device`: where the backend reduces, cuda under NCCL)."""
    if rank_and_size()[1] == 1:
        return n
    x = torch.tensor(n, device=device)
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    return int(x)


def broadcast_object(obj):
    """Rank 0's `obj` on every rank (results of non-deterministic work, e.g. trained tokenizers)."""
    if rank_and_size()[1] == 1:
        return obj
    box = [obj if is_main() else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def broadcast_parameters(model: torch.nn.Module) -> None:
    """Rank 0's parameters and buffers on every rank, for a model not wrapped in DDP (what DDP's
    constructor does): modules a method adds at a task's start (per-language adapters, prompts,
    new embedding rows) start equal everywhere."""
    if rank_and_size()[1] == 1 or isinstance(model, torch.nn.parallel.DistributedDataParallel):
        return
    for t in [*model.parameters(), *model.buffers()]:
        dist.broadcast(t.data, src=0)


def average_gradients(model: torch.nn.Module) -> None:
    """What DDP does after backward, for a model that is not wrapped in it (one whose parameters
    change during the stream: CLL-CLIP's expandable token embeddings): every trainable
    parameter's gradient becomes its mean over ranks, in one flat all-reduce (a parameter
    without a gradient counts as zeros, and keeps a gradient if any rank has one)."""
    size = rank_and_size()[1]
    if size == 1 or isinstance(model, torch.nn.parallel.DistributedDataParallel):
        return
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        return
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    has = torch.tensor([p.grad is not None for p in params], dtype=torch.float32, device=flat.device)
    dist.all_reduce(flat)
    dist.all_reduce(has)
    flat /= size
    offset = 0
    for p, g, any_grad in zip(params, grads, has.tolist()):
        n = g.numel()
        if any_grad:
            p.grad = flat[offset:offset + n].view_as(p).clone()
        offset += n


def local_slice(n: int) -> slice:
    """This rank's rows of a global batch of n (n must divide by the world size)."""
    rank, size = rank_and_size()
    if n % size:
        raise ValueError(f"train.batch_size {n} does not divide by the world size {size}")
    b = n // size
    return slice(rank * b, (rank + 1) * b)


def wrap_ddp(model: torch.nn.Module) -> torch.nn.Module:
    """`model` in DistributedDataParallel, its gradients views into DDP's communication buckets
    (no copy of every gradient into the buckets and back each step)."""
    return torch.nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=True)


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model
