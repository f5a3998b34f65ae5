"""Readers for the real datasets of the four reproduced papers, all returning `Record`s.

| dataset                         | module        | reader                                              |
|---------------------------------|---------------|-----------------------------------------------------|
| P9D (CTP)                       | `p9d`         | `read_p9d_train`, `read_p9d_eval`                   |
| COCO / Flickr30K Karpathy split | `karpathy`    | `read_coco_karpathy`, `read_flickr30k_karpathy`     |
| CLFM's COCO caption rows        | `karpathy`    | `read_caption_rows`                                 |
| XM3600, MSCOCO36 (CLL-CLIP)     | `xm3600`      | `read_xm3600`, `read_mscoco36`, `read_triplets`     |
| webdataset pools (FoMo λP)      | `wds`         | `list_shards`, `iter_wds`, `read_wds`               |
| FoMo-in-Flux info dicts         | `fomo_info`   | `read_fomo_info`, `read_fomo_classnames`, `read_fomo_template` |
| a user's own data (`vlcp update`) | `layouts`   | `detect_layout`, `read_source`, `read_checked`, `holdout_mask`, `read_image_folder` |

FoMo's `DATASET+++class` stream files: `vlcp.data.concepts.read_stream` / `write_stream`.
Where each dataset goes and its exact layout: `data/README.md` ("Real datasets").
`load_images` turns records into the uint8 `[N, S, S, 3]` arrays of `vlcp.data.benchmark.PairSet`,
`ImageFiles` stands in for them when they do not fit in memory (decoded on access), and
`to_pairset` builds a PairSet. `vlcp.data.real` builds the runners' benchmarks from these readers.
"""
from __future__ import annotations

import functools
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from PIL import Image

from vlcp.errors import VlcpError

README = "data/README.md, 'Real datasets (paper profile)'"


@dataclass(frozen=True, kw_only=True)
class Record:
    """One image with its captions, as every reader in this package returns it.

    `image` is a file path, or the encoded bytes for images stored inside webdataset shards.
    `key` identifies the record within its dataset (item id, image path relative to the
    dataset root, shard key, or TSV line number). `label` is an integer class id where the
    format has one (FoMo `target`); `classname` the class name (P9D `cate_name`, FoMo
    `classname`). `task` is the paper's task unit: the P9D industry, the CLL-CLIP language.
    `source_caption` is the English caption a translated caption was made from (CLFM triplets).
    """

    image: Path | bytes | ShardMember
    captions: tuple[str, ...]
    split: str
    key: str
    label: int | None = None
    classname: str | None = None
    task: str | None = None
    language: str | None = None
    source_caption: str | None = None


@dataclass(frozen=True)
class ShardMember:
    """An image inside a webdataset shard, read on access: the member's byte range in the tar
    (pools too large to hold as bytes, e.g. CC2M's 2M pairs)."""

    shard: Path
    offset: int
    size: int

    def read(self) -> bytes:
        with open(self.shard, "rb") as f:
            f.seek(self.offset)
            return f.read(self.size)


# ----------------------------------------------------------------------------- shared helpers

def require(path: Path, what: str) -> Path:
    """`path` if it exists, else a VlcpError naming it and where the data belongs."""
    path = Path(path)
    if not path.exists():
        raise VlcpError(f"{path}: not found; put the {what} there (see {README})")
    return path


def read_json_file(path: Path, what: str) -> Any:
    """Parse a JSON file; a missing file or bad JSON is a VlcpError naming the file."""
    require(path, what)
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise VlcpError(f"{path}: not a readable JSON {what} ({e})") from None


def str_list(value: Any) -> tuple[str, ...] | None:
    """A caption field as a tuple of strings (a single string counts as one), or None if malformed."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


# ----------------------------------------------------------------------------- images

def load_image(image: Path | bytes | ShardMember, image_size: int, name: str = "", transform=None, seed: int = 0,
               squash: bool = False) -> np.ndarray:
    """One image as uint8 [S, S, 3]: RGB, centre crop to a square (`squash`: the whole image, as
    CTP's test transform), bicubic resize to S; with a training `transform`
    (`vlcp.data.augment.TrainTransform`), its random crop of the original instead."""
    try:
        if isinstance(image, ShardMember):
            image = image.read()
        src = io.BytesIO(image) if isinstance(image, bytes) else open(image, "rb")
    except FileNotFoundError:
        raise VlcpError(f"{image}: image file not found; put the dataset's images there (see {README})") from None
    except OSError as e:
        raise VlcpError(f"{image}: not a readable image ({e})") from None
    where = name or str(image)
    try:
        with src, Image.open(src) as im:
            draft = image_size if transform is None else math.ceil(image_size * transform.draft_scale)
            im.draft("RGB", (draft, draft))  # JPEG: decode at a reduced scale when possible
            im = im.convert("RGB")
            if transform is not None:
                return transform(im, image_size, seed)
            w, h = im.size
            m = min(w, h)
            left, top = (w - m) // 2, (h - m) // 2
            box = (0, 0, w, h) if squash else (left, top, left + m, top + m)
            im = im.resize((image_size, image_size), Image.Resampling.BICUBIC, box=box)
            return np.asarray(im, dtype=np.uint8)
    except (OSError, ValueError, Image.DecompressionBombError) as e:
        raise VlcpError(f"{where}: not a readable image ({e})") from None


def load_images(records: Sequence[Record], image_size: int) -> np.ndarray:
    """Decode the records' images into uint8 [N, S, S, 3] (S = image_size), in record order."""
    return ImageFiles.of_records(records, image_size, workers=0)[:].numpy()


class BadImages:
    """The unreadable images a run skipped (name -> reason), shared by the run's `ImageFiles`: the
    first one is printed, and one more than `limit` (`data.max_bad_images`) stops the run with a
    VlcpError naming the limit and a few of them. `summary` is what results.json records
    (`data.bad_images`); `restore` takes it back on resume, so the same images count once."""

    EXAMPLES = 5

    def __init__(self, limit: int = 0):
        self.limit, self.skipped = limit, {}

    def __len__(self) -> int:
        return len(self.skipped)

    def skip(self, name: str, reason: str) -> None:
        if name in self.skipped:
            return
        self.skipped[name] = reason
        if len(self.skipped) > self.limit:
            raise VlcpError(f"data.max_bad_images: {len(self.skipped)} unreadable images, more than the limit of "
                            f"{self.limit} (e.g. {'; '.join(self.examples())}); fix or remove them, or raise the limit")
        if len(self.skipped) == 1:
            print(f"vlcp: skipping unreadable image {name} ({reason}): its batch takes the next readable item; "
                  f"skipped images are counted in results.json (data.bad_images), at most data.max_bad_images = "
                  f"{self.limit}", flush=True)

    def examples(self) -> list[str]:
        return [f"{name}: {reason}" for name, reason in list(self.skipped.items())[: self.EXAMPLES]]

    def summary(self) -> dict:
        return {"count": len(self.skipped), "limit": self.limit, "examples": self.examples(),
                "images": list(self.skipped)}

    def restore(self, summary: dict | None) -> None:
        """Count again the images a summary (of an earlier attempt of the run) names."""
        for name in (summary or {}).get("images", []):
            self.skipped.setdefault(name, "skipped by an earlier attempt of the run")


@dataclass(frozen=True)
class _Decode:
    """The picklable part of an `ImageFiles`, the map-style dataset its worker processes read: an
    index (image id, seed, transform) -> (uint8 [S, S, 3] or None, the reason it is unreadable)."""

    sources: Sequence[Path | bytes | ShardMember]
    names: Sequence[str]
    image_size: int
    squash: bool

    def __len__(self) -> int:
        return len(self.sources)

    def name(self, i: int) -> str:
        return self.names[i] or str(self.sources[i])

    def __getitem__(self, index: tuple[int, int, Any]) -> tuple[np.ndarray | None, str]:
        i, seed, transform = index
        try:
            return load_image(self.sources[i], self.image_size, self.names[i], transform, seed, self.squash), ""
        except VlcpError as e:
            return None, str(e).removeprefix(f"{self.name(i)}: ")


def _stack(items: list[tuple[np.ndarray | None, str]], image_size: int):
    """A chunk's decoded images as one uint8 tensor (zeros where unreadable) and the reasons ("" = read)."""
    import torch

    out = np.zeros((len(items), image_size, image_size, 3), dtype=np.uint8)
    for k, (array, _) in enumerate(items):
        if array is not None:
            out[k] = array
    return torch.from_numpy(out), [reason for _, reason in items]


class _Workers:
    """The worker processes of an `ImageFiles` and its subsets: a persistent DataLoader over their
    files whose batch sampler yields the chunks of the request being decoded (made on first use)."""

    def __init__(self, workers: int):
        self.workers, self.chunks, self.loader = workers, [], None

    def __iter__(self):
        return iter(self.chunks)

    def __len__(self) -> int:
        return len(self.chunks)

    def __getstate__(self):
        return {"workers": self.workers, "chunks": [], "loader": None}   # a copy starts its own processes

    def decode(self, files: _Decode, index: list[tuple]):
        """`index` decoded in the workers, one contiguous chunk each, the results in order."""
        import torch
        from torch.utils.data import DataLoader

        if self.loader is None:
            self.loader = DataLoader(files, batch_sampler=self, num_workers=self.workers, persistent_workers=True,
                                     collate_fn=functools.partial(_stack, image_size=files.image_size))
        per = math.ceil(len(index) / self.workers)
        self.chunks = [index[k:k + per] for k in range(0, len(index), per)]
        parts = list(self.loader)
        return torch.cat([p[0] for p in parts]), [r for p in parts for r in p[1]]


class ImageFiles:
    """A dataset's images decoded on access: stands in for the uint8 `[N, S, S, 3]` tensor of a
    `PairSet` when the images do not fit in memory (P9D: a million product photos). Indexing with
    ids (a long tensor, a list or a slice) decodes those images into a uint8 tensor: in `workers`
    processes of a persistent `torch.utils.data.DataLoader` (each takes a contiguous share of the
    ids, in order), or in this process with `workers=0`. `subset` keeps a lazy selection that shares
    the images and their workers. An unreadable image is replaced by the next readable one of the
    selection and counted in `bad` (`BadImages`: past its limit the run stops)."""

    def __init__(self, sources: Sequence[Path | bytes], image_size: int, workers: int = 4,
                 names: Sequence[str] | None = None, squash: bool = False, bad: BadImages | None = None):
        if not isinstance(image_size, int) or image_size < 1:
            raise VlcpError(f"image_size: {image_size!r} must be a positive integer")
        sources = list(sources)
        names = list(names) if names is not None else [""] * len(sources)
        self._files = _Decode(sources, names, image_size, squash)  # squash: un-augmented access resizes the whole
        #   image (CTP's test transform), not a centre crop
        self._view: list[int] | None = None   # ids into the files (a subset), None = all
        self.workers, self.bad = max(0, workers), bad if bad is not None else BadImages()
        self._pool = _Workers(self.workers) if self.workers else None   # shared with the subsets

    @classmethod
    def of_records(cls, records: Sequence[Record], image_size: int, workers: int = 4,
                   squash: bool = False, bad: BadImages | None = None) -> "ImageFiles":
        """The records' images (an image inside a shard is named by its record's key in errors)."""
        return cls([r.image for r in records], image_size, workers,
                   [r.key if isinstance(r.image, (bytes, ShardMember)) else "" for r in records], squash, bad)

    @property
    def image_size(self) -> int:
        return self._files.image_size

    @property
    def squash(self) -> bool:
        return self._files.squash

    def __len__(self) -> int:
        return len(self._files) if self._view is None else len(self._view)

    @property
    def sources(self) -> list:
        """The image files (paths, bytes or shard members) of this selection, in order."""
        return [self._files.sources[self._file(i)] for i in range(len(self))]

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (len(self), self.image_size, self.image_size, 3)

    def _ids(self, index) -> list[int]:
        import torch

        if isinstance(index, slice):
            return list(range(len(self)))[index]
        if isinstance(index, torch.Tensor) and index.dtype == torch.bool:
            index = index.nonzero().squeeze(1)
        return [int(i) for i in (index.tolist() if hasattr(index, "tolist") else index)]

    def _file(self, i: int) -> int:
        return i if self._view is None else self._view[i]

    def __getitem__(self, index):
        return self.decode(self._ids(index))[0]

    def augmented(self, index, seeds, transform) -> "torch.Tensor":
        """The images at `index` under a training `transform`, image k drawn with `seeds[k]`."""
        return self.decode(self._ids(index), [int(s) for s in seeds], transform)[0]

    def decode(self, ids: list[int], seeds: list[int] | None = None, transform=None) -> tuple["torch.Tensor", list[int]]:
        """uint8 [len(ids), S, S, 3]: the images at `ids` (image k under `transform` with `seeds[k]`),
        and the ids whose images they are: an unreadable image's is the next readable one's (counted in `bad`)."""
        import torch

        seeds = seeds or [0] * len(ids)
        index = [(self._file(i), s, transform) for i, s in zip(ids, seeds)]
        if self._pool is not None and len(ids) > 1:
            out, reasons = self._pool.decode(self._files, index)
        else:
            out, reasons = _stack([self._files[x] for x in index], self.image_size)
        used = list(ids)
        for k, reason in enumerate(reasons):
            if reason:
                out[k], used[k] = self._replacement(ids[k], reason, seeds[k], transform)
        return out, used

    def _replacement(self, i: int, reason: str, seed: int, transform) -> tuple["torch.Tensor", int]:
        """The next readable image after id `i` (wrapping round), counting each unreadable one on the way."""
        import torch

        for _ in range(len(self)):
            self.bad.skip(self._files.name(self._file(i)), reason)
            i = (i + 1) % len(self)
            array, reason = self._files[(self._file(i), seed, transform)]
            if array is not None:
                return torch.from_numpy(array), i
        raise VlcpError(f"{self._files.name(self._file(i))}: no readable image in the whole set")

    def subset(self, index) -> "ImageFiles":
        ids = [self._file(i) for i in self._ids(index)]
        sub = object.__new__(ImageFiles)
        sub.__dict__.update(self.__dict__)
        sub._view = ids
        return sub


def to_pairset(records: Sequence[Record], image_size: int, tasks: Sequence[str] | None = None,
               classes: Sequence[str] | None = None):
    """A `vlcp.data.pairs.PairSet` of the records: one image per item, task-major order.

    `tasks` fixes the task order (default: first appearance of `Record.task`; records whose
    task is not listed are left out). Labels are `Record.label` when every record has one,
    else the index of `Record.classname` in `classes` (default: first appearance), else -1.
    """
    import torch

    from vlcp.data.pairs import PairSet

    task_names = list(dict.fromkeys(r.task for r in records)) if tasks is None else list(tasks)
    task_of = {t: i for i, t in enumerate(task_names)}
    sel = sorted((i for i, r in enumerate(records) if r.task in task_of), key=lambda i: task_of[records[i].task])
    recs = [records[i] for i in sel]
    if recs and all(r.label is not None for r in recs):
        labels = [r.label for r in recs]
    else:
        names = list(dict.fromkeys(r.classname for r in recs if r.classname is not None)) \
            if classes is None else list(classes)
        class_of = {c: i for i, c in enumerate(names)}
        labels = [class_of.get(r.classname, -1) for r in recs]
    n = len(recs)
    return PairSet(
        images=torch.from_numpy(load_images(recs, image_size)),
        image_text=torch.arange(n),
        texts=[r.captions[0] if r.captions else "" for r in recs],
        captions=[list(r.captions) for r in recs],
        labels=torch.tensor(labels, dtype=torch.long),
        tasks=torch.tensor([task_of[r.task] for r in recs], dtype=torch.long),
        items=torch.tensor(sel, dtype=torch.long),
    )


from vlcp.data.formats.fomo_info import (fomo_handle, read_fomo_classnames, read_fomo_info, read_fomo_template,  # noqa: E402
                                         stream_task_ids)
from vlcp.data.formats.karpathy import (read_caption_rows, read_coco_karpathy,  # noqa: E402
                                        read_flickr30k_karpathy, read_karpathy)
from vlcp.data.formats.p9d import P9D_INDUSTRIES, read_p9d_eval, read_p9d_train  # noqa: E402
from vlcp.data.formats.wds import iter_wds, list_shards, read_wds  # noqa: E402
from vlcp.data.formats.xm3600 import (CLL_CLIP_ORDER, XM3600_LANGUAGES, read_mscoco36,  # noqa: E402
                                      read_triplets, read_xm3600)
from vlcp.data.formats.layouts import (LAYOUTS, ClassFolder, CsvOptions, SourceStats, detect_layout,  # noqa: E402
                                       holdout_mask, is_image_folder, read_checked, read_image_folder, read_source)
