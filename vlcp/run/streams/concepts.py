"""FoMo-in-Flux's concept stream (data.stream: concepts).

From the base CLIP θ0 (`model.pretrained`, pretrained on the pool P by `vlcp pretrain
fomo-base`): order the adaptation concepts (`fomo.ordering`, side information from θ0), cut the
stream into `fomo.num_tasks` tasks, give the method its compute budget (full fine-tuning's
`fomo.steps_per_task` × full FT's MAFs / the method's MAFs, both measured here), then per task
train on P/D/B mixed batches (`fomo.mixture`; the buffer is every earlier task's data) under
`train.schedule` (meta-schedules see the whole stream) and evaluate A_KA / A_ZS / GM on every
dataset. The zero-shot point (θ0) starts the trajectory.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from vlcp.config import ExperimentCfg
from vlcp.data import concepts as cs
from vlcp.data.augment import train_transform
from vlcp.data.fomo import FomoData, with_pool
from vlcp.data.load import load_fomo_data
from vlcp.data.mixtures import buffer_pool, mixture_sizes, sample_mixture
from vlcp.errors import ConfigError
from vlcp.eval.encode import MemoTokenizer
from vlcp.eval.fomo import class_sizes, evaluate_fomo
from vlcp.eval.memo import evaluation_key, starting_point
from vlcp.methods.base import Method, TaskContext
from vlcp.methods.seqf import SeqF
from vlcp.models import create_model
from vlcp.run.accounting import mafs_steps, step_cost
from vlcp.run.stream import Stream
from vlcp.train.loop import Materializer
from vlcp.utils import derive_seed


# --------------------------------------------------------------------------- the order

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

def scaled_steps(steps_per_task: int, compute_scale: float) -> int:
    """Full fine-tuning's steps per task at `compute_scale`, floored as FoMo's code does
    (steps = n_samples // batch size), at least 1; the 1e-9 keeps 0.29 × 100 at 29."""
    return max(1, math.floor(steps_per_task * compute_scale + 1e-9))


def method_steps(cfg: ExperimentCfg, ref: dict, model, method: Method, ctx: TaskContext, device,
                 probe: TaskContext | None = None) -> tuple[int, dict]:
    """Steps per task for the method under the MAFs budget, and the measurements behind them.
    `ref`: full fine-tuning's `step_cost` on the model before `prepare_model`; `probe`: the context
    its step is measured in (`step_cost`)."""
    own = step_cost(model, method, ctx, cfg, device, probe)
    return mafs_steps(scaled_steps(cfg.fomo.steps_per_task, cfg.fomo.compute_scale), ref, own,
                      cfg.fomo.budget == "mafs")


# --------------------------------------------------------------------------- the stream

# the `fomo` fields the evaluation datasets are built from (`vlcp.data.fomo._eval_sets`, `vlcp.data.real.fomo_data`)
EVAL_SET_FIELDS = ("pool_groups", "shapes_per_class", "adapt_unseen", "datasets", "retention", "retrieval",
                   "adaptation_retrieval")


class ConceptStream(Stream):
    counts_flops = False   # the budget's step_cost, measured once, is every task's cost
    provides = Stream.provides | {"reference"}   # the pool P θ0 was pretrained on (`TaskContext.reference`)

    @classmethod
    def check(cls, cfg: ExperimentCfg, method_cls: type[Method]) -> None:
        if cfg.data.tasks:
            raise ConfigError("data.tasks: the concept stream uses every group (fomo.pool_groups picks the pool)")
        if cfg.fomo.adapt_unseen and (cfg.data.benchmark != "emoji" or not cfg.data.unseen_styles):
            raise ConfigError("fomo.adapt_unseen: scores the emoji benchmark's adaptation groups in data.unseen_styles; "
                              + (f"data.benchmark is {cfg.data.benchmark!r}" if cfg.data.benchmark != "emoji"
                                 else "data.unseen_styles is empty"))

    def build(self, method: Method) -> None:
        cfg, device, f = self.cfg, self.device, self.cfg.fomo
        with self.loading():
            data = load_fomo_data(cfg, self.bad_images)
            data = with_pool(data, f.pool, derive_seed(cfg.seed, "pool"))
        train = data.train
        corpus = [c for caps in train.captions for c in caps]
        model, tokenizer = create_model(cfg.model.name, cfg.model.pretrained, device, cfg.data.image_size, corpus)
        tokens = tokenizer(corpus).view(len(train.captions), -1, tokenizer.context_length)
        self.materializer = Materializer(train.images, train.image_text, tokens, device, cfg.train.augment,
                                         transform=train_transform(cfg.data.transform))
        self.plain = Materializer(train.images, train.image_text, tokens, device, augment=False)
        whole = Materializer(train.images, train.image_text, tokens, device, augment=False, local=False)
        order_seed = cfg.seed if f.order_seed is None else f.order_seed
        side_gen = torch.Generator().manual_seed(derive_seed(order_seed, "side-info"))

        self.order = concept_order(cfg, data, model, tokenizer, device, lambda ids: whole(ids, side_gen),  # alike on every rank
                                   derive_seed(order_seed, "order"))
        self.tasks = cut(cfg, self.order)
        index = {c: i for i, c in enumerate(data.concepts)}
        self.task_ids = [torch.cat([data.concept_images[index[c]] for c in task]) for task in self.tasks]
        if f.temperature is not None:
            with torch.no_grad():
                model.logit_scale.fill_(math.log(1 / f.temperature))
        self.data, self.train, self.model, self.tokenizer = data, train, model, tokenizer
        self.eval_tokenizer = MemoTokenizer(tokenizer)   # the same texts at every evaluation
        self.text_cache: dict = {}   # class weights and captions of an unchanged text tower, across rounds (text_state)

    def reference_cost(self) -> None:
        """Full fine-tuning's step cost: the budget's reference, before adapters and freezing."""
        self.full_ft = step_cost(self.model, SeqF(), self.context(0), self.cfg, self.device)

    def budget(self, method: Method) -> list[int]:
        steps_per_task, self.cost = method_steps(self.cfg, self.full_ft, self.model, method, self.context(0), self.device,
                                                 self.probe_context(method))
        self.steps = [steps_per_task] * len(self.tasks)
        return self.steps

    def header(self) -> dict:
        return {"stream": [cs.format_entry(c) for c in self.order],
                "tasks": [[cs.format_entry(c) for c in task] for task in self.tasks],
                "task_sizes": [len(i) for i in self.task_ids], "steps_per_task": self.steps, "budget": self.cost}

    def environment(self) -> dict:
        # an adaptation classification set's images per class: the pools of what each concept taught (vlcp.report.teach)
        return {"datasets": {s.name: {"role": s.role, "n": s.size,
                                      **({"class_n": class_sizes(s)} if s.role == "adaptation" and s.pairs is None else {})}
                             for s in self.data.eval_sets}}

    def records(self) -> dict:
        return {"trajectory": []}

    def zero_shot(self, model) -> dict:
        """θ0 (after the method prepared it) on every dataset, once per process for the runs whose θ0 is
        the same (`starting_point`; the datasets come from the data config and `EVAL_SET_FIELDS`)."""
        key = evaluation_key(self.cfg, self.device, stream="concepts",
                             fomo={k: getattr(self.cfg.fomo, k) for k in EVAL_SET_FIELDS})
        return starting_point(key, model, lambda: evaluate_fomo(model, self.eval_tokenizer, self.data.eval_sets,
                                                                self.device, self.cfg.eval.batch_size,
                                                                text_cache=self.text_cache))

    def context(self, t: int) -> TaskContext:
        cfg, data, task_ids = self.cfg, self.data, self.task_ids
        gen = torch.Generator().manual_seed(derive_seed(cfg.seed, "task", t))
        buffer = buffer_pool(task_ids, t)
        sizes = lambda b: mixture_sizes(b, *cfg.fomo.mixture, first_task=t == 0, field="fomo.mixture")  # noqa: E731
        ctx = TaskContext(task=t, num_tasks=len(self.tasks), train_set=self.train, task_ids=task_ids, pool=task_ids[t],
                          materialize=lambda ids, g=gen: self.materializer(ids, g), generator=gen,
                          materialize_plain=lambda ids, g=torch.Generator().manual_seed(derive_seed(cfg.seed, "plain", t)):
                          self.plain(ids, g), reference=data.pool)
        # D is drawn from ctx.pool: the task's data, or what a method makes of it (JointT: every task so far)
        ctx.sampler = lambda b, g: sample_mixture((data.pool, ctx.pool, buffer), sizes(b), g)[0]
        return ctx

    def task_label(self, t: int) -> str:
        return f"{len(self.tasks[t])} concepts from {cs.format_entry(self.tasks[t][0])}"

    def task_key(self, t: int) -> int:
        return t

    def evaluate(self, model, t: int) -> dict:
        return evaluate_fomo(model, self.eval_tokenizer, self.data.eval_sets, self.device, self.cfg.eval.batch_size,
                             progress=self.cfg.train.progress, text_cache=self.text_cache)

    def record(self, results: dict, t: int, row: dict | None) -> None:
        if row:
            results["trajectory"].append(row)

    def fixed_flops(self) -> tuple[int, int]:
        return self.cost["method"]["flops"], self.cost["method"]["task_flops"]

    def progress(self, row: dict) -> str:
        return f"A_KA {row['A_KA']:.1f} A_ZS {row['A_ZS']:.1f} GM {row['GM']:.1f}"
