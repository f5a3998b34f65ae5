"""Pretraining pools as webdataset shards (FoMo-in-Flux's λP pool: CC3M, CC12M, LAION, DataComp).

Layout: `{root}/*.tar`; each shard holds samples `<key>.<ext>` with an image (`png`, `jpg`,
`jpeg` or `webp`, first found in that order, as FoMo's `png;jpg;jpeg;webp`) and a `txt` caption;
other members (`json`, ...) are ignored. This is what img2dataset writes.
"""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import Iterator, Sequence

from vlcp.data.formats import README, Record, ShardMember, require
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


def sample_record(shard: Path, key: str, fields: dict, read, split: str, skip_incomplete: bool,
                  on_skip=None) -> Record | None:
    """One sample's Record: `fields` maps each member extension to what `read` turns into bytes;
    the image is `fields[ext]` itself (bytes, or a ShardMember read on access). `on_skip(reason,
    key)`: told of each sample skipped (incomplete with `skip_incomplete`; with `on_skip`, also a
    caption that is not UTF-8, otherwise an error)."""
    ext = next((e for e in IMAGE_EXTS if e in fields), None)
    if ext is None or "txt" not in fields:
        if skip_incomplete:
            if on_skip is not None:
                on_skip("no image" if ext is None else "no caption", key)
            return None
        missing = "image (" + "/".join(IMAGE_EXTS) + ")" if ext is None else "'txt' caption"
        raise VlcpError(f"{shard}: sample {key!r} has no {missing}")
    try:
        caption = read(fields["txt"]).decode("utf-8").strip()
    except UnicodeDecodeError as e:
        if on_skip is not None:
            on_skip("unreadable caption", key)
            return None
        raise VlcpError(f"{shard}: sample {key!r}: field 'txt' is not UTF-8 ({e})") from None
    return Record(image=fields[ext], captions=(caption,), split=split, key=key)


def iter_wds(shards: Sequence[str | Path], skip_incomplete: bool = False, split: str = "train",
             lazy: bool = False, on_skip=None) -> Iterator[Record]:
    """Stream records from webdataset shards in order: image bytes, (caption,), `key` = sample key.

    Samples are grouped as webdataset does (`tariterators.group_by_keys`). A sample with no
    image or no `txt` is an error naming the shard and key, or is skipped with
    `skip_incomplete=True` (open_clip's `filter_no_caption_or_no_image`). `lazy`: the image is a
    `ShardMember` (its byte range, read on access) instead of its bytes, from one pass over the
    tar headers (the captions are read; the images are not). `on_skip(reason, key)`: told of each
    sample skipped (`sample_record`; lazy reading only).
    """
    for shard in shards:
        shard = require(Path(shard), "webdataset shard")
        if lazy:
            yield from _lazy_samples(shard, split, skip_incomplete, on_skip)
        else:
            yield from _samples(shard, split, skip_incomplete)


def _samples(shard: Path, split: str, skip_incomplete: bool) -> Iterator[Record]:
    from webdataset.tariterators import group_by_keys, tar_file_expander

    with open(shard, "rb") as f:  # opened here so the shard is closed even if iteration stops early
        samples = group_by_keys(tar_file_expander([{"url": str(shard), "stream": f}]))
        while True:
            try:
                sample = next(samples, None)
            except Exception as e:  # tarfile.ReadError, webdataset's duplicate-member ValueError, ...
                raise VlcpError(f"{shard}: not a readable webdataset shard ({type(e).__name__}: {e})") from None
            if sample is None:
                break
            rec = sample_record(shard, sample["__key__"], sample, lambda b: b, split, skip_incomplete)
            if rec is not None:
                yield rec


def _lazy_samples(shard: Path, split: str, skip_incomplete: bool, on_skip=None) -> Iterator[Record]:
    """webdataset's grouping (consecutive members sharing the key before the basename's first dot)
    over the tar's headers; each member is kept as its byte range."""
    import tarfile

    from webdataset.tariterators import base_plus_ext

    try:
        with tarfile.open(shard) as tar:
            members = ((*base_plus_ext(m.name), m) for m in tar if m.isfile())
            for key, group in itertools.groupby((t for t in members if t[0] is not None), key=lambda t: t[0]):
                fields = {}
                for _, ext, m in group:
                    if ext.lower() in fields:
                        raise VlcpError(f"{shard}: sample {key!r} has two '{ext}' members")
                    fields[ext.lower()] = ShardMember(shard, m.offset_data, m.size)
                rec = sample_record(shard, key, fields, lambda f: f.read(), split, skip_incomplete, on_skip)
                if rec is not None:
                    yield rec
    except tarfile.TarError as e:
        raise VlcpError(f"{shard}: not a readable webdataset shard ({type(e).__name__}: {e})") from None


def read_wds(root: str | Path, limit: int | None = None, skip_incomplete: bool = False,
             lazy: bool = False) -> list[Record]:
    """The first `limit` records (default: all) of the shards in `root` (images as bytes, or as
    ShardMembers read on access with `lazy`)."""
    return list(itertools.islice(iter_wds(list_shards(root), skip_incomplete, lazy=lazy), limit))
