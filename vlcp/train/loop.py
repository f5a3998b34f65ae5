"""The one training loop: step-based, one task at a time, the method's hooks around each step.

`train_task` runs `steps` AdamW steps on batches drawn from `ctx.pool`, with the LR of
`lr_at(step)` (default: `train.schedule` over this one task; the loop passes the stream's plan so
meta-schedules see every task), optimizer state reset per task, gradient clipping,
logit-scale clamping, optional bf16 autocast, and a tqdm bar. Three options serve large models on a
GPU: `train.compile` (the forward, loss and backward under torch.compile: `compiled`),
`train.accum_freq` (the batch in micro-batches with cached features: `accumulate`) and
`train.grad_checkpointing` (`vlcp.models.set_grad_checkpointing`); `check_step_options` refuses the
methods they cannot serve. A `PhaseClock` times each phase of a step (`PHASES`: data, forward,
backward, ...) and labels it for torch.profiler ("vlcp/data", ...),
so every run records where its time went and a profile splits it further by op
(`benchmarks/method_profile.py`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import contextlib
import dataclasses
import functools
import math
import operator
import os
import time

import torch
from torch.profiler import record_function
from tqdm import tqdm

from vlcp.data.augment import TrainTransform, augment_images
from vlcp.errors import ConfigError, NonFiniteError
from vlcp.losses import clip_loss
from vlcp.models import set_grad_checkpointing
from vlcp.models.albef import ALBEF
from vlcp.models.clip import OPENAI_MEAN, OPENAI_STD
from vlcp.train.budget import PHASE_LABEL
from vlcp.train.context import Batch, TaskContext, model_outputs
from vlcp.train.optim import clip_gradients, make_optimizer  # noqa: F401  (make_optimizer: re-exported)
from vlcp.train.distributed import all_reduce_mean, average_gradients, broadcast_parameters, is_main, local_slice, unwrap
from vlcp.train.schedules import lr_fn, plan_for

if TYPE_CHECKING:
    from vlcp.config import TrainCfg


class Materializer:
    """Global batch ids -> this rank's Batch: random caption variant, random shift (augment) or
    the paper's training `transform` (`vlcp.data.augment`, `data.transform`), CLIP normalisation,
    and for models with an MLM head (`mask`: tokens, generator -> (masked input, labels), e.g.
    `vlcp.losses.mask_tokens` with the vocab's ids bound) BERT masking.
    Random draws are made for the whole global batch, then sliced, so the result does not
    depend on the world size. `local=False`: every rank gets the whole batch (side information
    computed alike on every rank, outside the training steps)."""

    def __init__(self, images: torch.Tensor, image_text: torch.Tensor, tokens: torch.Tensor,
                 device: torch.device, augment: bool, pad: int = 2, mask=None, local: bool = True,
                 transform: TrainTransform | None = None):
        self.images, self.image_text, self.tokens = images, image_text, tokens  # tokens [N, K, ctx]
        self.transform = transform if augment else None
        self.device, self.augment, self.pad, self.mask, self.local = torch.device(device), augment, pad, mask, local
        self.mean = torch.tensor(OPENAI_MEAN).view(1, 3, 1, 1)
        self.std = torch.tensor(OPENAI_STD).view(1, 3, 1, 1)

    def __call__(self, ids: torch.Tensor, generator: torch.Generator) -> Batch:
        n = len(ids)
        variant = torch.randint(0, self.tokens.shape[1], (n,), generator=generator)
        shift = torch.randint(0, 2 * self.pad + 1, (n, 2), generator=generator)
        tok = self.tokens[self.image_text[ids], variant]
        masked = self.mask(tok, generator) if self.mask is not None else None
        seeds = self.transform.seeds(n, generator) if self.transform is not None else None
        sl = local_slice(n) if self.local else slice(None)
        ids, shift, tok = ids[sl], shift[sl], tok[sl]
        if hasattr(self.images, "decode"):   # image files: an unreadable image's pair is the next readable one
            x, used = self.images.decode(ids.tolist(), None if seeds is None else seeds[sl].tolist(), self.transform)
            if used != ids.tolist():
                ids, tok, masked = self.replaced(ids, torch.tensor(used), variant[sl], tok, masked, sl)
        elif self.transform is not None:
            x = augment_images(self.images, ids.tolist(), seeds[sl].tolist(), self.transform)
        else:
            x = self.images[ids]
        x = x.permute(0, 3, 1, 2).float() / 255.0
        if self.augment and self.pad and self.transform is None:
            s = x.shape[-1]
            padded = torch.nn.functional.pad(x, (self.pad,) * 4, value=1.0)
            x = torch.stack([padded[i, :, dy:dy + s, dx:dx + s] for i, (dy, dx) in enumerate(shift.tolist())])
        x = (x - self.mean) / self.std
        if self.device.type == "cuda":   # page-locked, so the copy below runs asynchronously
            x, tok = x.pin_memory(), tok.pin_memory()
        to = lambda t: t.to(self.device, non_blocking=True)  # noqa: E731
        mlm = (to(masked[0][sl]), to(masked[1][sl])) if masked is not None else (None, None)
        return Batch(to(x), to(tok), ids, *mlm)

    def replaced(self, ids: torch.Tensor, used: torch.Tensor, variant: torch.Tensor, tok: torch.Tensor, masked, sl):
        """The batch for the image ids actually decoded (`used`: an unreadable image's replaced by the
        next readable one): their texts in the same caption variants, and for an MLM head their
        masking drawn from a generator seeded by their ids (the run's generator is left as it is)."""
        swap = (used != ids).nonzero().squeeze(1)
        tok = tok.clone()
        tok[swap] = self.tokens[self.image_text[used[swap]], variant[swap]]
        if masked is not None:
            again = self.mask(tok[swap], torch.Generator().manual_seed(int(used[swap].sum())))
            masked = tuple(m.clone() for m in masked)
            for m, a in zip(masked, again):
                m[sl][swap] = a   # (m[sl] is a view of m)
        return used, tok, masked


def draw_ids(ctx: TaskContext, batch_size: int) -> torch.Tensor:
    """One batch's train-set ids: the context's sampler (FoMo's P/D/B mixture), else uniform
    with replacement over `ctx.pool`."""
    if ctx.sampler is not None:
        return ctx.sampler(batch_size, ctx.generator)
    return ctx.pool[torch.randint(0, len(ctx.pool), (batch_size,), generator=ctx.generator)]


def autocast(device: torch.device, precision: str):
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def check_step_options(cfg: TrainCfg, method_cls, model: str, albef: bool) -> None:
    """Refuse, in one line, the step options a method (`method_cls`, a `vlcp.methods.base.Method`
    class) or model cannot serve: `accum_freq` > 1 needs a step whose loss is the contrastive loss over
    the batch's features alone (the base `loss` hook, a CLIP model: no extra terms, teachers or MLM);
    `grad_checkpointing` an open_clip model."""
    if cfg.accum_freq > 1 and (method_cls.adds_loss_terms() or albef):
        what = f"model {model!r} adds an MLM term" if albef else \
            f"method {method_cls.name!r} adds its own loss terms"
        raise ConfigError(f"train.accum_freq: accumulation with cached features takes the contrastive loss only, and "
                          f"{what}; use train.accum_freq 1")
    if cfg.grad_checkpointing and albef:
        raise ConfigError(f"train.grad_checkpointing: model {model!r} (ALBEF) has no activation checkpointing; "
                          "it serves open_clip models")


def compiled(fn, mode: str):
    """`fn` under torch.compile in `mode` (`train.compile`), `fn` itself for "none". The backend is
    inductor (CUDA graphs with reduce-overhead on a GPU, C++ code on a CPU); the environment variable
    VLCP_COMPILE_BACKEND names another torch.compile backend (aot_eager, eager: the CPU tests trace the
    step without generating code), which takes no mode."""
    if mode == "none":
        return fn
    backend = os.environ.get("VLCP_COMPILE_BACKEND", "inductor")
    return torch.compile(fn, mode=mode) if backend == "inductor" else torch.compile(fn, backend=backend)


def micro_batches(batch: Batch, n: int) -> list[Batch]:
    """`batch` in `n` consecutive equal parts (`train.accum_freq`)."""
    parts = {f.name: (getattr(batch, f.name).tensor_split(n) if getattr(batch, f.name) is not None else [None] * n)
             for f in dataclasses.fields(batch)}
    return [Batch(**{k: v[i] for k, v in parts.items()}) for i in range(n)]


def features(model: torch.nn.Module, batch: Batch):
    """(image features, text features, logit scale) of the model's forward on `batch`."""
    out = model_outputs(model, batch)
    return out[0], out[1], out[2]


def cached_features(model: torch.nn.Module, parts: list[Batch], amp, forward=features) -> list[tuple]:
    """Every micro-batch's (image, text) features, without gradients: `accumulate`'s first pass."""
    with torch.no_grad(), amp():
        return [forward(model, p)[:2] for p in parts]


def accumulate(model: torch.nn.Module, parts: list[Batch], cached: list[tuple], amp,
               forward=features) -> dict[str, torch.Tensor]:
    """One step's gradients of the contrastive loss over the micro-batches `parts` together (open_clip_train's
    `--accum-freq`), from their `cached_features`: for each micro-batch its features again with gradients,
    spliced into the cached ones, the loss over the whole batch and its backward; the gradients sum to those
    of the whole batch at once (a dropout-free model). The logit scale takes its gradient from the first
    micro-batch's loss only (open_clip adds it once per micro-batch). Under DDP the ranks exchange gradients
    at the last backward only. `amp`: the autocast context; `forward`: (model, batch) -> features
    (`features`, or it compiled). Returns {"clip": the loss}."""
    images, texts = [c[0] for c in cached], [c[1] for c in cached]
    for j, part in enumerate(parts):
        last = j == len(parts) - 1
        with (contextlib.nullcontext() if last or not hasattr(model, "no_sync") else model.no_sync()):
            with amp():
                img, txt, scale = forward(model, part)
                loss = clip_loss(torch.cat(images[:j] + [img] + images[j + 1:]),
                                 torch.cat(texts[:j] + [txt] + texts[j + 1:]), scale if j == 0 else scale.detach())
            loss.backward()
    return {"clip": loss.detach()}


# a step's phases (logging: the loss's running sums and their checks, between forward and backward); then the
# per-task ones (after_task: timed by the loop, vlcp.run)
PHASES = ("data", "forward", "backward", "after_backward", "optimizer", "after_step", "logging")
TASK_PHASES = ("before_task", "make_optimizer", "after_task")
CHECK_EVERY = 50   # steps between the host's reads of the loss on an accelerator (each one waits for its queue)


def reads_are_free(device: torch.device) -> bool:
    """Whether the host reads a tensor on `device` without waiting for a queue (the CPU)."""
    return device.type == "cpu"


def check_every(device: torch.device) -> int:
    """Steps between the host's reads of the loss (its finite check, the progress bar): every step where
    reading a tensor waits for nothing (`reads_are_free`), else `CHECK_EVERY`."""
    return 1 if reads_are_free(device) else CHECK_EVERY


class PhaseClock:
    """Seconds spent in each phase of the loop (`PHASES`, `TASK_PHASES`); each phase also runs
    under the torch.profiler label "vlcp/<phase>" (`budget.PHASE_LABEL`, which
    `budget.phase_profile` reads). Host time: on a GPU the host queues kernels ahead of them,
    and the time they take falls in the phase that waits for a result (logging, every `CHECK_EVERY`
    steps, where the loss is read) or in whichever phase the queue fills up."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        with record_function(PHASE_LABEL + name):
            yield
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0

    def rounded(self) -> dict[str, float]:
        return {k: round(v, 4) for k, v in self.seconds.items()}


def train_task(model: torch.nn.Module, method, ctx: TaskContext, steps: int, cfg: TrainCfg,
               device: torch.device, desc: str = "train", lr_at=None, clock: PhaseClock | None = None) -> dict:
    """Train one task with the hooks of `method` (a `vlcp.methods.base.Method`); returns {"loss": mean
    total loss, "samples": samples seen, "terms": per-term means, "phase_seconds": seconds per phase}.
    `lr_at`: step -> LR (default: `cfg.schedule` on a stream of this one task); `clock`: the task's
    PhaseClock (the loop times `after_task` on it)."""
    lr_at = lr_at or lr_fn(cfg.schedule, plan_for(cfg, [steps]), 0)
    phase = clock or PhaseClock()
    check_step_options(cfg, type(method), type(unwrap(model)).__name__, isinstance(unwrap(model), ALBEF))
    if cfg.grad_checkpointing:
        set_grad_checkpointing(unwrap(model))
    accum, amp = cfg.accum_freq, functools.partial(autocast, device, cfg.precision)
    if accum == 1:
        loss_of = compiled(method.loss, cfg.compile)
    else:
        forward = compiled(features, cfg.compile)
    with phase("before_task"):
        method.before_task(unwrap(model), ctx)
        model.zero_grad(set_to_none=True)   # no gradient left from the last task: the steps' zero_grad reaches only
        #   the optimiser's parameters, and clip_grad_norm_ every parameter with a gradient (a module frozen since,
        #   e.g. an earlier language's adapter, kept its last gradient, counted in the clip norm and scaled by it
        #   every step down to denormals)
    with phase("make_optimizer"):
        opt = method.make_optimizer(model, cfg)
    broadcast_parameters(model)      # under DDP without the wrapper (no-op otherwise)
    sums: dict[str, torch.Tensor] = {}
    # the host reads the loss from the running sums every `check_every` steps and at the end: a non-finite loss
    # keeps them non-finite, and a step count (not a clock) keeps the ranks of a DDP run checking at the same steps
    every, checked, free = check_every(torch.device(device)), -1, reads_are_free(torch.device(device))
    bar = tqdm(range(steps), desc=desc, unit="step", disable=not (cfg.progress and is_main()),
               leave=False, mininterval=1.0)
    shown = 0.0

    def log(step: int, terms: dict[str, torch.Tensor]) -> None:
        nonlocal checked, shown
        with phase("logging"):   # this rank's sums, on the device: no collective
            for k, v in terms.items():
                sums[k] = sums.get(k, 0) + v.detach().double()
            if (step + 1) % every == 0 or step == steps - 1:
                total = functools.reduce(operator.add, sums.values()).item()   # (not sum(): its `0 +` wraps 0 in a tensor, 5 ops)
                if not math.isfinite(total):
                    at = f"step {step}" if step == checked + 1 else f"a step from {checked + 1} to {step}"
                    raise NonFiniteError(f"{desc}: loss is {total} at {at} (lower train.lr?); "
                                         "the last good checkpoint is kept")
                checked = step
                if not bar.disable and (time.monotonic() - shown >= bar.mininterval or step == steps - 1):
                    shown = time.monotonic()   # the task's running mean loss, as often as the bar redraws
                    bar.set_postfix(loss=f"{total / (step + 1):.3f}", lr=f"{lr:.1e}")

    for step in bar:
        ctx.step = step
        lr = lr_at(step)
        for g in opt.param_groups:
            g["lr"] = lr
        with phase("data"):
            batch = method.make_batch(draw_ids(ctx, cfg.batch_size), ctx)
        if accum == 1:
            with phase("forward"), amp():
                terms = loss_of(model, batch, ctx)
                loss = functools.reduce(operator.add, terms.values())   # (sum()'s `0 +` is one more op and node)
            log(step, terms)
            with phase("backward"):
                opt.zero_grad(set_to_none=True)
                loss.backward()
                average_gradients(model)     # DDP without the wrapper, or the tables DDP leaves out (no-op in one process)
        else:   # the cached features' pass, then each micro-batch's forward and backward
            with phase("forward"):
                parts = micro_batches(batch, accum)
                cached = cached_features(model, parts, amp, forward)
            with phase("backward"):
                opt.zero_grad(set_to_none=True)
                terms = accumulate(model, parts, cached, amp, forward)
                average_gradients(model)
            log(step, terms)
        with phase("after_backward"):
            method.after_backward(unwrap(model), ctx)
        with phase("optimizer"):
            if cfg.grad_clip > 0:
                clip_gradients(model.parameters(), cfg.grad_clip, read=free)   # on a CPU: no multiply by 1
            opt.step()
            with torch.no_grad():
                unwrap(model).logit_scale.clamp_(0, math.log(100))
        with phase("after_step"):
            method.after_step(unwrap(model), batch, ctx)
    # the mean over ranks of the per-step sums = the sum of the per-step means over ranks (one collective per term)
    method_terms = {k: all_reduce_mean(v).item() / max(steps, 1) for k, v in sums.items()}
    return {"loss": sum(method_terms.values()), "terms": method_terms, "samples": steps * cfg.batch_size,
            "phase_seconds": phase.rounded()}
