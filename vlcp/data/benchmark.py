"""Load a prepared benchmark into in-memory image–text pair sets.

A `PairSet` holds images and their texts: each image belongs to one item (text) and each item
may have several images (one per style), so retrieval handles several ground truths per text.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from vlcp.config import DataCfg
from vlcp.data.streams import assign_tasks
from vlcp.errors import VlcpError
from vlcp.utils import read_json


@dataclass
class PairSet:
    images: torch.Tensor       # uint8 [M, S, S, 3]
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
        return PairSet(self.images[img_keep], new_id[self.image_text[img_keep]],
                       [self.texts[i] for i in idx], [self.captions[i] for i in idx],
                       self.labels[keep], self.tasks[keep], self.items[keep],
                       None if self.groups is None else self.groups[keep])

    def of_tasks(self, task_ids) -> "PairSet":
        return self.select_texts(torch.isin(self.tasks, torch.as_tensor(list(task_ids))))


class EmojiBenchmark:
    """A prepared emoji benchmark directory (see `vlcp.data.emoji`)."""

    def __init__(self, root: str | Path, cfg: DataCfg):
        root = Path(root)
        if not (root / "meta.json").exists():
            raise VlcpError(f"data.root: {root} has no prepared benchmark (meta.json); run `vlcp data prepare`")
        self.root, self.cfg = root, cfg
        self.meta = read_json(root / "meta.json")
        try:
            with np.load(root / "images.npz") as z:
                self._images = {s: z[s] for s in z.files}
        except (OSError, ValueError) as e:
            raise VlcpError(f"{root / 'images.npz'}: unreadable ({e})") from None
        for s in cfg.train_styles + cfg.unseen_styles:
            if s not in self._images:
                raise VlcpError(f"data.styles: style {s!r} not in {root}; re-run `vlcp data prepare`")
        if self.meta["image_size"] != cfg.image_size:
            raise VlcpError(f"data.image_size: {cfg.image_size} but {root} was prepared at "
                            f"{self.meta['image_size']}; re-run `vlcp data prepare`")
        self.item_task, self.task_names = assign_tasks(self.items, self.meta["groups"], self.meta["subgroups"], cfg)
        self.class_names = self.meta["subgroups"]
        self.group_names = self.meta["groups"]

    @property
    def items(self) -> list[dict]:
        return self.meta["items"]

    def images(self, style: str) -> np.ndarray:
        return self._images[style]

    def caption_corpus(self) -> list[str]:
        """Every caption of the benchmark (all splits and groups): what a model's own vocab is built
        from, so that a base model and the streams after it share token ids."""
        return [c for it in self.items for c in it["captions"]]

    def pairs(self, split: str | tuple[str, ...], styles: list[str]) -> PairSet:
        """Items of the selected tasks in `split`, with one image per style."""
        splits = (split,) if isinstance(split, str) else split
        task_of = self.item_task
        class_of = {c: i for i, c in enumerate(self.class_names)}
        group_of = {g: i for i, g in enumerate(self.group_names)}
        sel = [i for i, it in enumerate(self.items) if it["split"] in splits and task_of[i] >= 0]
        sel.sort(key=lambda i: task_of[i])  # task-major order (stable: benchmark order within a task)
        imgs = np.concatenate([self._images[s][sel] for s in styles]) if sel else \
            np.zeros((0, self.cfg.image_size, self.cfg.image_size, 3), np.uint8)
        n = len(sel)
        return PairSet(
            images=torch.from_numpy(imgs),
            image_text=torch.arange(n).repeat(len(styles)),
            texts=[self.items[i]["captions"][0] for i in sel],
            captions=[self.items[i]["captions"] for i in sel],
            labels=torch.tensor([class_of[self.items[i]["subgroup"]] for i in sel], dtype=torch.long),
            tasks=torch.tensor([task_of[i] for i in sel], dtype=torch.long),
            groups=torch.tensor([group_of[self.items[i]["group"]] for i in sel], dtype=torch.long),
            items=torch.tensor(sel, dtype=torch.long),
        )


def load_benchmark(cfg: DataCfg) -> EmojiBenchmark:
    return EmojiBenchmark(cfg.root, cfg)
