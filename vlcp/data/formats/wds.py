"""Pretraining pools as webdataset shards (FoMo-in-Flux's λP pool: CC3M, CC12M, LAION, DataComp).

Layout: `{root}/*.tar`; each shard holds samples `<key>.<ext>` with an image (`png`, `jpg`,
`jpeg` or `webp`, first found in that order, as FoMo's `png;jpg;jpeg;webp`) and a `txt` caption;
other members (`json`, ...) are ignored. This is what img2dataset writes.
"""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import Iterator, Sequence

from vlcp.data.formats import README, Record, require
from vlcp.errors import VlcpError

IMAGE_EXTS = ("png", "jpg", "jpeg", "webp")


def list_shards(root: str | Path) -> list[Path]:
    """The `*.tar` shards directly in `root`, sorted by name; none is an error naming `root`."""
    root = require(Path(root), "webdataset pool shards (*.tar)")
    shards = sorted(root.glob("*.tar"))
    if not shards:
        raise VlcpError(f"{root}: no webdataset shards (*.tar); put the pool's shards there "
                        f"(see {README})")
    return shards


def iter_wds(shards: Sequence[str | Path], skip_incomplete: bool = False, split: str = "train"
             ) -> Iterator[Record]:
    """Stream records from webdataset shards in order: image bytes, (caption,), `key` = sample key.

    Samples are grouped as webdataset does (`tariterators.group_by_keys`). A sample with no
    image or no `txt` is an error naming the shard and key, or is skipped with
    `skip_incomplete=True` (open_clip's `filter_no_caption_or_no_image`).
    """
    from webdataset.tariterators import group_by_keys, tar_file_expander

    for shard in shards:
        shard = require(Path(shard), "webdataset shard")
        with open(shard, "rb") as f:  # opened here so the shard is closed even if iteration stops early
            samples = group_by_keys(tar_file_expander([{"url": str(shard), "stream": f}]))
            while True:
                try:
                    sample = next(samples, None)
                except Exception as e:  # tarfile.ReadError, webdataset's duplicate-member ValueError, ...
                    raise VlcpError(f"{shard}: not a readable webdataset shard ({type(e).__name__}: {e})") from None
                if sample is None:
                    break
                key = sample["__key__"]
                ext = next((e for e in IMAGE_EXTS if e in sample), None)
                if ext is None or "txt" not in sample:
                    if skip_incomplete:
                        continue
                    missing = "image (" + "/".join(IMAGE_EXTS) + ")" if ext is None else "'txt' caption"
                    raise VlcpError(f"{shard}: sample {key!r} has no {missing}")
                try:
                    caption = sample["txt"].decode("utf-8").strip()
                except UnicodeDecodeError as e:
                    raise VlcpError(f"{shard}: sample {key!r}: field 'txt' is not UTF-8 ({e})") from None
                yield Record(image=sample[ext], captions=(caption,), split=split, key=key)


def read_wds(root: str | Path, limit: int | None = None, skip_incomplete: bool = False) -> list[Record]:
    """The first `limit` records (default: all) of the shards in `root`, for small in-memory pools."""
    return list(itertools.islice(iter_wds(list_shards(root), skip_incomplete), limit))
