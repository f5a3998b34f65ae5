"""FoMo-in-Flux per-dataset info dicts (`data_lib/00_info/` of ExplainableML/fomo_in_flux).

Layout under `root` (FoMo's `data/` folder plus its `00_info/`):

    00_info/<NAME>_<split>.json     {image path relative to <NAME>/: {"classname": str | null,
                                      "default_caption": [str] | null, "primer_caption": str,
                                      "synthetic_caption": [str] | null,
                                      "synthetic_merged_caption": [str] | str | null, "target": int}}
    00_info/<NAME>_classnames.json  [classname, ...]   (position = target)
    <NAME>/<image path>             the images

`<split>` is `train`, `test`, or a variant such as `train_224` (pre-resized copy, keys already
prefixed by `<NAME>_train_224/`), `train_mini`, `val`. Stream files (`DATASET+++class`) are read
by `vlcp.data.concepts.read_stream`; `stream_task_ids` maps records onto a stream's tasks.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from vlcp.data.concepts import Concept
from vlcp.data.formats import Record, read_json_file, require, str_list
from vlcp.errors import VlcpError


def folded(name: str) -> str:
    """A FoMo dataset name without case and underscores: FoMo names a dataset by folder (`CUB200`,
    `OXFORDPETS`) or by module (`cub200`, `oxford_pets`; data_lib's `ConversionDataHandle`), and the
    two spellings fold to the same string."""
    return name.lower().replace("_", "")


def fomo_handle(root: str | Path, name: str) -> str:
    """The dataset's `<NAME>` as its info dicts spell it: `name` itself if a `00_info/<name>_*.json`
    exists, else the one spelling that matches ignoring case and underscores (`folded`: `oxford_pets`
    finds `OXFORDPETS_train.json`); `name` when none or several do."""
    info = Path(root) / "00_info"
    if not info.is_dir() or any(info.glob(f"{name}_*.json")):
        return name
    found = {stem[:i] for stem in (p.stem for p in info.glob("*.json"))
             for i, c in enumerate(stem) if c == "_" and folded(stem[:i]) == folded(name)}
    return found.pop() if len(found) == 1 else name


def read_fomo_classnames(root: str | Path, name: str) -> list[str]:
    """`{root}/00_info/{name}_classnames.json`: the dataset's class names, position = target id."""
    path = Path(root) / "00_info" / f"{name}_classnames.json"
    data = read_json_file(path, f"FoMo-in-Flux class names of {name}")
    if not isinstance(data, list) or not all(isinstance(c, str) for c in data):
        raise VlcpError(f"{path}: expected a JSON list of class-name strings")
    return data


SPLIT_ALIASES = {"train": ("train_mini",), "test": ("val",)}   # iNaturalist2021: train_mini / val; MTSD, ImageNet: val


def info_path(root: str | Path, name: str, split: str) -> Path:
    """`{root}/00_info/{name}_{split}.json`, or the first existing alias of the split (FoMo's
    datasets without a `test` split are evaluated on `val`; iNaturalist trains on `train_mini`)."""
    info = Path(root) / "00_info"
    for s in (split, *SPLIT_ALIASES.get(split, ())):
        if (info / f"{name}_{s}.json").exists():
            return info / f"{name}_{s}.json"
    return info / f"{name}_{split}.json"


def read_fomo_info(root: str | Path, name: str, split: str = "train") -> list[Record]:
    """Records of `{root}/00_info/{name}_{split}.json` (or its alias: `info_path`); images `{root}/{name}/{key}`.

    Captions as FoMo trains on them: `default_caption` if not null, else
    `synthetic_merged_caption`, else the `primer_caption` (a string counts as one caption).
    `label` = `target`, `classname` = `classname`, `task` = None (tasks come from a stream:
    `stream_task_ids`). File order is kept.
    """
    root = require(Path(root), "FoMo-in-Flux data folder")
    path = info_path(root, name, split)
    aliases = "".join(f" (or {name}_{a}.json)" for a in SPLIT_ALIASES.get(split, ()))
    info = read_json_file(path, f"FoMo-in-Flux info dict of {name}{aliases}")
    image_dir = require(root / name, f"images of FoMo-in-Flux dataset {name}")
    if not isinstance(info, dict):
        raise VlcpError(f"{path}: expected an object {{image path: info}}, got {type(info).__name__}")
    out = []
    for key, it in info.items():
        where = f"{path}: entry {key!r}"
        if not isinstance(it, dict):
            raise VlcpError(f"{where}: expected an object, got {type(it).__name__}")
        target = it.get("target")
        if target is not None and (not isinstance(target, int) or isinstance(target, bool) or target < 0):
            raise VlcpError(f"{where}: field 'target' is {target!r}, not a class index (int >= 0)")
        classname = it.get("classname")
        if classname is not None and not isinstance(classname, str):
            raise VlcpError(f"{where}: field 'classname' is {classname!r}, not a string or null")
        captions = None
        for field in ("default_caption", "synthetic_merged_caption", "primer_caption"):
            if it.get(field) is None:
                continue
            captions = str_list(it[field])
            if captions is None:
                raise VlcpError(f"{where}: field {field!r} must be a string, a non-empty list of strings, or null")
            break
        if captions is None:
            raise VlcpError(f"{where}: no caption: 'default_caption', 'synthetic_merged_caption' and "
                            f"'primer_caption' are all missing or null")
        out.append(Record(image=image_dir / key, captions=captions, split=split, key=key, label=target,
                          classname=classname))
    return out


def read_fomo_template(root: str | Path, name: str, split: str = "test") -> str | None:
    """The dataset's zero-shot template (FoMo's per-dataset `PRIMER`), recovered from its info
    dict: the first entry's `primer_caption` with its `classname` replaced by `{}`; None if no
    entry's primer contains its class name."""
    info = read_json_file(info_path(root, name, split), f"FoMo-in-Flux info dict of {name}")
    for it in (info.values() if isinstance(info, dict) else ()):
        primer, cname = (it.get("primer_caption"), it.get("classname")) if isinstance(it, dict) else (None, None)
        if isinstance(primer, str) and isinstance(cname, str) and cname and cname in primer:
            return primer.replace(cname, "{}", 1)
    return None


def stream_task_ids(records: Sequence[Record], dataset: str, tasks: Sequence[Sequence[Concept]]) -> list[int]:
    """Task index of each record under a stream cut into tasks (-1: its class is in no task).

    `tasks` is `cut_tasks(read_stream(path), T)`; a record belongs to the task holding
    `Concept(dataset, record.classname)`. Dataset handles compare case-insensitively (FoMo
    streams name a dataset by folder, `CUB200`, or by module, `cub200`).
    """
    task_of = {(c.dataset.lower(), c.classname): t for t, concepts in enumerate(tasks) for c in concepts}
    return [task_of.get((dataset.lower(), r.classname), -1) for r in records]
