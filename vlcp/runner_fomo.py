"""Run one FoMo-in-Flux experiment (data.stream: concepts) and write `results.json`.

From the base CLIP θ0 (`model.pretrained`, pretrained on the pool P by `vlcp pretrain
fomo-base`): order the adaptation concepts (`fomo.ordering`, side information from θ0), cut the
stream into `fomo.num_tasks` tasks, give the method its compute budget (full fine-tuning's
`fomo.steps_per_task` × full FT's MAFs / the method's MAFs, both measured here), then per task
train on P/D/B mixed batches (`fomo.mixture`; the buffer is every earlier task's data) under
`train.schedule` (meta-schedules see the whole stream) and evaluate A_KA / A_ZS / GM on every
dataset. The zero-shot point (θ0) starts the trajectory; checkpoints after every task make
runs resumable.
"""
from __future__ import annotations

import copy
import math
import time
from pathlib import Path

import numpy as np
import torch

from vlcp.config import ExperimentCfg
from vlcp.data.augment import train_transform
from vlcp.data import concepts as cs
from vlcp.data.fomo import FomoData, with_pool
from vlcp.data.load import load_fomo_data
from vlcp.data.mixtures import buffer_pool, mixture_sizes, sample_mixture
from vlcp.errors import ConfigError
from vlcp.eval.encode import MemoTokenizer
from vlcp.eval.fomo import evaluate_fomo
from vlcp.methods import get_method
from vlcp.methods.base import Method, TaskContext
from vlcp.methods.seqf import SeqF
from vlcp.models import create_model
from vlcp.runner import (RESULTS_FORMAT, _save_checkpoint, _versions, check_finite, checkpoint_due, compile_model,
                         exclusive_run, pick_device, record_time, resume_from, rng_state)
from vlcp.train import budget
from vlcp.train.checkpoint import Checkpoints
from vlcp.train.distributed import barrier, init_distributed, is_main, rank_and_size, unwrap, wrap_ddp
from vlcp.train.loop import Materializer, PhaseClock, autocast, draw_ids, train_task
from vlcp.train.schedules import lr_fn, plan_for
from vlcp.utils import config_hash, derive_seed, seed_everything, write_json


# --------------------------------------------------------------------------- the stream

@torch.no_grad()
def concept_difficulty(model, data: FomoData, materialize, generator: torch.Generator, n: int = 50) -> list[float]:
    """Easy-to-hard side information (the paper's recipe at our scale): for each concept, the
    base model's contrastive loss over up to `n` of its training pairs batched with `n` pool
    pairs, averaged over the concept's pairs (lower = easier)."""
    model.eval()
    out = []
    for imgs in data.concept_images:
        own = imgs[torch.randperm(len(imgs), generator=generator)[:n]]
        pool = data.pool[torch.randint(0, len(data.pool), (n,), generator=generator)]
        b = materialize(torch.cat([own, pool]))
        img, txt, scale = model(b.images, b.tokens)[:3]
        logits = scale * img @ txt.T
        labels = torch.arange(len(logits))
        per = (torch.nn.functional.cross_entropy(logits, labels, reduction="none")
               + torch.nn.functional.cross_entropy(logits.T, labels, reduction="none")) / 2
        out.append(per[: len(own)].mean().item())
    model.train()
    return out


@torch.no_grad()
def class_embeddings(model, tokenizer, data: FomoData, device) -> torch.Tensor:
    """Similarity side information: θ0's text embedding of each concept's templated class name."""
    model.eval()
    texts = [data.class_prompt(c) for c in data.concepts]
    emb = torch.cat([model.encode_text(tokenizer(texts[i:i + 256]).to(device), normalize=True).float().cpu()
                     for i in range(0, len(texts), 256)])
    model.train()
    return emb


def concept_order(cfg, data: FomoData, model, tokenizer, device, materialize, seed: int) -> list[cs.Concept]:
    f = cfg.fomo
    if f.stream_file:
        order = cs.read_stream(f.stream_file)
        if cfg.data.benchmark != "emoji":   # FoMo's stream files list all 41 datasets (handles in either case): keep ours
            ours = {(c.dataset.lower(), c.classname): c for c in data.concepts}
            order = [ours[k] for c in order if (k := (c.dataset.lower(), c.classname)) in ours]
        unknown = [c for c in order if c not in set(data.concepts)]
        if unknown or len(order) != len(data.concepts):
            raise ConfigError(f"fomo.stream_file: {f.stream_file} does not list this benchmark's {len(data.concepts)} "
                              f"concepts" + (f" ({cs.format_entry(unknown[0])!r} is not one)" if unknown else ""))
    elif f.ordering == "random":
        order = cs.random_order(data.concepts, seed)
    elif f.ordering == "easy-to-hard":
        order = cs.easy_to_hard(data.concepts, concept_difficulty(
            model, data, materialize, torch.Generator().manual_seed(seed)))
    elif f.ordering == "frequency":
        order = cs.by_frequency(data.concepts, data.frequency)
    elif f.ordering == "similarity":
        order = cs.by_similarity(data.concepts, class_embeddings(model, tokenizer, data, device))
    elif f.ordering == "time":
        order = cs.by_time(data.concepts, data.year, seed=seed)
    else:  # dataset-incremental, datasets in a seeded random order (as the paper)
        names = list(dict.fromkeys(c.dataset for c in data.concepts))
        order = cs.dataset_incremental(data.concepts, [names[i] for i in np.random.default_rng(seed).permutation(len(names))])
    return cs.reverse(order) if f.reverse else order


def cut(cfg, order: list[cs.Concept]) -> list[list[cs.Concept]]:
    if cfg.fomo.num_tasks == 0:   # dataset-incremental: one task per dataset
        tasks: list[list[cs.Concept]] = []
        for c in order:
            if not tasks or tasks[-1][0].dataset != c.dataset:
                tasks.append([])
            tasks[-1].append(c)
        return tasks
    return cs.cut_tasks(order, cfg.fomo.num_tasks)


# --------------------------------------------------------------------------- the budget

def held_tensors(state) -> list[torch.Tensor]:
    """Every tensor in a method's `state_dict()`, nested dicts, lists and tuples included
    (EWC's {"fisher": {name: F}, "anchors": {name: θ*}})."""
    if isinstance(state, torch.Tensor):
        return [state]
    if isinstance(state, dict):
        state = list(state.values())
    if isinstance(state, (list, tuple)):
        return [t for v in state for t in held_tensors(v)]
    return []


def scaled_steps(steps_per_task: int, compute_scale: float) -> int:
    """Full fine-tuning's steps per task at `compute_scale`, floored as FoMo's code does
    (steps = n_samples // batch size), at least 1; the 1e-9 keeps 0.29 × 100 at 29."""
    return max(1, math.floor(steps_per_task * compute_scale + 1e-9))


def step_cost(model, method: Method, ctx: TaskContext, cfg: ExperimentCfg, device) -> dict:
    """FLOPs of one step (forward + backward, torch's counter) and its training memory (tensor
    accounting: parameters, gradients, optimizer state after one step, saved activations, and
    with `fomo.state_memory: device` the method's state), measured on copies so the run is
    untouched. The copies first go through one task's `before_task`/`after_task` (no training
    steps), so the state a method keeps from the second task on (its `state_dict`: EWC's Fisher
    and anchor, SI's importances and anchor, a merge's θ0) exists. By default
    (`state_memory: offloaded`) that state is not counted: the paper's implementation keeps it
    in CPU memory ("CPU offloading for model weights ... for the EWC, SI and Merge methods",
    FoMo-in-Flux App. C), and its multipliers are device memory (Table 4: EWC 1.0132, SI
    1.0013, merges 1). Under DDP: one rank's (its slice of the batch; the budget's ratios to
    full fine-tuning's are taken on the same slice)."""
    model, method = copy.deepcopy(unwrap(model)), copy.deepcopy(method)
    gen_state = ctx.generator.get_state()
    method.before_task(model, ctx)
    task_flops = budget.flops_per_step(lambda: method.after_task(model, ctx))  # Fisher passes, merges
    ctx.generator.set_state(gen_state)
    batch = method.make_batch(draw_ids(ctx, cfg.train.batch_size), ctx)
    ctx.generator.set_state(gen_state)
    opt = method.make_optimizer(model, cfg.train)

    def step():
        with autocast(device, cfg.train.precision):
            loss = sum(method.loss(model, batch, ctx).values())
        loss.backward()

    step()
    opt.step()
    model.zero_grad(set_to_none=True)
    flops = budget.flops_per_step(step)
    model.zero_grad(set_to_none=True)
    state = held_tensors(method.state_dict()) if cfg.fomo.state_memory == "device" else []
    mem = budget.training_memory_bytes(model, step, opt, state)
    return {"flops": flops, "task_flops": task_flops, "memory": mem}


def method_steps(cfg: ExperimentCfg, ref: dict, model, method: Method, ctx: TaskContext, device) -> tuple[int, dict]:
    """Steps per task for the method under the MAFs budget, and the measurements behind them.
    `ref`: full fine-tuning's `step_cost` on the model before `prepare_model`."""
    own = step_cost(model, method, ctx, cfg, device)
    mult = budget.memory_multiplier(own["memory"]["total"], ref["memory"]["total"])
    mafs, task_mafs = own["flops"] * mult, own["task_flops"] * mult
    steps = scaled_steps(cfg.fomo.steps_per_task, cfg.fomo.compute_scale)
    if cfg.fomo.budget == "mafs":   # per-task work (a Fisher pass) is paid once per task, from the task's budget
        steps = budget.steps_for_budget(1, steps * ref["flops"] - task_mafs, mafs)
    return steps, {"method": own, "full_ft": ref, "memory_multiplier": mult, "mafs": mafs, "task_mafs": task_mafs,
                   "full_ft_mafs": ref["flops"], "steps_per_task": steps}


# --------------------------------------------------------------------------- the run

def run_fomo_experiment(cfg: ExperimentCfg, out_dir: str | Path, ckpt_dir: str | Path | None = None,
                        resume: bool = True, stop_after_task: int | None = None, bad_checkpoint: str = "error") -> dict:
    """Train and evaluate one FoMo-in-Flux run; see the module docstring and `run_experiment`
    (the folders' lock, checkpoints, `bad_checkpoint`)."""
    with exclusive_run(cfg, out_dir, ckpt_dir):
        return _run_fomo(cfg, out_dir, ckpt_dir, resume, stop_after_task, bad_checkpoint)


def _run_fomo(cfg: ExperimentCfg, out_dir: str | Path, ckpt_dir: str | Path | None, resume: bool,
              stop_after_task: int | None, bad_checkpoint: str) -> dict:
    started = time.time()
    out_dir = Path(out_dir)
    device = pick_device(cfg.train.device)
    init_distributed(str(device))
    _, world = rank_and_size()
    torch.set_num_threads(cfg.train.num_threads)
    seed_everything(derive_seed(cfg.seed, "init"))
    if cfg.data.tasks:
        raise ConfigError("data.tasks: the concept stream uses every group (fomo.pool_groups picks the pool)")
    f = cfg.fomo

    data = load_fomo_data(cfg)
    data = with_pool(data, f.pool, derive_seed(cfg.seed, "pool"))
    train = data.train
    corpus = [c for caps in train.captions for c in caps]
    model, tokenizer = create_model(cfg.model.name, cfg.model.pretrained, device, cfg.data.image_size, corpus)
    tokens = tokenizer(corpus).view(len(train.captions), -1, tokenizer.context_length)
    materializer = Materializer(train.images, train.image_text, tokens, device, cfg.train.augment,
                                transform=train_transform(cfg.data.transform))
    plain = Materializer(train.images, train.image_text, tokens, device, augment=False)
    whole = Materializer(train.images, train.image_text, tokens, device, augment=False, local=False)
    side_gen = torch.Generator().manual_seed(derive_seed(cfg.seed, "side-info"))

    order = concept_order(cfg, data, model, tokenizer, device, lambda ids: whole(ids, side_gen),   # alike on every rank
                          derive_seed(cfg.seed, "order"))
    tasks = cut(cfg, order)
    index = {c: i for i, c in enumerate(data.concepts)}
    task_ids = [torch.cat([data.concept_images[index[c]] for c in task]) for task in tasks]
    if f.temperature is not None:
        with torch.no_grad():
            model.logit_scale.fill_(math.log(1 / f.temperature))
    method_cls = get_method(cfg.method.name)
    method = method_cls(method_cls.Config(**cfg.method.args), seed=derive_seed(cfg.seed, "method"))

    def context(t: int) -> TaskContext:
        gen = torch.Generator().manual_seed(derive_seed(cfg.seed, "task", t))
        pools = (data.pool, task_ids[t], buffer_pool(task_ids, t))
        sizes = lambda b: mixture_sizes(b, *f.mixture, first_task=t == 0, field="fomo.mixture")  # noqa: E731
        return TaskContext(task=t, num_tasks=len(tasks), train_set=train, task_ids=task_ids, pool=task_ids[t],
                           materialize=lambda ids, g=gen: materializer(ids, g), generator=gen,
                           materialize_plain=lambda ids, g=torch.Generator().manual_seed(derive_seed(cfg.seed, "plain", t)):
                           plain(ids, g),
                           sampler=lambda b, g: sample_mixture(pools, sizes(b), g)[0])

    full_ft = step_cost(model, SeqF(), context(0), cfg, device)   # the budget's reference, before adapters and freezing
    method.prepare_model(model)
    steps_per_task, cost = method_steps(cfg, full_ft, model, method, context(0), device)
    compile_model(model, cfg)
    steps = [steps_per_task] * len(tasks)
    plan = plan_for(cfg.train, steps)

    chash = config_hash(cfg.to_dict())
    ckpts = Checkpoints(ckpt_dir or out_dir, chash, bad_checkpoint, f"{cfg.name} seed {cfg.seed}",
                        keep_tasks=cfg.train.keep_task_checkpoints)
    results = {
        "format": RESULTS_FORMAT, "experiment": cfg.name, "seed": cfg.seed, "config": cfg.to_dict(),
        "config_hash": chash, "stream": [cs.format_entry(c) for c in order],
        "tasks": [[cs.format_entry(c) for c in task] for task in tasks], "task_sizes": [len(i) for i in task_ids],
        "steps_per_task": steps, "budget": cost, "world_size": world, "device": str(device),
        "versions": _versions(), "datasets": {s.name: {"role": s.role, "n": len(s.images) if s.pairs is None else len(s.pairs.texts)}
                     for s in data.eval_sets},
        "zero_shot": None, "trajectory": [], "train": [],
    }
    start = 0
    if resume and (state := resume_from(ckpts, model, method, cfg)):
        results, start = state
    elif not resume:
        ckpts.ignore_existing()
    earlier = list(results.get("attempt_seconds", []))

    if world > 1:
        model = wrap_ddp(model)
    eval_tokenizer = MemoTokenizer(tokenizer)   # the same texts at every evaluation
    if results["zero_shot"] is None and is_main():
        results["zero_shot"] = evaluate_fomo(unwrap(model), eval_tokenizer, data.eval_sets, device, cfg.eval.batch_size)

    for t in range(start, len(tasks)):
        ctx = context(t)
        budget.reset_peak_memory(device)
        clock = PhaseClock()
        t0 = time.time()
        stats = train_task(model, method, ctx, steps[t], cfg.train, device, lr_at=lr_fn(cfg.train.schedule, plan, t),
                           desc=f"{cfg.name} s{cfg.seed} task {t + 1}/{len(tasks)}", clock=clock)
        with clock("after_task"):
            method.after_task(unwrap(model), ctx)
        seconds = time.time() - t0
        check_finite(model, method, cfg, t, len(tasks), f"{len(tasks[t])} concepts from {cs.format_entry(tasks[t][0])}",
                     ckpts)
        t1 = time.time()
        row = evaluate_fomo(unwrap(model), eval_tokenizer, data.eval_sets, device, cfg.eval.batch_size,
                            progress=cfg.train.progress) if is_main() else None
        if row:
            results["trajectory"].append(row)
        results["train"].append({"task": t, "steps": steps[t], "seconds": round(seconds, 3),
                                 "eval_seconds": round(time.time() - t1, 3), "samples": stats["samples"],
                                 "loss": stats["loss"], "terms": stats["terms"],
                                 "flops_per_step": cost["method"]["flops"],          # the budget's step_cost (measured once)
                                 "task_pass_flops": cost["method"]["task_flops"],
                                 "peak_memory_mb": round(budget.peak_memory_mb(device), 1),
                                 "phase_seconds": clock.rounded()})
        if is_main() and row:
            print(f"[{cfg.name} seed {cfg.seed}] task {t + 1}/{len(tasks)}: loss {stats['loss']:.3f} "
                  f"A_KA {row['A_KA']:.1f} A_ZS {row['A_ZS']:.1f} GM {row['GM']:.1f} ({seconds:.0f}s)", flush=True)
        if checkpoint_due(t, len(tasks), cfg.train.checkpoint_every, stop_after_task):
            record_time(results, earlier, started)
            _save_checkpoint(ckpts, {"config_hash": chash, "task": t, "model": unwrap(model).state_dict(),
                                     "method": method.state_dict(), "rng": rng_state(), "results": results})
        if stop_after_task is not None and t >= stop_after_task and t < len(tasks) - 1:
            return results

    if is_main():
        record_time(results, earlier, started)   # the whole run's: every attempt's time
        write_json(out_dir / "results.json", results)
    barrier()
    return results
