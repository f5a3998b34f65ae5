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
    return ImageFiles.of_records(records, image_size, workers=1)[:].numpy()


class ImageFiles:
    """A dataset's images decoded on access: stands in for the uint8 `[N, S, S, 3]` tensor of a
    `PairSet` when the images do not fit in memory (P9D: a million product photos). Indexing with
    ids (a long tensor, a list or a slice) decodes those images, in `workers` threads (PIL
    releases the GIL while decoding), into a uint8 tensor; `subset` keeps a lazy selection."""

    def __init__(self, sources: Sequence[Path | bytes], image_size: int, workers: int = 4,
                 names: Sequence[str] | None = None, squash: bool = False):
        if not isinstance(image_size, int) or image_size < 1:
            raise VlcpError(f"image_size: {image_size!r} must be a positive integer")
        self.sources, self.image_size, self.workers = list(sources), image_size, max(1, workers)
        self.squash = squash   # un-augmented access resizes the whole image (CTP's test transform), not a centre crop
        self.names = list(names) if names is not None else [""] * len(self.sources)

    @classmethod
    def of_records(cls, records: Sequence[Record], image_size: int, workers: int = 4,
                   squash: bool = False) -> "ImageFiles":
        """The records' images (an image inside a shard is named by its record's key in errors)."""
        return cls([r.image for r in records], image_size, workers,
                   [r.key if isinstance(r.image, (bytes, ShardMember)) else "" for r in records], squash)

    def __len__(self) -> int:
        return len(self.sources)

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

    def __getitem__(self, index):
        return self._decode(self._ids(index))

    def augmented(self, index, seeds, transform) -> "torch.Tensor":
        """The images at `index` under a training `transform`, image k drawn with `seeds[k]`."""
        return self._decode(self._ids(index), [int(s) for s in seeds], transform)

    def _decode(self, ids: list[int], seeds=None, transform=None):
        import torch

        def load(k):
            i = ids[k]
            return load_image(self.sources[i], self.image_size, self.names[i], transform, seeds[k] if seeds else 0,
                              self.squash)
        if self.workers > 1 and len(ids) > 1:
            from concurrent.futures import ThreadPoolExecutor
            with ThreadPoolExecutor(min(self.workers, len(ids))) as pool:
                arrays = list(pool.map(load, range(len(ids))))
        else:
            arrays = [load(k) for k in range(len(ids))]
        out = np.stack(arrays) if arrays else np.zeros((0, self.image_size, self.image_size, 3), np.uint8)
        return torch.from_numpy(out)

    def subset(self, index) -> "ImageFiles":
        ids = self._ids(index)
        return ImageFiles([self.sources[i] for i in ids], self.image_size, self.workers, [self.names[i] for i in ids],
                          self.squash)


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
