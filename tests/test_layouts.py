"""A user's own image-caption data (`vlcp.data.formats.layouts`): each layout (image folder with .txt
captions, TSV/CSV with open_clip_train's keys, webdataset shards by pattern/folder/file, COCO captions
JSON, Karpathy JSON) on a tiny fixture written here, layout detection, skipped items counted (not
fatal), the decode check, the stable held-out slice, and ImageFolder keep-sets.
"""
import io
import json
import random
import tarfile
from pathlib import Path

import pytest
from PIL import Image

from vlcp.data.formats import (LAYOUTS, CsvOptions, ShardMember, SourceStats, detect_layout, holdout_mask,
                               is_image_folder, load_image, read_checked, read_image_folder, read_source)
from vlcp.errors import ConfigError, VlcpError

RED, GREEN, BLUE = (255, 0, 0), (0, 255, 0), (0, 0, 255)


def image(path: Path, colour=RED) -> Path:
    """An 8x8 solid-colour image (format from the suffix)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), colour).save(path)
    return path


def captioned(path: Path, text: str, colour=RED) -> Path:
    """An image with its same-name .txt caption file."""
    image(path, colour)
    path.with_suffix(".txt").write_text(text, encoding="utf-8")
    return path


def encode(colour, fmt="PNG") -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(buf, fmt)
    return buf.getvalue()


def shard(path: Path, members) -> Path:
    """A webdataset shard written with tarfile: `members` are (name, bytes) in order."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def dump(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


def keys(records) -> list[str]:
    return [r.key for r in records]


# ----------------------------------------------------------------------------- folder

def test_folder_captions_keys_and_counted_skips(tmp_path):
    root = tmp_path / "photos"
    captioned(root / "a.png", "a red square\n\n  second caption \n")
    captioned(root / "d.bmp", "\n   \n")                        # empty caption
    captioned(root / "sub" / "b.jpg", "a blue square", BLUE)
    image(root / "sub" / "c.png")                               # no caption
    (root / "notes.md").write_text("not an image")
    captioned(root / ".ipynb_checkpoints" / "a.png", "hidden")  # hidden folders are left out
    assert detect_layout(root) == "folder"
    stats = SourceStats()
    recs = list(read_source(root, stats=stats))
    assert keys(recs) == ["a.png", "sub/b.jpg"]
    assert recs[0].captions == ("a red square", "second caption") and recs[1].captions == ("a blue square",)
    assert recs[0].image == root / "a.png" and {r.split for r in recs} == {"train"}
    assert stats.read == 2
    assert stats.skipped == {"empty caption": 1, "no caption": 1}
    assert stats.examples == ["d.bmp", "sub/c.png"]
    assert "read 2, skipped 2" in stats.summary() and "sub/c.png" in stats.summary()
    assert keys(read_source(root, layout="folder")) == keys(recs)


# ----------------------------------------------------------------------------- csv / tsv

def test_tsv_open_clip_defaults_and_image_root(tmp_path):
    d = tmp_path / "data"
    image(d / "imgs" / "0.png")
    image(d / "imgs" / "1.png", GREEN)
    tsv = d / "train.tsv"
    tsv.write_text("filepath\ttitle\textra\n"
                   "imgs/0.png\ta red square\tx\n"
                   "imgs/1.png\t\tx\n"                       # empty caption
                   "\tno image\tx\n"                         # empty path
                   "imgs/1.png\tgreen, with a comma\tx\n", encoding="utf-8")
    assert detect_layout(tsv) == "csv"
    stats = SourceStats()
    recs = list(read_source(tsv, stats=stats))
    assert keys(recs) == ["imgs/0.png", "imgs/1.png"]
    assert [r.captions for r in recs] == [("a red square",), ("green, with a comma",)]
    assert recs[0].image == d / "imgs" / "0.png"          # relative to the TSV's folder
    assert stats.read == 2 and stats.skipped == {"empty caption": 1, "empty image path": 1}
    assert stats.examples == ["imgs/1.png", "train.tsv line 4"]
    other = tmp_path / "elsewhere"
    assert next(read_source(tsv, image_root=other)).image == other / "imgs" / "0.png"


def test_csv_custom_keys_and_separator(tmp_path):
    assert CsvOptions().delimiter("a.csv") == "," and CsvOptions().delimiter("A.CSV") == ","
    assert CsvOptions().delimiter("a.tsv") == "\t" and CsvOptions(separator=";").delimiter("a.csv") == ";"
    opts = CsvOptions(img_key="image", caption_key="caption")
    c = tmp_path / "pairs.csv"                                # ',' by default for .csv
    c.write_text('image,caption\nimgs/0.png,"a red square, small"\n/abs/1.png,second\n', encoding="utf-8")
    recs = list(read_source(c, csv=opts))
    assert keys(recs) == ["imgs/0.png", "/abs/1.png"]
    assert recs[0].captions == ("a red square, small",)
    assert recs[0].image == tmp_path / "imgs" / "0.png" and recs[1].image == Path("/abs/1.png")
    semi = tmp_path / "pairs.txt"                             # any separator, layout named explicitly
    semi.write_text("caption;image\nred;imgs/0.png\n", encoding="utf-8")
    recs = list(read_source(semi, layout="csv", csv=CsvOptions("image", "caption", ";")))
    assert keys(recs) == ["imgs/0.png"] and recs[0].captions == ("red",)
    tabbed = tmp_path / "tabbed.csv"                          # a .csv written with tabs
    tabbed.write_text("filepath\ttitle\nimgs/0.png\tred, small\n", encoding="utf-8")
    assert next(read_source(tabbed, csv=CsvOptions(separator="\t"))).captions == ("red, small",)


def test_csv_missing_column_names_it_and_the_columns(tmp_path):
    c = tmp_path / "pairs.csv"
    c.write_text("filepath,text\nimgs/0.png,red\n", encoding="utf-8")
    with pytest.raises(VlcpError, match=r"pairs\.csv: no column 'title' \(csv caption_key\); its columns, "
                                        r"split by ',', are: 'filepath', 'text'"):
        read_source(c)                                        # at the call, before the first record
    t = tmp_path / "pairs.tsv"                                # commas in a .tsv: one column
    t.write_text("filepath,title\nimgs/0.png,red\n", encoding="utf-8")
    with pytest.raises(VlcpError, match=r"pairs\.tsv: no column 'filepath' \(csv img_key\).*'filepath,title'"):
        read_source(t)


# ----------------------------------------------------------------------------- webdataset

def test_wds_brace_pattern_folder_file_and_glob(tmp_path):
    shards = tmp_path / "shards"
    shard(shards / "000.tar", [("a.png", encode(RED)), ("a.txt", b"red"),
                               ("b.png", encode(GREEN)), ("b.json", b"{}"), ("b.txt", b"green")])
    shard(shards / "001.tar", [("c.jpg", encode(BLUE, "JPEG")), ("c.txt", b"blue"),
                               ("d.png", encode(RED)),              # no caption
                               ("e.txt", b"no image"),              # no image
                               ("f.png", encode(RED)), ("f.txt", b"  ")])  # empty caption
    pattern = str(shards / "{000..001}.tar")
    assert detect_layout(pattern) == "wds" and detect_layout(shards) == "wds"
    assert detect_layout(shards / "000.tar") == "wds"
    stats = SourceStats()
    recs = list(read_source(pattern, stats=stats))
    assert keys(recs) == ["000/a", "000/b", "001/c"]
    assert [r.captions for r in recs] == [("red",), ("green",), ("blue",)]
    assert all(isinstance(r.image, ShardMember) for r in recs)
    assert load_image(recs[0].image, 4)[..., 0].mean() > 200 and load_image(recs[2].image, 4)[..., 2].mean() > 200
    assert stats.read == 3 and stats.skipped == {"no caption": 1, "no image": 1, "empty caption": 1}
    assert stats.examples == ["001/d", "001/e", "001/f"]
    assert keys(read_source(shards)) == keys(recs)                     # a folder of shards
    assert keys(read_source(str(shards / "*.tar"))) == keys(recs)      # a glob
    assert keys(read_source(shards / "000.tar")) == ["000/a", "000/b"]  # one shard
    assert keys(read_source(str(shards / "00{1,0}.tar"))) == ["001/c", "000/a", "000/b"]  # pattern order kept
    with pytest.raises(VlcpError, match=r"002\.tar: not found"):
        read_source(str(shards / "{000..002}.tar"))
    with pytest.raises(VlcpError, match="no files match"):
        read_source(str(tmp_path / "none" / "*.tar"))


# ----------------------------------------------------------------------------- COCO / Karpathy JSON

def test_coco_captions_json(tmp_path):
    images = tmp_path / "coco" / "images"
    image(images / "x.png")
    image(images / "y.png", GREEN)
    ann = dump(tmp_path / "coco" / "captions_train.json", {
        "info": {}, "images": [{"id": 1, "file_name": "x.png"}, {"id": 2, "file_name": "y.png"},
                               {"id": 3, "file_name": "z.png"}],
        "annotations": [{"id": 10, "image_id": 1, "caption": "one"}, {"id": 11, "image_id": 2, "caption": "two a"},
                        {"id": 12, "image_id": 1, "caption": " uno "}, {"id": 13, "image_id": 2, "caption": "two b"}]})
    assert detect_layout(ann) == "coco"
    stats = SourceStats()
    recs = list(read_source(ann, image_root=images, stats=stats))
    assert keys(recs) == ["x.png", "y.png"]
    assert [r.captions for r in recs] == [("one", "uno"), ("two a", "two b")]
    assert recs[0].image == images / "x.png" and recs[0].split == "train"
    assert stats.skipped == {"no caption": 1} and stats.examples == ["z.png"]
    assert next(read_source(ann)).image == tmp_path / "coco" / "x.png"   # default: the JSON's folder
    with pytest.raises(VlcpError, match=r"captions_train\.json: a coco JSON, not karpathy"):
        read_source(ann, layout="karpathy")


def test_karpathy_json(tmp_path):
    root = tmp_path / "k"
    for rel in ("val/k1.png", "train/k2.png", "train/k3.png"):
        image(root / rel)
    path = dump(root / "dataset_coco.json", {"dataset": "coco", "images": [
        {"filepath": "val", "filename": "k1.png", "split": "test", "sentences": [{"raw": "k one"}, {"raw": "k uno"}]},
        {"filepath": "train", "filename": "k2.png", "split": "train", "sentences": [{"raw": "k two"}]},
        {"filepath": "train", "filename": "k3.png", "split": "restval", "sentences": [{"raw": "  "}]}]})
    assert detect_layout(path) == "karpathy"
    stats = SourceStats()
    recs = list(read_source(path, stats=stats))
    assert keys(recs) == ["val/k1.png", "train/k2.png"]
    assert [r.split for r in recs] == ["test", "train"] and recs[0].captions == ("k one", "k uno")
    assert recs[0].image == root / "val" / "k1.png"
    assert stats.skipped == {"empty caption": 1} and stats.examples == ["train/k3.png"]


def test_json_of_another_kind_is_an_error_naming_it(tmp_path):
    for name, obj in (("instances.json", {"images": [{"id": 1, "file_name": "x.png"}],
                                          "annotations": [{"image_id": 1, "bbox": [0, 0, 1, 1]}]}),
                      ("other.json", {"foo": 1}), ("rows.json", [{"image": "x.png", "caption": "c"}])):
        path = dump(tmp_path / name, obj)
        with pytest.raises(VlcpError, match=rf"{name.replace('.', r'[.]')}: neither a COCO captions JSON"):
            detect_layout(path)
        with pytest.raises(VlcpError, match="neither a COCO captions JSON"):
            read_source(path)


# ----------------------------------------------------------------------------- detection errors

def test_detect_and_read_errors(tmp_path):
    assert LAYOUTS == ("folder", "csv", "wds", "coco", "karpathy")
    with pytest.raises(VlcpError, match=r"nope: not found"):
        detect_layout(tmp_path / "nope")
    with pytest.raises(VlcpError, match=r"nope: not found"):
        read_source(tmp_path / "nope")
    with pytest.raises(VlcpError, match=r"nope\.csv: not found"):
        read_source(tmp_path / "nope.csv", layout="csv")
    (tmp_path / "x.bin").write_bytes(b"\0")
    with pytest.raises(VlcpError, match=r"x\.bin: not an image-caption source"):
        detect_layout(tmp_path / "x.bin")
    (tmp_path / "empty").mkdir()
    with pytest.raises(VlcpError, match=r"empty: a folder with neither images"):
        detect_layout(tmp_path / "empty")
    with pytest.raises(ConfigError, match="layout: must be auto or one of"):
        read_source(tmp_path, layout="parquet")
    with pytest.raises(VlcpError, match="needs a directory"):
        read_source(tmp_path / "x.bin", layout="folder")
    with pytest.raises(VlcpError, match="needs a file, not a directory"):
        read_source(tmp_path / "empty", layout="csv")


# ----------------------------------------------------------------------------- decode check

def test_read_checked_skips_corrupt_images_and_keeps_order(tmp_path):
    root = tmp_path / "photos"
    colours = [RED, GREEN, BLUE, RED, GREEN, BLUE]
    for i, c in enumerate(colours):
        captioned(root / f"{i}.png", f"colour {i}", c)
    (root / "3.png").write_bytes(b"not a png at all")               # corrupt
    (root / "5.png").write_bytes(encode(RED)[:20])                   # truncated
    recs, stats = read_checked(root, image_size=8, workers=3, progress=False)
    assert keys(recs) == ["0.png", "1.png", "2.png", "4.png"]
    assert stats.read == 4 and stats.skipped == {"unreadable image": 2}
    assert stats.examples == [str(root / "3.png"), str(root / "5.png")]
    assert keys(recs) == [k for k in keys(read_source(root)) if k not in ("3.png", "5.png")]


def test_read_checked_missing_files_shards_and_nothing_left(tmp_path):
    image(tmp_path / "imgs" / "0.png")
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("filepath\ttitle\nimgs/0.png\tred\nimgs/gone.png\tmissing\n", encoding="utf-8")
    recs, stats = read_checked(tsv, image_size=4, workers=1, progress=False)
    assert keys(recs) == ["imgs/0.png"] and stats.skipped == {"missing image": 1}
    s = shard(tmp_path / "s.tar", [("a.png", b"garbage"), ("a.txt", b"bad"), ("b.png", encode(GREEN)), ("b.txt", b"ok")])
    recs, stats = read_checked(s, image_size=4, progress=False)
    assert keys(recs) == ["s/b"] and stats.skipped == {"unreadable image": 1} and stats.examples == ["s/a"]
    bad = tmp_path / "bad"
    captioned(bad / "x.png", "x")
    (bad / "x.png").write_bytes(b"nope")
    captioned(bad / "y.png", "")                                     # empty caption
    with pytest.raises(VlcpError, match=r"bad: no usable image-caption pairs \(read 0, skipped 2 "
                                        r"\(1 empty caption, 1 unreadable image"):
        read_checked(bad, image_size=4, progress=False)


# ----------------------------------------------------------------------------- held-out slice

def test_holdout_mask_is_stable_by_key():
    keys_ = [f"photos/{i:04d}.jpg" for i in range(400)]
    mask = holdout_mask(keys_, 0.25)
    assert 60 < sum(mask) < 140
    assert holdout_mask(keys_, 0.25) == mask                          # same keys -> same mask
    shuffled = keys_[:]
    random.Random(0).shuffle(shuffled)
    assert dict(zip(shuffled, holdout_mask(shuffled, 0.25))) == dict(zip(keys_, mask))  # per key, any order
    assert holdout_mask(keys_[:200], 0.25) == mask[:200]              # a chunk read partly: same keys, same side
    wider = holdout_mask(keys_, 0.5)
    assert all(w for m, w in zip(mask, wider) if m)                   # a larger fraction holds out a superset
    assert holdout_mask(keys_, 0.25, salt="update-2") != mask
    assert holdout_mask(keys_, 0.0) == [False] * 400 and holdout_mask(keys_, 1.0) == [True] * 400
    assert holdout_mask([], 0.1) == []


def test_holdout_mask_minimums_and_range():
    few = ["a.jpg", "b.jpg", "c.jpg"]
    low = holdout_mask(few, 1e-12)
    assert sum(low) == 1                                               # at least one held out
    high = holdout_mask(few, 1 - 1e-12)
    assert high.count(False) == 1                                      # at least one kept
    rev = holdout_mask(few[::-1], 1e-12)[::-1]
    assert rev == low                                                  # which one: by key, not position
    assert holdout_mask(["a.jpg", "a.jpg", "b.jpg"], 1e-12)[0] == holdout_mask(["a.jpg", "a.jpg", "b.jpg"], 1e-12)[1]
    assert len(holdout_mask(["only.jpg"], 0.5)) == 1
    assert holdout_mask(["a.jpg", "b.jpg"], 0.0) == [False, False]
    for bad in (-0.1, 1.5):
        with pytest.raises(ConfigError, match="holdout: fraction must be in"):
            holdout_mask(few, bad)


# ----------------------------------------------------------------------------- ImageFolder

def pets(root: Path) -> Path:
    image(root / "dog" / "1.png", GREEN)
    image(root / "cat" / "2.png")
    image(root / "cat" / "sub" / "3.jpg")
    return root


def test_image_folder_classes_labels_default_templates(tmp_path):
    from vlcp.eval.zeroshot import clip_ensembles

    root = pets(tmp_path / "pets")
    assert is_image_folder(root)
    folder = read_image_folder(root)
    assert folder.classes == ["cat", "dog"]
    assert folder.images == [root / "cat" / "2.png", root / "cat" / "sub" / "3.jpg", root / "dog" / "1.png"]
    assert folder.labels == [0, 0, 1]
    assert len(folder.templates) == 7 and folder.templates[0] == "itap of a {}."      # open_clip's simple set
    assert all("{}" in t for t in folder.templates)
    full = read_image_folder(root, ensemble="openai")                 # CLIP's 80, on request
    assert len(full.templates) == 80 and full.templates == clip_ensembles()["imagenet"]
    with pytest.raises(VlcpError, match="not a prompt ensemble"):
        read_image_folder(root, ensemble="eighty")


def test_image_folder_classnames_and_templates_files(tmp_path):
    root = pets(tmp_path / "pets")
    (root / "classnames.txt").write_text("a cat\n\na dog\n", encoding="utf-8")
    (root / "templates.txt").write_text("a photo of a {}.\n\nart of the {}\n", encoding="utf-8")
    assert is_image_folder(root)                                       # the .txt files are not captions
    folder = read_image_folder(root)
    assert folder.classes == ["a cat", "a dog"] and folder.templates == ["a photo of a {}.", "art of the {}"]
    names = tmp_path / "names.txt"
    names.write_text("kitty\npuppy\n", encoding="utf-8")
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("itap of a {}.\n", encoding="utf-8")
    folder = read_image_folder(root, classnames=str(names), templates=str(prompts))
    assert folder.classes == ["kitty", "puppy"] and folder.templates == ["itap of a {}."]


def test_image_folder_errors(tmp_path):
    root = pets(tmp_path / "pets")
    names = tmp_path / "names.txt"
    names.write_text("cat\ndog\nbird\n", encoding="utf-8")
    with pytest.raises(VlcpError, match=r"names\.txt: 3 class names, but .*pets has 2 class folders"):
        read_image_folder(root, classnames=str(names))
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("a photo of a {}.\n\na photo\n", encoding="utf-8")
    with pytest.raises(VlcpError, match=r"prompts\.txt: line 3 \('a photo'\) has no '\{\}'"):
        read_image_folder(root, templates=str(prompts))
    prompts.write_text("\n\n", encoding="utf-8")
    with pytest.raises(VlcpError, match=r"prompts\.txt: no templates"):
        read_image_folder(root, templates=str(prompts))
    with pytest.raises(VlcpError, match=r"missing\.txt: not found"):
        read_image_folder(root, classnames=str(tmp_path / "missing.txt"))
    (root / "empty").mkdir()
    with pytest.raises(VlcpError, match=r"empty: class folder without images"):
        read_image_folder(root)
    with pytest.raises(VlcpError, match=r"nope: not found"):
        read_image_folder(tmp_path / "nope")
    flat = tmp_path / "flat"
    image(flat / "a.png")
    with pytest.raises(VlcpError, match=r"flat: no class subfolders"):
        read_image_folder(flat)


def test_is_image_folder_tells_keep_sets_from_caption_folders(tmp_path):
    captions = tmp_path / "captions"
    captioned(captions / "sub" / "a.png", "a caption")
    assert not is_image_folder(captions)                               # the folder caption layout
    flat = tmp_path / "flat"
    image(flat / "a.png")
    assert not is_image_folder(flat)                                   # no class subfolders
    assert not is_image_folder(tmp_path / "nope")
    assert not is_image_folder(image(tmp_path / "one.png"))
    tars = pets(tmp_path / "pets")
    shard(tars / "000.tar", [("a.txt", b"x")])
    assert not is_image_folder(tars)                                   # shards: the wds layout
