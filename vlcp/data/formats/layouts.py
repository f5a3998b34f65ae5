"""A user's own image-caption data in the layouts people already have, as `Record`s (`vlcp update`).

| layout     | what `path` is                                                     | record key                  |
|------------|--------------------------------------------------------------------|-----------------------------|
| `folder`   | a tree of images, each with a same-name `.txt` (a caption a line)  | image path relative to root |
| `csv`      | a CSV/TSV: image-path and caption columns (open_clip_train's keys) | the image path as written   |
| `wds`      | webdataset: `s/{000..009}.tar`, `s/*.tar`, a folder of `*.tar`, one `.tar` | `<shard stem>/<sample key>` |
| `coco`     | COCO captions JSON: `images` [{id, file_name}], `annotations` [{image_id, caption}] | `file_name`  |
| `karpathy` | a Karpathy split JSON (`karpathy.read_karpathy`, all splits)       | `filepath/filename`         |

`detect_layout` picks the layout; `read_source` streams the records (paths and captions only, no
image decoded); `read_checked` also drops the records whose image does not decode. Bad items (no
caption, an empty caption, a corrupt file) are skipped and counted in a `SourceStats`; a missing
source, a CSV without the named column or a JSON of another kind is a `VlcpError` naming the file.
`holdout_mask` cuts a stable held-out slice by key hash, `fingerprint` sums up what a source holds
so a later read can tell it changed, `byte_twins` finds held-out images whose bytes are also a
training image's, and `read_image_folder` reads a torchvision-style ImageFolder as a keep-set.
"""
from __future__ import annotations

import csv as csvlib
import glob
import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator, Sequence

from PIL import Image
from tqdm import tqdm

from vlcp.data.formats import Record, ShardMember, load_image, read_json_file, require
from vlcp.data.formats.karpathy import KARPATHY_SPLITS, read_karpathy
from vlcp.data.formats.wds import iter_wds, list_shards
from vlcp.errors import ConfigError, VlcpError

LAYOUTS = ("folder", "csv", "wds", "coco", "karpathy")
IMAGE_ROOT_LAYOUTS = ("csv", "coco", "karpathy")   # the layouts whose image paths are relative (to `image_root`)
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp")
MAX_EXAMPLES = 5


@dataclass(frozen=True)
class CsvOptions:
    """Columns and separator of a CSV/TSV source, named as open_clip_train's `--csv-img-key`,
    `--csv-caption-key`, `--csv-separator` (defaults `filepath`, `title`, tab). `separator=None`:
    a tab, except a comma for a file ending in `.csv` (a `.csv` written with tabs needs `separator="\\t"`)."""

    img_key: str = "filepath"
    caption_key: str = "title"
    separator: str | None = None

    def delimiter(self, path: str | Path) -> str:
        """The separator used for `path`."""
        if self.separator is not None:
            return self.separator
        return "," if str(path).lower().endswith(".csv") else "\t"


@dataclass
class SourceStats:
    """What reading a source kept and left out: `read` records kept (yielded by `read_source`,
    decodable after `read_checked`), `skipped` reason -> count ("no caption", "empty caption",
    "unreadable image", ...), `examples` the first few skipped files or keys."""

    read: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def skip(self, reason: str, example: str) -> None:
        """Count one skipped item under `reason`."""
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(example)

    @property
    def n_skipped(self) -> int:
        return sum(self.skipped.values())

    def summary(self) -> str:
        """One line, e.g. `read 120, skipped 3 (2 no caption, 1 unreadable image; e.g. a.jpg, b.jpg)`."""
        if not self.skipped:
            return f"read {self.read}, skipped 0"
        reasons = ", ".join(f"{n} {why}" for why, n in self.skipped.items())
        return f"read {self.read}, skipped {self.n_skipped} ({reasons}; e.g. {', '.join(self.examples)})"


# ----------------------------------------------------------------------------- detection

def _is_pattern(path: str) -> bool:
    """A shard pattern: braces or a `*`, and not an existing path (a folder may be named `photos{1}`)."""
    return ("{" in path or "*" in path) and not os.path.exists(path)


def _is_image(name: str) -> bool:
    return name.lower().endswith(IMAGE_SUFFIXES)


def _visible_dirs(dirs: list[str]) -> list[str]:
    """os.walk's subdirectories to descend, sorted, hidden ones (`.ipynb_checkpoints`, ...) left out."""
    return sorted(d for d in dirs if not d.startswith("."))


def _walk(root: Path) -> Iterator[tuple[Path, list[str], list[str]]]:
    """os.walk in a fixed order (sorted names, hidden folders skipped): each folder's files before its subfolders."""
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = _visible_dirs(dirs)
        yield Path(dirpath), dirs, sorted(files)


def _has_images(root: Path) -> bool:
    return any(_is_image(f) for _, _, files in _walk(root) for f in files)


def _json_layout(data: Any) -> str | None:
    """'coco' for a COCO captions JSON, 'karpathy' for a Karpathy split JSON, else None."""
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        return None
    anns = data.get("annotations")
    if isinstance(anns, list):
        return "coco" if all(isinstance(a, dict) and "caption" in a for a in anns[:1]) else None
    first = data["images"][:1]
    return "karpathy" if all(isinstance(im, dict) and "sentences" in im for im in first) else None


def _json_source(path: Path) -> tuple[str, Any]:
    data = read_json_file(path, "caption JSON")
    layout = _json_layout(data)
    if layout is None:
        raise VlcpError(f"{path}: neither a COCO captions JSON ({{'images': [{{id, file_name}}], 'annotations': "
                        f"[{{image_id, caption}}]}}) nor a Karpathy split JSON ({{'images': [{{filename, split, "
                        f"sentences}}]}})")
    return layout, data


def reads_image_root(path: str | Path, layout: str = "auto") -> bool:
    """Whether a source's images are found through `image_root`: a CSV/TSV's or captions JSON's
    relative paths are; a folder's images and a shard's members are inside the source itself.
    With `layout` "auto", told from the path alone (a .csv, .tsv or .json file), no file read."""
    if layout != "auto":
        return layout in IMAGE_ROOT_LAYOUTS
    path = Path(path)
    return not _is_pattern(str(path)) and path.is_file() and path.suffix.lower() in (".csv", ".tsv", ".json")


def detect_layout(path: str | Path) -> str:
    """The layout of `path` (one of LAYOUTS): a brace/glob pattern, a `.tar` or a directory holding
    `*.tar` -> wds; `.csv`/`.tsv` -> csv; `.json` -> coco or karpathy by its keys; a directory with
    images -> folder. Anything else (or a missing path) is a VlcpError naming it. An ImageFolder
    (class subfolders, no captions) is a keep-set, not a caption layout: see `is_image_folder`."""
    return _detect(path)[0]


def _detect(path: str | Path) -> tuple[str, Any]:
    """`detect_layout`, with the parsed JSON of a .json source (None for the others), parsed once."""
    if _is_pattern(str(path)):
        return "wds", None
    path = require(Path(path), "image-caption data")
    suffix = path.suffix.lower()
    if path.is_file():
        if suffix == ".tar":
            return "wds", None
        if suffix in (".csv", ".tsv"):
            return "csv", None
        if suffix == ".json":
            return _json_source(path)
        raise VlcpError(f"{path}: not an image-caption source (a folder of images with .txt captions, a .csv/.tsv, "
                        f"webdataset .tar shards, or a COCO-captions/Karpathy .json)")
    if any(path.glob("*.tar")):
        return "wds", None
    if _has_images(path):
        return "folder", None
    raise VlcpError(f"{path}: a folder with neither images ({', '.join(IMAGE_SUFFIXES)}) nor webdataset .tar shards")


# ----------------------------------------------------------------------------- readers

def _captions(lines: Sequence[str]) -> tuple[str, ...]:
    return tuple(s for s in (line.strip() for line in lines) if s)


def _read_folder(root: Path, stats: SourceStats) -> Iterator[Record]:
    for folder, _, files in _walk(root):
        names = set(files)
        for name in files:
            if not _is_image(name):
                continue
            image = folder / name
            key = image.relative_to(root).as_posix()
            txt = Path(name).stem + ".txt"
            if txt not in names:
                stats.skip("no caption", key)
                continue
            try:
                caps = _captions((folder / txt).read_text(encoding="utf-8").splitlines())
            except (OSError, UnicodeDecodeError):
                stats.skip("unreadable caption", key)
                continue
            if not caps:
                stats.skip("empty caption", key)
                continue
            yield Record(image=image, captions=caps, split="train", key=key)


def _csv_columns(path: Path, opts: CsvOptions) -> None:
    """Check the header of a CSV source: both named columns must be there (a VlcpError naming the
    missing column, the file and the columns it has)."""
    sep = opts.delimiter(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            columns = next(csvlib.reader(f, delimiter=sep), [])
    except (OSError, UnicodeDecodeError, csvlib.Error) as e:
        raise VlcpError(f"{path}: not a readable CSV/TSV ({e})") from None
    for key, option in ((opts.img_key, "img_key"), (opts.caption_key, "caption_key")):
        if key not in columns:
            raise VlcpError(f"{path}: no column {key!r} (csv {option}); its columns, split by {sep!r}, are: "
                            f"{', '.join(map(repr, columns)) or 'none (empty file)'}")


def _read_csv(path: Path, opts: CsvOptions, image_root: Path, stats: SourceStats) -> Iterator[Record]:
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = csvlib.DictReader(f, delimiter=opts.delimiter(path))
        try:
            for row in rows:
                rel, caption = (row.get(opts.img_key) or "").strip(), (row.get(opts.caption_key) or "").strip()
                if not rel:
                    stats.skip("empty image path", f"{path.name} line {rows.line_num}")
                elif not caption:
                    stats.skip("empty caption", rel)
                else:
                    yield Record(image=image_root / rel, captions=(caption,), split="train", key=rel)
        except (UnicodeDecodeError, csvlib.Error) as e:
            raise VlcpError(f"{path}: line {rows.line_num}: not readable as CSV/TSV ({e})") from None


def shard_paths(source: str | Path) -> list[Path]:
    """The webdataset shards of `source`: a brace pattern (`shards/{000..009}.tar`, expanded by
    braceexpand; a `*` in a part is globbed, sorted), a directory (its `*.tar`), or one `.tar`."""
    from braceexpand import braceexpand

    text = str(source)
    if not _is_pattern(text):
        path = require(Path(text), "webdataset shards")
        return list_shards(path) if path.is_dir() else [path]
    shards = []
    for part in braceexpand(text):
        if "*" in part:
            found = sorted(glob.glob(part))
            if not found:
                raise VlcpError(f"{part}: no files match this pattern (from {text})")
            shards.extend(Path(p) for p in found)
        else:
            shards.append(require(Path(part), f"webdataset shard of {text}"))
    return shards


def _read_wds(shards: Sequence[Path], stats: SourceStats) -> Iterator[Record]:
    """The shards' samples with lazy images (`ShardMember`s, `wds.iter_wds(lazy=True)`), each
    incomplete one counted in `stats`; keys `<shard stem>/<sample key>`."""
    for shard in shards:
        shard = require(shard, "webdataset shard")
        skip = lambda reason, key, s=shard: stats.skip(reason, f"{s.stem}/{key}")  # noqa: E731
        for rec in iter_wds([shard], skip_incomplete=True, lazy=True, on_skip=skip):
            where = f"{shard.stem}/{rec.key}"
            if not _captions(rec.captions):
                stats.skip("empty caption", where)
            else:
                yield replace(rec, key=where)


def _read_coco(path: Path, data: dict, image_root: Path, stats: SourceStats) -> Iterator[Record]:
    caps: dict[Any, list[str]] = {}
    for i, ann in enumerate(data["annotations"]):
        if not isinstance(ann, dict) or not isinstance(ann.get("caption"), str) or "image_id" not in ann:
            raise VlcpError(f"{path}: annotations[{i}]: needs 'image_id' and a string 'caption'")
        caps.setdefault(ann["image_id"], []).append(ann["caption"])
    for i, im in enumerate(data["images"]):
        if not isinstance(im, dict) or "id" not in im or not isinstance(im.get("file_name"), str):
            raise VlcpError(f"{path}: images[{i}]: needs 'id' and a string 'file_name'")
        name = im["file_name"]
        if im["id"] not in caps:
            stats.skip("no caption", name)
            continue
        c = _captions(caps[im["id"]])
        if not c:
            stats.skip("empty caption", name)
            continue
        yield Record(image=image_root / name, captions=c, split="train", key=name)


def _read_karpathy(path: Path, image_root: Path, stats: SourceStats) -> Iterator[Record]:
    for rec in read_karpathy(path, image_root, splits=KARPATHY_SPLITS):
        c = _captions(rec.captions)
        if not c:
            stats.skip("empty caption", rec.key)
            continue
        yield replace(rec, captions=c) if c != rec.captions else rec


def _counted(records: Iterator[Record], stats: SourceStats) -> Iterator[Record]:
    for rec in records:
        stats.read += 1
        yield rec


def read_source(path: str | Path, layout: str = "auto", csv: CsvOptions = CsvOptions(), image_root: str | Path = "",
                stats: SourceStats | None = None) -> Iterator[Record]:
    """Stream the records of one source: `Record(image=Path | ShardMember, captions, split, key)`,
    split "train" (Karpathy: the image's own split), keys as in the module table.

    `layout` is one of LAYOUTS or "auto" (`detect_layout`); `csv` names a CSV's columns and
    separator; `image_root` is where relative image paths of a CSV/COCO/Karpathy file point
    (default: the file's folder; a folder or shards ignore it, `reads_image_root`). Only paths and captions are read. The path and layout are
    checked at once (a VlcpError here, not on the first record); skipped items are counted in
    `stats` (pass a `SourceStats` to see them), whose `read` counts the records yielded.
    """
    if layout != "auto" and layout not in LAYOUTS:
        raise ConfigError(f"layout: must be auto or one of {', '.join(LAYOUTS)}, got {layout!r}")
    stats = SourceStats() if stats is None else stats
    layout, data = _detect(path) if layout == "auto" else (layout, None)
    if layout == "wds":
        return _counted(_read_wds(shard_paths(path), stats), stats)
    path = require(Path(path), f"{layout} image-caption data")
    root = Path(image_root) if image_root else path.parent
    if layout == "folder":
        if not path.is_dir():
            raise VlcpError(f"{path}: layout 'folder' needs a directory of images with .txt captions")
        return _counted(_read_folder(path, stats), stats)
    if path.is_dir():
        raise VlcpError(f"{path}: layout {layout!r} needs a file, not a directory")
    if layout == "csv":
        _csv_columns(path, csv)
        return _counted(_read_csv(path, csv, root, stats), stats)
    found, data = (layout, data) if data is not None else _json_source(path)
    if found != layout:
        raise VlcpError(f"{path}: a {found} JSON, not {layout}")
    reader = _read_coco(path, data, root, stats) if layout == "coco" else _read_karpathy(path, root, stats)
    return _counted(reader, stats)


# ----------------------------------------------------------------------------- decoding check

_DECODE_ERRORS = (VlcpError, OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError)


def _decode_error(image: Path | ShardMember, image_size: int) -> str | None:
    """Why `image` cannot be used ("missing image", "unreadable image"), or None if it decodes."""
    try:
        load_image(image, image_size)
    except _DECODE_ERRORS:
        return "missing image" if isinstance(image, Path) and not image.exists() else "unreadable image"
    return None


def read_checked(path: str | Path, layout: str = "auto", csv: CsvOptions = CsvOptions(), image_root: str | Path = "",
                 image_size: int = 224, workers: int = 4, progress: bool = True) -> tuple[list[Record], SourceStats]:
    """`read_source`, keeping only the records whose image decodes: each image is decoded once
    (`load_image` at `image_size`, in `workers` threads, a tqdm bar with `progress`) and thrown
    away; a missing or corrupt one is skipped and counted. Record order is kept. A source with no
    usable record left is a VlcpError naming it and what was skipped."""
    stats = SourceStats()
    records = list(read_source(path, layout, csv, image_root, stats))
    with ThreadPoolExecutor(max(1, workers)) as pool:
        errors = list(tqdm(pool.map(lambda r: _decode_error(r.image, image_size), records), total=len(records),
                           desc=f"checking {Path(str(path)).name}", unit="img", disable=not progress))
    kept = []
    for rec, why in zip(records, errors):
        if why is None:
            kept.append(rec)
        else:
            stats.skip(why, str(rec.image) if isinstance(rec.image, Path) else rec.key)
    stats.read = len(kept)
    if not kept:
        raise VlcpError(f"{path}: no usable image-caption pairs ({stats.summary()})")
    return kept, stats


# ----------------------------------------------------------------------------- held-out slice

def _unit_hash(key: str, salt: str) -> float:
    """sha1(salt + key) as a number in [0, 1). A key from a file name that is not UTF-8 (its bytes
    decoded by `os.fsdecode`, surrogate escapes) hashes as those bytes."""
    return int(hashlib.sha1((salt + key).encode("utf-8", "surrogateescape")).hexdigest()[:15], 16) / 16 ** 15


def holdout_mask(keys: Sequence[str], fraction: float, salt: str = "") -> list[bool]:
    """Which records to hold out (True) for evaluation: those whose key hashes below `fraction`.

    The mask depends on the keys only (not on their order or on when the chunk is read), so a
    chunk read again in a later update gives the same held-out slice. With at least two distinct
    keys and 0 < fraction < 1, at least one key is held out (the lowest hash) and one kept (the
    highest); `fraction` 0 holds out nothing, 1 everything. Records sharing a key share a side.
    """
    if not 0 <= fraction <= 1:
        raise ConfigError(f"holdout: fraction must be in [0, 1], got {fraction!r}")
    u = [_unit_hash(k, salt) for k in keys]
    mask = [x < fraction for x in u]
    if 0 < fraction < 1 and len(set(keys)) >= 2:
        if not any(mask):
            lowest = min(u)
            mask = [x == lowest for x in u]
        elif all(mask):
            highest = max(u)
            mask = [x != highest for x in u]
    return mask


def first_by_hash(records: Sequence[Record], n: int) -> list[Record]:
    """At most `n` records: those whose keys hash lowest (`holdout_mask`'s hash), in their own order,
    so the same subset whenever the source is read again."""
    records = list(records)
    if len(records) <= n:
        return records
    keep = set(sorted(range(len(records)), key=lambda i: _unit_hash(records[i].key, ""))[:n])
    return [r for i, r in enumerate(records) if i in keep]


# ----------------------------------------------------------------------------- contents: fingerprints, byte twins

def image_size_bytes(image: Path | ShardMember) -> int:
    """The size of an image file (a shard member: its size in the tar); -1 for one that cannot be read."""
    if isinstance(image, ShardMember):
        return image.size
    try:
        return os.stat(image).st_size
    except OSError:
        return -1


def _key_bytes(key: str) -> bytes:
    return key.encode("utf-8", "surrogateescape")


def fingerprint(records: Sequence[Record], sizes: Sequence[int]) -> dict:
    """What a source holds, cheaply: its item count, its images' bytes in all (`sizes`, as
    `image_size_bytes`), `keys` a sha256 over its sorted keys and `sha256` one over its sorted keys
    with each image's size and captions. The same files give the same fingerprint in any order;
    an image added, removed, renamed, of another size or with other captions gives another."""
    items = sorted((_key_bytes(r.key), n, "\n".join(r.captions).encode("utf-8", "surrogateescape"))
                   for r, n in zip(records, sizes))
    keys, whole = hashlib.sha256(), hashlib.sha256()
    for key, n, caps in items:
        keys.update(key + b"\0")
        whole.update(b"%s\0%d\0%s\0" % (key, n, hashlib.sha256(caps).digest()))
    return {"items": len(items), "bytes": sum(max(n, 0) for _, n, _ in items), "keys": keys.hexdigest(),
            "sha256": whole.hexdigest()}


def fingerprint_change(before: dict, now: dict) -> str:
    """What differs between two fingerprints, in words ("" when they are the same)."""
    if before.get("sha256") == now["sha256"]:
        return ""
    size = f"{before.get('bytes', '?'):,} bytes of images then, {now['bytes']:,} now"
    if before.get("keys") == now["keys"]:
        return f"the same {now['items']} items by name, but other image sizes or captions ({size})"
    return f"{before.get('items', '?')} items then, {now['items']} now, not all of the same names ({size})"


def _content_hash(image: Path | ShardMember) -> str | None:
    try:
        data = image.read() if isinstance(image, ShardMember) else Path(image).read_bytes()
    except OSError:
        return None
    return hashlib.sha256(data).hexdigest()


def byte_twins(held: Sequence[Record], held_sizes: Sequence[int], train: Sequence[Record],
               train_sizes: Sequence[int]) -> dict[int, str]:
    """The held-out records whose image has the same bytes as a training record's: {index in
    `held`: that training record's key}. Sizes first: only images of a size both sides have are
    read and hashed (sha256)."""
    by_size: dict[int, list[int]] = {}
    for j, n in enumerate(train_sizes):
        if n >= 0:
            by_size.setdefault(n, []).append(j)
    digests: dict[int, str | None] = {}
    twins = {}
    for i, (rec, n) in enumerate(zip(held, held_sizes)):
        same = by_size.get(n, [])
        if not same:
            continue
        mine = _content_hash(rec.image)
        for j in same:
            if j not in digests:
                digests[j] = _content_hash(train[j].image)
            if mine is not None and digests[j] == mine:
                twins[i] = train[j].key
                break
    return twins


# ----------------------------------------------------------------------------- ImageFolder keep-sets

@dataclass
class ClassFolder:
    """An ImageFolder read for zero-shot classification: image `images[i]` is of class
    `classes[labels[i]]`; `templates` are prompts with "{}" where the class name goes."""

    images: list[Path]
    labels: list[int]
    classes: list[str]
    templates: list[str]


def _class_dirs(root: Path) -> list[Path]:
    return [root / d for d in _visible_dirs([p.name for p in root.iterdir() if p.is_dir()])]


def _folder_images(folder: Path) -> list[Path]:
    return [d / f for d, _, files in _walk(folder) for f in files if _is_image(f)]


def is_image_folder(path: str | Path) -> bool:
    """True for a torchvision-style ImageFolder: a directory whose subfolders hold images, with no
    `.tar` shards and no caption `.txt` beside any image (that would be the `folder` caption layout)."""
    path = Path(path)
    if not path.is_dir() or any(path.glob("*.tar")):
        return False
    found = False
    for folder, _, files in _walk(path):
        names = set(files)
        for f in files:
            if _is_image(f):
                if Path(f).stem + ".txt" in names:
                    return False
                found = found or folder != path
    return found


def _numbered_lines(path: Path, what: str) -> list[tuple[int, str]]:
    """The non-empty lines of a text file, stripped, with their 1-based line numbers."""
    require(path, what)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise VlcpError(f"{path}: not a readable {what} ({e})") from None
    return [(n, s) for n, s in enumerate((line.strip() for line in text.splitlines()), 1) if s]


ENSEMBLES = ("simple", "openai")   # a keep-set's default prompts: open_clip's 7 SIMPLE or CLIP's 80 ImageNet templates


def _default_templates(ensemble: str = "simple") -> list[str]:
    """A default prompt ensemble as "{}" strings: "simple", open_clip's SIMPLE_IMAGENET_TEMPLATES (7,
    the subset CLIP's authors found nearly as good), or "openai", CLIP's 80 ImageNet templates
    (OPENAI_IMAGENET_TEMPLATES: 80 encodings a class at every evaluation)."""
    from open_clip.zero_shot_metadata import OPENAI_IMAGENET_TEMPLATES, SIMPLE_IMAGENET_TEMPLATES

    if ensemble not in ENSEMBLES:
        raise VlcpError(f"templates: {ensemble!r} is not a prompt ensemble ({', '.join(ENSEMBLES)})")
    return [t("{}") for t in (SIMPLE_IMAGENET_TEMPLATES if ensemble == "simple" else OPENAI_IMAGENET_TEMPLATES)]


def read_image_folder(path: str | Path, classnames: str | Path = "", templates: str | Path = "",
                      ensemble: str = "simple") -> ClassFolder:
    """An ImageFolder keep-set: one subfolder per class (sorted by name; hidden ones ignored), its
    images anywhere below it, label = the folder's index.

    Class names are the folder names, or the lines of `classnames` (default `ROOT/classnames.txt`
    if present), one per folder in sorted-folder order. Templates are the lines of `templates`
    (default `ROOT/templates.txt` if present), each with "{}" for the class name, else the `ensemble`
    (`_default_templates`: open_clip's 7 simple ImageNet templates, or CLIP's 80). A class folder
    without images, a count mismatch or a template without "{}" is a VlcpError naming the file.
    """
    root = require(Path(path), "ImageFolder (one subfolder of images per class)")
    if not root.is_dir():
        raise VlcpError(f"{root}: an ImageFolder must be a directory with one subfolder of images per class")
    folders = _class_dirs(root)
    if not folders:
        raise VlcpError(f"{root}: no class subfolders; an ImageFolder has one subfolder of images per class")
    images, labels = [], []
    for label, folder in enumerate(folders):
        found = _folder_images(folder)
        if not found:
            raise VlcpError(f"{folder}: class folder without images ({', '.join(IMAGE_SUFFIXES)})")
        images += found
        labels += [label] * len(found)
    names_file = Path(classnames) if classnames else root / "classnames.txt"
    if classnames or names_file.is_file():
        classes = [s for _, s in _numbered_lines(names_file, "class names file (one name per line)")]
        if len(classes) != len(folders):
            raise VlcpError(f"{names_file}: {len(classes)} class names, but {root} has {len(folders)} class folders "
                            f"(one name per line, in sorted folder order)")
    else:
        classes = [f.name for f in folders]
    templates_file = Path(templates) if templates else root / "templates.txt"
    if templates or templates_file.is_file():
        lines = _numbered_lines(templates_file, "templates file (one prompt per line, '{}' for the class name)")
        if not lines:
            raise VlcpError(f"{templates_file}: no templates (one prompt per line, '{{}}' for the class name)")
        for n, line in lines:
            if "{}" not in line:
                raise VlcpError(f"{templates_file}: line {n} ({line!r}) has no '{{}}' where the class name goes")
        prompts = [s for _, s in lines]
    else:
        prompts = _default_templates(ensemble)
    return ClassFolder(images=images, labels=labels, classes=classes, templates=prompts)
