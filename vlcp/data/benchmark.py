"""Load a benchmark into image–text pair sets.

A `PairSet` holds images and their texts: each image belongs to one item (text) and each item
may have several images (one per style), so retrieval handles several ground truths per text.
A `Benchmark` is a list of items (split, group, subgroup, captions) with their images, cut into
tasks by `data.stream`: the embedded emoji benchmark (`EmojiBenchmark`, images in memory), or a
real dataset read by `vlcp.data.formats` (`vlcp.data.real`, images decoded on access).
"""
from __future__ import annotations

import math
import shlex
import zipfile
import zlib
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


class EmojiBenchmark(Benchmark):
    """A prepared emoji benchmark directory (see `vlcp.data.emoji`). Loading checks that the data
    is what the run's `data` config describes (the settings `prepare_emoji` recorded in meta.json)
    and that neither file is damaged: any problem is a one-line `VlcpError` naming the file or field."""

    def __init__(self, root: str | Path, cfg: DataCfg):
        root = Path(root)
        if not (root / "meta.json").exists():
            raise VlcpError(f"data.root: {root} has no prepared benchmark (meta.json); run `vlcp data prepare`")
        self.root = root
        self.meta = read_meta(root / "meta.json")
        check_record(self.meta, cfg, root)
        self._by_style = read_images(root / "images.npz", self.meta)
        for s in cfg.train_styles + cfg.unseen_styles:
            if s not in self._by_style:
                raise VlcpError(f"data.styles: style {s!r} not in {root}; re-run `vlcp data prepare`")
        super().__init__(self.meta["items"], self.meta["groups"], self.meta["subgroups"], cfg)
        self._check_training_set(root / "meta.json")

    def _check_training_set(self, meta_path: Path) -> None:
        """Every task of the run (and so the run) has training items: an empty one would fail
        deep in the training loop."""
        train = np.array([it["split"] == "train" for it in self.items], dtype=bool)
        used = self.item_task >= 0
        what = f"data.tasks {list(self.cfg.tasks)}" if self.cfg.tasks else "the benchmark's groups"
        if not (train & used).any():
            raise VlcpError(f"{meta_path}: no training items for the run's tasks ({what}); the file is damaged "
                            "or data.tasks names groups without items: re-run `vlcp data prepare`")
        if self.cfg.stream in ("group", "class", "instance"):   # one task = a group or a chunk of items
            for t, name in enumerate(self.task_names):
                if not (train & (self.item_task == t)).any():
                    raise VlcpError(f"{meta_path}: task {name!r} has no training items; re-run `vlcp data prepare`")

    def images(self, style: str) -> np.ndarray:
        return self._by_style[style]

    def _images(self, sel: list[int], styles: list[str]) -> torch.Tensor:
        if not sel:
            return torch.zeros((0, self.cfg.image_size, self.cfg.image_size, 3), dtype=torch.uint8)
        return torch.from_numpy(np.concatenate([self._by_style[s][sel] for s in styles]))


# --------------------------------------------------------------------------- the prepared emoji data

SPLITS = ("train", "val", "test", "query")


def _damaged(path: Path, what: str) -> VlcpError:
    return VlcpError(f"{path}: {what}; the file is damaged: re-run `vlcp data prepare`")


def read_meta(path: Path) -> dict:
    """meta.json of a prepared emoji benchmark, checked key by key (`VlcpError` naming the file)."""
    from vlcp.data.emoji import META_FORMAT, RECORDED

    try:
        meta = read_json(path)
    except (OSError, ValueError) as e:   # JSONDecodeError, UnicodeDecodeError: ValueError
        raise VlcpError(f"{path}: unreadable ({type(e).__name__}: {e}); re-run `vlcp data prepare`") from None
    if not isinstance(meta, dict):
        raise _damaged(path, f"expected a JSON object, got {type(meta).__name__}")
    fmt = meta.get("format")
    if isinstance(fmt, int) and not isinstance(fmt, bool) and fmt < META_FORMAT:
        raise VlcpError(f"{path}: prepared by an older vlcp (format {fmt}, without the record of its data "
                        f"settings); re-run `vlcp data prepare`")
    if fmt != META_FORMAT:
        raise _damaged(path, f"format {fmt!r}, expected {META_FORMAT}" if "format" in meta else "missing key 'format'")

    def want(key, ok, kind):
        if key not in meta:
            raise _damaged(path, f"missing key {key!r}")
        if not ok(meta[key]):
            raise _damaged(path, f"{key}: expected {kind}, got {_short(meta[key])}")

    def is_int(v):
        return isinstance(v, int) and not isinstance(v, bool)

    def is_num(v):
        return is_int(v) or isinstance(v, float)

    def strings(v):
        return isinstance(v, list) and all(isinstance(x, str) for x in v)

    want("items", lambda v: isinstance(v, list), "a list of items")
    for key in ("groups", "subgroups", "styles", RECORDED["styles"]):
        want(key, strings, "a list of strings")
    for key in (RECORDED["seed"], RECORDED["image_size"], RECORDED["captions_per_item"]):
        want(key, is_int, "an integer")
    want(RECORDED["max_version"], is_num, "a number")
    want(RECORDED["split"], lambda v: isinstance(v, dict) and all(is_num(v.get(s)) for s in ("test", "val", "query")),
         "{test, val, query} fractions")
    missing = [s for s in meta[RECORDED["styles"]] if s not in meta["styles"]]
    if missing:
        raise _damaged(path, f"required style {missing[0]!r} is not in styles")
    groups, subgroups = set(meta["groups"]), set(meta["subgroups"])
    for i, it in enumerate(meta["items"]):
        problem = (
            "expected an object" if not isinstance(it, dict) else
            f"split {it.get('split')!r} is none of {', '.join(SPLITS)}" if it.get("split") not in SPLITS else
            f"group {it.get('group')!r} is not in groups" if it.get("group") not in groups else
            f"subgroup {it.get('subgroup')!r} is not in subgroups" if it.get("subgroup") not in subgroups else
            "captions: expected a non-empty list of strings" if not (strings(it.get("captions")) and it["captions"])
            else None)
        if problem:
            raise _damaged(path, f"items[{i}]: {problem}")
    return meta


def _short(v, n: int = 60) -> str:
    text = repr(v)
    return text if len(text) <= n else text[:n] + "…"


def _yaml_value(v) -> str:
    return "[" + ", ".join(map(str, v)) + "]" if isinstance(v, list) else f"{v}"


def check_record(meta: dict, cfg: DataCfg, root: Path) -> None:
    """The run's `data` settings equal those the benchmark at `root` was prepared with
    (`vlcp.data.emoji.RECORDED`); otherwise a `VlcpError` naming each differing field, both values,
    the folder and the command that prepares matching data. Styles: the run's required `styles`
    are the prepared ones (they decide which emoji were kept); its train/unseen styles are a subset."""
    from vlcp.data.emoji import RECORDED, data_record

    run = data_record(cfg)
    diffs = []   # (dotted field, the run's value, the prepared value)
    for f, key in RECORDED.items():
        mine, theirs = run[key], meta[key]
        if f == "split":
            diffs += [(f"split.{s}", mine[s], theirs[s]) for s in ("test", "val", "query")
                      if not math.isclose(mine[s], theirs[s], rel_tol=1e-9, abs_tol=1e-12)]
        elif f == "max_version":
            if not math.isclose(mine, theirs, rel_tol=1e-9, abs_tol=1e-12):
                diffs.append((f, mine, theirs))
        elif f == "styles":
            if set(mine) != set(theirs):
                diffs.append((f, mine, theirs))
        elif mine != theirs:
            diffs.append((f, mine, theirs))
    if not diffs:
        return
    tags = {"seed": "seed{}", "image_size": "{}px", "max_version": "v{}", "captions_per_item": "{}captions",
            "split.test": "test{}", "split.val": "val{}", "split.query": "query{}"}
    new_root = f"{root}-" + "-".join(tags[f].format(v) if f in tags else "+".join(v) for f, v, _ in diffs)
    sets = [f"data.{f}={_yaml_value(v)}" for f, v, _ in diffs] + [f"data.root={new_root}"]
    command = "vlcp data prepare " + " ".join(f"--set {shlex.quote(s)}" for s in sets)
    what = "; ".join(f"data.{f}: this run has {_yaml_value(v)} but {root} was prepared with {_yaml_value(p)}"
                     for f, v, p in diffs)
    raise VlcpError(f"{what} ({root / 'meta.json'}). Prepare matching data with `{command}` and run with "
                    f"`--set {shlex.quote('data.root=' + new_root)}` (or that data.root in the params file)")


def read_images(path: Path, meta: dict) -> dict[str, np.ndarray]:
    """images.npz of a prepared emoji benchmark: one uint8 [items, S, S, 3] array per style of
    meta.json (`VlcpError` naming the file otherwise)."""
    if not path.exists():
        raise VlcpError(f"{path}: missing (meta.json is there); re-run `vlcp data prepare`")
    try:
        with np.load(path, allow_pickle=False) as z:
            by_style = {s: z[s] for s in z.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as e:
        raise VlcpError(f"{path}: unreadable ({type(e).__name__}: {e}); re-run `vlcp data prepare`") from None
    n, size = len(meta["items"]), meta["image_size"]
    for s in meta["styles"]:
        if s not in by_style:
            raise _damaged(path, f"no images of style {s!r} (meta.json lists it)")
        a = by_style[s]
        if a.dtype != np.uint8 or a.shape != (n, size, size, 3):
            raise _damaged(path, f"style {s!r}: expected uint8 [{n}, {size}, {size}, 3] ({n} items of "
                                 f"{size} px), got {a.dtype} {list(a.shape)}")
    return by_style


def load_benchmark(cfg: DataCfg) -> Benchmark:
    """The benchmark `cfg.benchmark` names, from `cfg.root`."""
    if cfg.benchmark == "emoji":
        return EmojiBenchmark(cfg.root, cfg)
    from vlcp.data.real import load_real_benchmark
    return load_real_benchmark(cfg)
