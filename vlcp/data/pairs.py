"""Image–text pair sets and the benchmark base class.

A `PairSet` holds images and their texts: each image belongs to one item (text) and each item
may have several images (one per style), so retrieval handles several ground truths per text.
A `Benchmark` is a list of items (split, group, subgroup, captions) with their images, cut into
tasks by `data.stream`: the embedded emoji benchmark (`vlcp.data.benchmark.EmojiBenchmark`, images
in memory), or a real dataset read by `vlcp.data.formats` (`vlcp.data.real`, images decoded on access).
`vlcp.data.load.load_benchmark` loads the one a run names.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from vlcp.config import DataCfg
from vlcp.data.streams import assign_tasks


@dataclass
class PairSet:
    images: torch.Tensor       # uint8 [M, S, S, 3] (or `vlcp.data.formats.ImageFiles`: decoded on access)
    image_text: torch.Tensor   # long [M]: index into the texts below
    texts: list[str]           # fixed evaluation caption per item
    captions: list[list[str]]  # caption variants per item (training)
    labels: torch.Tensor       # long [N]: class (subgroup) id per item
    tasks: torch.Tensor        # long [N]: task id per item
    items: torch.Tensor        # long [N]: benchmark item id
    groups: torch.Tensor | None = None   # long [N]: group id per item (a coarser class)

    def __len__(self) -> int:
        return len(self.images)

    @property
    def image_labels(self) -> torch.Tensor:
        return self.labels[self.image_text]

    @property
    def image_groups(self) -> torch.Tensor:
        return self.groups[self.image_text]

    @property
    def image_tasks(self) -> torch.Tensor:
        return self.tasks[self.image_text]

    def select_texts(self, keep: torch.Tensor) -> "PairSet":
        """Keep the items where `keep` (bool [N]) is true, and their images."""
        new_id = torch.cumsum(keep.long(), 0) - 1
        img_keep = keep[self.image_text]
        idx = keep.nonzero().squeeze(1).tolist()
        images = self.images.subset(img_keep) if hasattr(self.images, "subset") else self.images[img_keep]
        return PairSet(images, new_id[self.image_text[img_keep]],
                       [self.texts[i] for i in idx], [self.captions[i] for i in idx],
                       self.labels[keep], self.tasks[keep], self.items[keep],
                       None if self.groups is None else self.groups[keep])

    def of_tasks(self, task_ids) -> "PairSet":
        return self.select_texts(torch.isin(self.tasks, torch.as_tensor(list(task_ids))))


class Benchmark:
    """Items (dicts with `split`, `group`, `subgroup`, `captions`) and their images, cut into
    tasks by `cfg.stream` (`vlcp.data.streams.assign_tasks`). Subclasses give the images of
    selected items (`_images`) and say which split is the multi-modal gallery."""

    gallery_split = "train"   # the multi-modal retrieval gallery (the emoji benchmark: the train items)
    named_classes = True      # class names a prompt can say (cc's pseudo classes are ids: no per-task zero-shot)

    def __init__(self, items: list[dict], groups: list[str], subgroups: list[str], cfg: DataCfg):
        self.items, self.cfg = items, cfg
        self.group_names, self.class_names = list(groups), list(subgroups)
        self.item_task, self.task_names = assign_tasks(items, self.group_names, self.class_names, cfg)

    def _images(self, sel: list[int], styles: list[str]):
        """The images of items `sel`, style-major: uint8 [len(styles) * len(sel), S, S, 3]."""
        raise NotImplementedError

    def caption_corpus(self) -> list[str]:
        """Every caption of the benchmark (all splits and groups): what a model's own vocab is built
        from, so that a base model and the streams after it share token ids."""
        return [c for it in self.items for c in it["captions"]]

    def pairs(self, split: str | tuple[str, ...], styles: list[str]) -> PairSet:
        """Items of the selected tasks in `split`, with their images (one per style)."""
        splits = (split,) if isinstance(split, str) else split
        task_of = self.item_task
        class_of = {c: i for i, c in enumerate(self.class_names)}
        group_of = {g: i for i, g in enumerate(self.group_names)}
        sel = [i for i, it in enumerate(self.items) if it["split"] in splits and task_of[i] >= 0]
        sel.sort(key=lambda i: task_of[i])  # task-major order (stable: benchmark order within a task)
        imgs = self._images(sel, styles)
        n = len(sel)
        return PairSet(
            images=imgs,
            image_text=torch.arange(n).repeat(len(imgs) // n if n else 1),
            texts=[self.items[i]["captions"][0] for i in sel],
            captions=[self.items[i]["captions"] for i in sel],
            labels=torch.tensor([class_of[self.items[i]["subgroup"]] for i in sel], dtype=torch.long),
            tasks=torch.tensor([task_of[i] for i in sel], dtype=torch.long),
            groups=torch.tensor([group_of[self.items[i]["group"]] for i in sel], dtype=torch.long),
            items=torch.tensor(sel, dtype=torch.long),
        )
