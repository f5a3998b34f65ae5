"""The embedded emoji benchmark (`EmojiBenchmark`, images in memory) and the checks of its
prepared files. `PairSet` and `Benchmark` live in `vlcp.data.pairs` (re-exported here);
`vlcp.data.load.load_benchmark` loads the benchmark a run names.
"""
from __future__ import annotations

import math
import os
import shlex
import zipfile
import zlib
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from vlcp.config import DataCfg
from vlcp.data.pairs import Benchmark, PairSet  # noqa: F401  (PairSet: re-exported for users)
from vlcp.errors import VlcpError
from vlcp.utils import read_json


class EmojiBenchmark(Benchmark):
    """A prepared emoji benchmark directory (see `vlcp.data.emoji`). Loading checks that the data
    is what the run's `data` config describes (the settings `prepare_emoji` recorded in meta.json)
    and that neither file is damaged: any problem is a one-line `VlcpError` naming the file or field."""

    def __init__(self, root: str | Path, cfg: DataCfg):
        root = Path(root)
        if not (root / "meta.json").exists():
            raise VlcpError(f"data.root: {root} has no prepared benchmark (meta.json); run `vlcp data prepare`")
        self.root = root
        self.meta = prepared_meta(root)
        check_record(self.meta, cfg, root)
        self._by_style = prepared_images(root)
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


def prepared_meta(root: Path) -> dict:
    """`read_meta` of the prepared benchmark at `root`, memoised on the file (path, inode, size,
    times), as `prepared_images`. Read-only."""
    return _meta(str(Path(root).resolve()), _stamp(Path(root) / "meta.json"))


def prepared_images(root: Path) -> dict[str, np.ndarray]:
    """`read_images` of the prepared benchmark at `root` (checked against its `prepared_meta`),
    memoised on both files: the runs of a study in one process (`vlcp run --list`, each `--jobs`
    worker) read and check them once (~0.3 s a run). Read-only: a benchmark copies the images it
    selects (`_images`)."""
    root = Path(root)
    return _images(str(root.resolve()), _stamp(root / "meta.json"), _stamp(root / "images.npz"))


def _stamp(path: Path) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


@lru_cache(maxsize=1)
def _meta(root: str, stamp) -> dict:   # (the stamp: part of the memo's key)
    return read_meta(Path(root) / "meta.json")


@lru_cache(maxsize=1)
def _images(root: str, meta_stamp, stamp) -> dict[str, np.ndarray]:
    return read_images(Path(root) / "images.npz", _meta(root, meta_stamp))


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
