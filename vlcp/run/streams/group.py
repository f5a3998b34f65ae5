"""The group, class and instance streams (the spine, CTP, IncCLIP): a benchmark's pairs cut into
tasks by group, class chunk or instance chunk (`vlcp.data.streams`), steps in proportion to the
tasks' sizes, retrieval on the test and unseen-style sets after every task (ZS@1, cumulative
pools, mAP; with `eval.heldout` the held-out suite or IncCLIP's downstream sets) and, after the
last task, every pool's final scores (`final_cumulative`)."""
from __future__ import annotations

import torch

from vlcp.data.augment import train_transform
from vlcp.data.load import load_benchmark
from vlcp.eval.evaluate import Evaluator
from vlcp.eval.memo import evaluation_key, starting_point
from vlcp.methods.base import Method, TaskContext
from vlcp.models import create_model
from vlcp.run.stream import Stream
from vlcp.train import budget
from vlcp.train.distributed import is_main
from vlcp.train.loop import Materializer
from vlcp.utils import derive_seed


class GroupStream(Stream):
    first_step_flops = True

    def build(self, method: Method) -> None:
        cfg, device = self.cfg, self.device
        with self.loading():
            bench = load_benchmark(cfg.data, self.bad_images)
            train = bench.pairs("train", cfg.data.train_styles)
            sets = {"test": bench.pairs("test", cfg.data.train_styles)}
            if cfg.data.unseen_styles:
                sets["unseen_style"] = bench.pairs(("train", "val", "test", "query"), cfg.data.unseen_styles)
            gallery = train if bench.gallery_split == "train" else bench.pairs(bench.gallery_split, cfg.data.train_styles)
            downstream = None
            if cfg.data.benchmark == "cc" and cfg.eval.heldout:   # IncCLIP's suite: the real downstream datasets
                from vlcp.data.real import load_downstream
                downstream = load_downstream(cfg, self.bad_images)
            query = bench.pairs("query", cfg.data.train_styles)
        self.names = bench.task_names
        self.evaluator = Evaluator(sets, query, gallery,
                                   bench.class_names if bench.named_classes else [], len(self.names), cfg.eval,
                                   bench.group_names, downstream, progress=cfg.train.progress)

        corpus = [c for caps in train.captions for c in caps]
        self.model, self.tokenizer = create_model(cfg.model.name, cfg.model.pretrained, device, cfg.data.image_size,
                                                  bench.caption_corpus())
        tokens = self.tokenizer(corpus).view(len(train.captions), -1, self.tokenizer.context_length)
        mask = self.tokenizer.masker() if hasattr(self.tokenizer, "masker") else None  # models with an MLM head
        self.materializer = Materializer(train.images, train.image_text, tokens, device, cfg.train.augment, mask=mask,
                                         transform=train_transform(cfg.data.transform))
        self.plain = Materializer(train.images, train.image_text, tokens, device, augment=False)
        self.train = train
        self.task_ids = [(train.image_tasks == t).nonzero().squeeze(1) for t in range(len(self.names))]

    def budget(self, method: Method) -> list[int]:
        self.steps = budget.allocate_steps(self.cfg.train.steps, [len(i) for i in self.task_ids],
                                           self.cfg.train.steps_split)
        return self.steps

    def header(self) -> dict:
        return {"tasks": self.names, "task_sizes": [len(i) for i in self.task_ids], "steps_per_task": self.steps}

    def records(self) -> dict:
        return {"matrix": {}, "cumulative": []}

    def zero_shot(self, model):
        return starting_point(evaluation_key(self.cfg, self.device, stream="group"), model,
                              lambda: self.evaluator.zero_shot(model, self.tokenizer, self.device))

    def context(self, t: int) -> TaskContext:
        seed = self.cfg.seed
        gen = torch.Generator().manual_seed(derive_seed(seed, "task", t))
        return TaskContext(task=t, num_tasks=self.num_tasks, train_set=self.train, task_ids=self.task_ids,
                           pool=self.task_ids[t], materialize=lambda ids, g=gen: self.materializer(ids, g),
                           generator=gen,
                           materialize_plain=lambda ids, g=torch.Generator().manual_seed(derive_seed(seed, "plain", t)):
                           self.plain(ids, g))

    def task_label(self, t: int) -> str:
        return self.names[t]

    def evaluate(self, model, t: int) -> dict:
        return self.evaluator(model, self.tokenizer, self.device, t)

    def record(self, results: dict, t: int, row: dict | None) -> None:
        for name, metrics in (row or {}).get("matrix", {}).items():
            for m, vals in metrics.items():
                results["matrix"].setdefault(name, {}).setdefault(m, []).append(vals)
        if row:
            results["cumulative"].append(row["cumulative"])
            if "heldout" in row:
                results.setdefault("heldout", []).append(row["heldout"])

    def progress(self, row: dict) -> str:
        c = row["cumulative"]["test"]
        maps = f" mAP@10 {c['mAP@10']:.1f}" if "mAP@10" in c else ""   # (no query set: cc)
        return f"cumulative Rm {c['Rm']:.1f}{maps}"

    def finish(self, model, results: dict) -> None:
        if is_main():
            results["final_cumulative"] = self.evaluator.final_pools(model, self.tokenizer, self.device)
