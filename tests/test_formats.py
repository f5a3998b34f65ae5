"""Readers of the real dataset formats (`vlcp.data.formats`), each on a tiny fixture written here in
that exact format: P9D, COCO/Flickr30K Karpathy JSON, CLFM caption rows, XM3600, MSCOCO36, the
CLFM triplet TSV, webdataset pool shards and FoMo-in-Flux info dicts.
"""
import gzip
import io
import json
import tarfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vlcp.data.concepts import Concept, cut_tasks, read_stream, write_stream
from vlcp.data.formats import (CLL_CLIP_ORDER, XM3600_LANGUAGES, Record, ShardMember, iter_wds, list_shards, load_images,
                               read_caption_rows, read_coco_karpathy, read_flickr30k_karpathy,
                               read_fomo_classnames, read_fomo_info, read_mscoco36, read_p9d_eval,
                               read_p9d_train, read_triplets, read_wds, read_xm3600, stream_task_ids,
                               to_pairset)
from vlcp.data.formats.fomo_info import read_fomo_template
from vlcp.errors import VlcpError

COLOURS = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0)]


def image(path: Path, colour=(255, 0, 0), size=(12, 8)) -> Path:
    """A tiny solid-colour image (format from the suffix); wide by default to exercise the centre crop."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path)
    return path


def dump(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- P9D

def p9d(root: Path) -> Path:
    dump(root / "json" / "train.json", {
        "家居用品": {"600000000001": {"title": "北欧简约陶瓷马克杯", "cate_name": "马克杯", "image_link": "https://x/1.jpg"},
                 "600000000002": {"title": "收纳盒", "cate_name": "收纳", "image_link": "https://x/2.jpg"}},
        "母婴": {"600000000003": {"title": "儿童防晒衣夏季薄款", "cate_name": "防晒衣", "image_link": "https://x/3.jpg"}},
    })
    for split, ind in (("test", ["母婴", "家居用品"]), ("query", ["母婴"]), ("gallery", ["家居用品"])):
        dump(root / "json" / f"{split}.json", {
            f"7000000000{i}{split[0]}": {"title": f"{split} 商品 {i}", "cate_name": "防晒衣", "industry_name": n,
                                         "image_link": "https://x/y.jpg"} for i, n in enumerate(ind)})
    for k, c in zip(("600000000001", "600000000002", "600000000003"), COLOURS):
        image(root / "train_images" / f"{k}.jpg", c)
    for k in ("70000000000t", "70000000001t"):
        image(root / "gallery_images" / f"{k}.jpg")
    return root


def test_p9d_train_nested_by_industry(tmp_path):
    root = p9d(tmp_path / "p9d")
    recs = read_p9d_train(root)
    assert [r.key for r in recs] == ["600000000001", "600000000002", "600000000003"]
    assert [r.task for r in recs] == ["家居用品", "家居用品", "母婴"]
    assert recs[0].captions == ("北欧简约陶瓷马克杯",) and recs[0].classname == "马克杯"
    assert recs[2].image == root / "train_images" / "600000000003.jpg" and recs[2].split == "train"
    assert recs[0].label is None
    # industry filter keeps the given task order
    assert [r.key for r in read_p9d_train(root, industries=["母婴", "家居用品"])] == \
        ["600000000003", "600000000001", "600000000002"]
    with pytest.raises(VlcpError, match="no industry '食品/保健'"):
        read_p9d_train(root, industries=["食品/保健"])
    imgs = load_images(recs, 8)
    assert imgs.shape == (3, 8, 8, 3) and imgs.dtype == np.uint8
    # JPEG is lossy: compare the dominant channel only
    assert imgs[0, ..., 0].mean() > 200 and imgs[1, ..., 1].mean() > 200 and imgs[2, ..., 2].mean() > 200


def test_p9d_flat_eval_files(tmp_path):
    root = p9d(tmp_path / "p9d")
    test = read_p9d_eval(root, "test")
    assert [(r.key, r.task, r.split) for r in test] == [("70000000000t", "母婴", "test"),
                                                       ("70000000001t", "家居用品", "test")]
    assert test[0].image == root / "gallery_images" / "70000000000t.jpg"
    assert [r.key for r in read_p9d_eval(root, "test", industries=["家居用品"])] == ["70000000001t"]
    assert [r.task for r in read_p9d_eval(root, "query")] == ["母婴"]
    assert [r.captions for r in read_p9d_eval(root, "gallery")] == [("gallery 商品 0",)]
    assert load_images(test, 4).shape == (2, 4, 4, 3)


def test_p9d_errors(tmp_path):
    with pytest.raises(VlcpError, match=r"nowhere.*not found.*data/README\.md"):
        read_p9d_train(tmp_path / "nowhere")
    root = p9d(tmp_path / "p9d")
    (root / "json" / "gallery.json").unlink()
    with pytest.raises(VlcpError, match=r"gallery\.json: not found"):
        read_p9d_eval(root, "gallery")
    dump(root / "json" / "test.json", {"1": {"title": "t", "cate_name": "c"}})  # no industry_name
    with pytest.raises(VlcpError, match=r"test\.json: item '1': field 'industry_name'"):
        read_p9d_eval(root, "test")
    dump(root / "json" / "train.json", {"母婴": {"5": {"title": 3, "cate_name": "c"}}})
    with pytest.raises(VlcpError, match=r"train\.json: item '5': field 'title'"):
        read_p9d_train(root)
    (root / "json" / "train.json").write_text("{not json")
    with pytest.raises(VlcpError, match=r"train\.json: not a readable JSON"):
        read_p9d_train(root)


# ----------------------------------------------------------------------------- Karpathy JSON

def karpathy_entry(i, split, filename, filepath=None, n=2):
    e = {"filename": filename, "imgid": i, "split": split, "sentids": list(range(n * i, n * i + n)),
         "sentences": [{"raw": f"caption {j} of {filename}.", "tokens": ["caption"], "imgid": i, "sentid": j}
                       for j in range(n)]}
    if filepath:
        e["filepath"], e["cocoid"] = filepath, 100 + i
    return e


def test_coco_karpathy_splits(tmp_path):
    root = tmp_path / "coco"
    files = [("train2014", "COCO_train2014_000000000009.jpg", "train"),
             ("val2014", "COCO_val2014_000000000042.jpg", "restval"),
             ("val2014", "COCO_val2014_000000000073.jpg", "val"),
             ("val2014", "COCO_val2014_000000000074.jpg", "test")]
    dump(root / "dataset_coco.json", {"dataset": "coco", "images": [
        karpathy_entry(i, s, f, fp, n=5) for i, (fp, f, s) in enumerate(files)]})
    for (fp, f, _), c in zip(files, COLOURS):
        image(root / fp / f, c)
    test = read_coco_karpathy(root)
    assert [r.key for r in test] == ["val2014/COCO_val2014_000000000074.jpg"]
    assert len(test[0].captions) == 5 and test[0].captions[0] == "caption 0 of COCO_val2014_000000000074.jpg."
    assert test[0].image == root / "val2014" / "COCO_val2014_000000000074.jpg" and test[0].split == "test"
    train = read_coco_karpathy(root, splits=("train", "restval"))
    assert [r.split for r in train] == ["train", "restval"]
    imgs = load_images(train, 6)
    assert imgs.shape == (2, 6, 6, 3)
    with pytest.raises(VlcpError, match="'dev' is not a Karpathy split"):
        read_coco_karpathy(root, splits=("dev",))


def test_flickr30k_karpathy_no_filepath(tmp_path):
    root = tmp_path / "flickr30k"
    dump(root / "dataset_flickr30k.json", {"dataset": "flickr30k", "images": [
        karpathy_entry(0, "train", "1000092795.jpg"), karpathy_entry(1, "test", "1001773457.jpg"),
        karpathy_entry(2, "val", "1001573224.jpg")]})
    for f in ("1000092795.jpg", "1001773457.jpg", "1001573224.jpg"):
        image(root / "flickr30k-images" / f)
    recs = read_flickr30k_karpathy(root, splits=("val", "test"))
    assert [(r.key, r.split) for r in recs] == [("1001773457.jpg", "test"), ("1001573224.jpg", "val")]
    assert recs[0].image == root / "flickr30k-images" / "1001773457.jpg"
    assert recs[0].captions == ("caption 0 of 1001773457.jpg.", "caption 1 of 1001773457.jpg.")


def test_karpathy_errors(tmp_path):
    with pytest.raises(VlcpError, match=r"flickr30k.*not found.*data/README\.md"):
        read_flickr30k_karpathy(tmp_path / "flickr30k")
    root = tmp_path / "coco"
    root.mkdir()
    with pytest.raises(VlcpError, match=r"dataset_coco\.json: not found"):
        read_coco_karpathy(root)
    dump(root / "dataset_coco.json", {"dataset": "coco"})
    with pytest.raises(VlcpError, match=r"dataset_coco\.json: field 'images'"):
        read_coco_karpathy(root)
    bad = karpathy_entry(1, "test", "b.jpg", "val2014")
    bad["sentences"] = [{"tokens": ["no", "raw"]}]
    dump(root / "dataset_coco.json", {"images": [karpathy_entry(0, "test", "a.jpg", "val2014"), bad]})
    with pytest.raises(VlcpError, match=r"dataset_coco\.json: images\[1\] \(b\.jpg\): field 'sentences'"):
        read_coco_karpathy(root)
    dump(root / "dataset_coco.json", {"images": [{"filename": "a.jpg", "split": "holdout"}]})
    with pytest.raises(VlcpError, match=r"images\[0\]: field 'split' is 'holdout'"):
        read_coco_karpathy(root)


# ----------------------------------------------------------------------------- CLFM caption rows

def test_clfm_caption_rows_grouped_per_image(tmp_path):
    rows = [{"image": "train2014/COCO_train2014_000000000009.jpg", "caption": "A plate of food.", "image_id": 9},
            {"image": "train2014/COCO_train2014_000000000025.jpg", "caption": "A giraffe.", "image_id": 25},
            {"image": "train2014/COCO_train2014_000000000009.jpg", "caption": "Broccoli on a plate.", "image_id": 9}]
    path = dump(tmp_path / "annotations" / "coco" / "en" / "train.json", rows)
    (tmp_path / "coco").mkdir()
    recs = read_caption_rows(path, tmp_path / "coco", "train", "en")
    assert [r.key for r in recs] == ["train2014/COCO_train2014_000000000009.jpg",
                                     "train2014/COCO_train2014_000000000025.jpg"]
    assert recs[0].captions == ("A plate of food.", "Broccoli on a plate.")
    assert recs[0].image == tmp_path / "coco" / "train2014" / "COCO_train2014_000000000009.jpg"
    assert (recs[0].language, recs[0].task, recs[0].split) == ("en", "en", "train")
    dump(path, rows + [{"image": "x.jpg", "caption": [], "image_id": 1}])
    with pytest.raises(VlcpError, match=r"train\.json: row 3 \(x\.jpg\): field 'caption'"):
        read_caption_rows(path, tmp_path / "coco", "train")
    dump(path, [{"caption": "no image"}])
    with pytest.raises(VlcpError, match=r"train\.json: row 0: field 'image'"):
        read_caption_rows(path, tmp_path / "coco", "train")


# ----------------------------------------------------------------------------- XM3600 / MSCOCO36

def test_xm3600_per_language_files(tmp_path):
    root = tmp_path / "xm3600"
    caps = {"de": [["Zwei Hühner im Gras", "Ein Hahn und eine Henne"], ["Ein Hund"]],
            "zh": [["草地上的两只鸡"], ["一只狗", "小狗"]]}
    for lang, cs in caps.items():
        dump(root / lang / "test.json", [
            {"image": k, "image/locale": "fil", "caption": c, "image_id": i}
            for i, (k, c) in enumerate(zip(["000411001ff7dd4f.jpg", "00a1b2c3d4e5f607.jpg"], cs))])
    image(root / "images" / "000411001ff7dd4f.jpg", COLOURS[1], size=(8, 12))
    image(root / "images" / "00a1b2c3d4e5f607.jpg", COLOURS[2])
    recs = read_xm3600(root, languages=["zh", "de"])
    assert [(r.language, r.key) for r in recs] == [("zh", "000411001ff7dd4f.jpg"), ("zh", "00a1b2c3d4e5f607.jpg"),
                                                   ("de", "000411001ff7dd4f.jpg"), ("de", "00a1b2c3d4e5f607.jpg")]
    assert recs[2].captions == ("Zwei Hühner im Gras", "Ein Hahn und eine Henne") and recs[2].task == "de"
    assert recs[0].image == root / "images" / "000411001ff7dd4f.jpg" and recs[0].split == "test"
    imgs = load_images(recs, 5)
    assert imgs.shape == (4, 5, 5, 3) and imgs[0, ..., 1].mean() > 200 and imgs[1, ..., 2].mean() > 200
    # the default is all 36 languages: a missing one is named
    assert len(XM3600_LANGUAGES) == 36 and sorted(CLL_CLIP_ORDER) == sorted(XM3600_LANGUAGES)
    with pytest.raises(VlcpError, match=r"xm3600/ar/test\.json: not found.*data/README\.md"):
        read_xm3600(root)
    with pytest.raises(VlcpError, match=r"nope.*not found"):
        read_xm3600(tmp_path / "nope")


def test_mscoco36_english_and_translated(tmp_path):
    root = tmp_path / "mscoco36"
    rel = "val2014/COCO_val2014_000000000042.jpg"
    dump(root / "en" / "test.json", [{"image": rel, "caption": [f"en {j}" for j in range(5)], "image_id": 42}])
    dump(root / "translated" / "fr" / "test.json", [{"image": rel, "caption": [f"fr {j}" for j in range(5)],
                                                     "image_id": 42}])
    dump(root / "en" / "val.json", [{"image": rel, "caption": ["val en"], "image_id": 42}])
    image(root / "images" / rel)
    recs = read_mscoco36(root, "test", languages=["en", "fr"])
    assert [r.language for r in recs] == ["en", "fr"] and recs[1].captions[4] == "fr 4"
    assert recs[1].image == root / "images" / rel and recs[1].split == "test"
    assert read_mscoco36(root, "val", languages=["en"])[0].captions == ("val en",)
    with pytest.raises(VlcpError, match=r"translated/de/test\.json: not found"):
        read_mscoco36(root, "test", languages=["de"])


def test_triplet_tsv_gz_line_aligned(tmp_path):
    path = tmp_path / "corpus" / "triplet" / "coco_vision-en-de.tsv.gz"
    path.parent.mkdir(parents=True)
    lines = ["train2014/COCO_train2014_000000000009.jpg\tA plate of food with broccoli.\tEin Teller mit Brokkoli.",
             "train2014/COCO_train2014_000000000009.jpg\tBroccoli.\tBrokkoli.",
             "train2014/COCO_train2014_000000000025.jpg\tA giraffe.\tEine Giraffe."]
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    coco = tmp_path / "coco"
    image(coco / "train2014" / "COCO_train2014_000000000009.jpg")
    image(coco / "train2014" / "COCO_train2014_000000000025.jpg", COLOURS[3])
    recs = read_triplets(path, coco)
    assert [r.key for r in recs] == ["0", "1", "2"]  # one record per line: row i of the teacher embeddings
    assert recs[0].captions == ("Ein Teller mit Brokkoli.",)
    assert recs[0].source_caption == "A plate of food with broccoli."
    assert (recs[2].language, recs[2].task, recs[2].split) == ("de", "de", "train")
    assert recs[2].image == coco / "train2014" / "COCO_train2014_000000000025.jpg"
    assert load_images(recs, 3).shape == (3, 3, 3, 3)
    # plain-text vision_text file: two fields, language given explicitly
    vt = tmp_path / "coco_vision-fil.tsv"
    vt.write_text("train2014/COCO_train2014_000000000025.jpg\tIsang dyirap.\n", encoding="utf-8")
    r = read_triplets(vt, coco)[0]
    assert r.captions == ("Isang dyirap.",) and r.source_caption is None and r.language == "fil"
    assert read_triplets(vt, coco, language="tl")[0].language == "tl"
    vt.write_text("a.jpg\tx\ty\n" "b.jpg only-one-field\n", encoding="utf-8")
    with pytest.raises(VlcpError, match=r"coco_vision-fil\.tsv: line 2: expected .* got 1 field"):
        read_triplets(vt, coco)
    with pytest.raises(VlcpError, match=r"missing\.tsv\.gz: not found"):
        read_triplets(tmp_path / "missing.tsv.gz", coco)


# ----------------------------------------------------------------------------- webdataset pools

def encode(colour, fmt) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (10, 6), colour).save(buf, format=fmt)
    return buf.getvalue()


def test_wds_pool_shards(tmp_path):
    import webdataset as wds

    pool = tmp_path / "pools" / "cc3m"
    pool.mkdir(parents=True)
    samples = [("000000000", "png", "PNG", "a red square"), ("000000001", "jpg", "JPEG", "a green field"),
               ("000010000", "webp", "WEBP", "blue sky"), ("000010001", "jpeg", "JPEG", "yellow")]
    for shard, part in (("00000.tar", samples[:2]), ("00001.tar", samples[2:])):
        with wds.TarWriter(str(pool / shard)) as w:
            for (key, ext, fmt, txt), c in zip(part, COLOURS[:2] if shard == "00000.tar" else COLOURS[2:]):
                w.write({"__key__": key, ext: encode(c, fmt), "txt": txt, "json": {"key": key}})
    (pool / "notes.txt").write_text("not a shard")
    assert [p.name for p in list_shards(pool)] == ["00000.tar", "00001.tar"]
    recs = read_wds(pool)
    assert [r.key for r in recs] == ["000000000", "000000001", "000010000", "000010001"]
    assert [r.captions for r in recs] == [("a red square",), ("a green field",), ("blue sky",), ("yellow",)]
    assert isinstance(recs[0].image, bytes) and recs[0].split == "train" and recs[0].label is None
    imgs = load_images(recs, 4)
    assert imgs.shape == (4, 4, 4, 3)
    assert imgs[0, ..., 0].min() == 255 and imgs[0, ..., 1].max() == 0  # PNG is lossless
    assert imgs[2, ..., 2].mean() > 200 and imgs[3, ..., :2].mean() > 200
    assert [r.key for r in read_wds(pool, limit=3)] == ["000000000", "000000001", "000010000"]
    assert [r.key for r in iter_wds([pool / "00001.tar"])] == ["000010000", "000010001"]
    # lazy: the same records from the tar headers, each image a byte range read on access
    lazy = read_wds(pool, lazy=True)
    assert [(r.key, r.captions) for r in lazy] == [(r.key, r.captions) for r in recs]
    assert all(isinstance(r.image, ShardMember) for r in lazy) and [r.image.read() for r in lazy] == [r.image for r in recs]
    assert (load_images(lazy, 4) == imgs).all() and [r.key for r in read_wds(pool, limit=3, lazy=True)] == ["000000000", "000000001", "000010000"]


def test_wds_errors(tmp_path):
    with pytest.raises(VlcpError, match=r"laion.*not found.*data/README\.md"):
        list_shards(tmp_path / "laion")
    (tmp_path / "empty").mkdir()
    with pytest.raises(VlcpError, match=r"empty: no webdataset shards"):
        list_shards(tmp_path / "empty")
    shard = tmp_path / "pool" / "00000.tar"
    shard.parent.mkdir()
    with tarfile.open(shard, "w") as tf:  # written with tarfile: a sample without caption
        for name, data in (("a.jpg", encode(COLOURS[0], "JPEG")), ("a.txt", b"ok"),
                           ("b.jpg", encode(COLOURS[1], "JPEG"))):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    for lazy in (False, True):
        with pytest.raises(VlcpError, match=r"00000\.tar: sample 'b' has no 'txt' caption"):
            read_wds(shard.parent, lazy=lazy)
        assert [r.key for r in read_wds(shard.parent, skip_incomplete=True, lazy=lazy)] == ["a"]
    with tarfile.open(shard, "w") as tf:  # a key twice with the same extension
        for name, data in (("a.jpg", encode(COLOURS[0], "JPEG")), ("a.jpg", encode(COLOURS[1], "JPEG")), ("a.txt", b"x")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    with pytest.raises(VlcpError, match=r"00000\.tar: sample 'a' has two 'jpg' members"):
        read_wds(shard.parent, lazy=True)
    shard.write_bytes(b"this is not a tar archive" * 40)
    for lazy in (False, True):
        with pytest.raises(VlcpError, match=r"00000\.tar: not a readable webdataset shard"):
            read_wds(shard.parent, lazy=lazy)
    bad = Record(image=b"not an image", captions=("x",), split="train", key="k1")
    with pytest.raises(VlcpError, match="k1: not a readable image"):
        load_images([bad], 4)


# ----------------------------------------------------------------------------- FoMo-in-Flux info dicts

def fomo(root: Path) -> Path:
    dump(root / "00_info" / "DTD_classnames.json", ["banded", "dotted"])
    dump(root / "00_info" / "DTD_train.json", {
        "images/banded/banded_0002.jpg": {
            "classname": "banded", "default_caption": None, "primer_caption": "A photo of a banded texture.",
            "synthetic_caption": ["stripes"], "synthetic_merged_caption": ["A banded texture with stripes.",
                                                                           "Stripes: a banded texture."],
            "target": 0},
        "images/dotted/dotted_0001.jpg": {
            "classname": "dotted", "default_caption": None, "primer_caption": "A photo of a dotted texture.",
            "synthetic_caption": None, "synthetic_merged_caption": "A dotted texture.", "target": 1},
        "images/dotted/dotted_0007.jpg": {
            "classname": "dotted", "default_caption": ["Real caption one.", "Real caption two."],
            "primer_caption": "A photo of a dotted texture.", "synthetic_caption": None,
            "synthetic_merged_caption": None, "target": 1},
    })
    dump(root / "00_info" / "DTD_test.json", {
        "images/banded/banded_0009.jpg": {
            "classname": "banded", "default_caption": None, "primer_caption": "A photo of a banded texture.",
            "synthetic_caption": None, "synthetic_merged_caption": None, "target": 0}})
    for k, c in (("banded/banded_0002.jpg", 0), ("dotted/dotted_0001.jpg", 1), ("dotted/dotted_0007.jpg", 2),
                 ("banded/banded_0009.jpg", 3)):
        image(root / "DTD" / "images" / k, COLOURS[c])
    return root


def test_fomo_info_dicts_and_stream_tasks(tmp_path):
    root = fomo(tmp_path / "fomo")
    assert read_fomo_classnames(root, "DTD") == ["banded", "dotted"]
    recs = read_fomo_info(root, "DTD", "train")
    assert [r.key for r in recs] == ["images/banded/banded_0002.jpg", "images/dotted/dotted_0001.jpg",
                                     "images/dotted/dotted_0007.jpg"]
    assert [r.label for r in recs] == [0, 1, 1] and [r.classname for r in recs] == ["banded", "dotted", "dotted"]
    # default_caption first, else synthetic_merged_caption (list or string)
    assert recs[0].captions == ("A banded texture with stripes.", "Stripes: a banded texture.")
    assert recs[1].captions == ("A dotted texture.",)
    assert recs[2].captions == ("Real caption one.", "Real caption two.")
    assert recs[0].image == root / "DTD" / "images" / "banded" / "banded_0002.jpg" and recs[0].split == "train"
    test = read_fomo_info(root, "DTD", "test")
    assert test[0].captions == ("A photo of a banded texture.",)  # primer caption as last resort
    # a dataset without a test split is evaluated on val; iNaturalist's train split is train_mini
    (root / "00_info" / "DTD_test.json").rename(root / "00_info" / "DTD_val.json")
    (root / "00_info" / "DTD_train.json").rename(root / "00_info" / "DTD_train_mini.json")
    assert [r.key for r in read_fomo_info(root, "DTD", "test")] == [test[0].key]
    assert [r.key for r in read_fomo_info(root, "DTD", "train")] == [r.key for r in recs]
    assert read_fomo_template(root, "DTD") == "A photo of a {} texture."
    (root / "00_info" / "DTD_val.json").rename(root / "00_info" / "DTD_test.json")
    # tasks from a FoMo stream file, read with the existing concepts reader
    write_stream(tmp_path / "stream.json", [Concept("dtd", "dotted"), Concept("CUB200", "Laysan Albatross"),
                                            Concept("DTD", "banded")])
    tasks = cut_tasks(read_stream(tmp_path / "stream.json"), 2)
    assert stream_task_ids(recs, "DTD", tasks) == [1, 0, 0]
    assert stream_task_ids(recs, "CUB200", tasks) == [-1, -1, -1]
    ps = to_pairset([replace(r, task=f"t{t}") for r, t in
                     zip(recs, stream_task_ids(recs, "DTD", tasks))], 6)
    assert ps.images.shape == (3, 6, 6, 3) and ps.labels.tolist() == [0, 1, 1]
    assert ps.tasks.tolist() == [0, 1, 1] and ps.items.tolist() == [0, 1, 2]  # t1 (banded) appears first


def test_fomo_info_errors(tmp_path):
    with pytest.raises(VlcpError, match=r"fomo.*not found.*data/README\.md"):
        read_fomo_info(tmp_path / "fomo", "DTD")
    root = fomo(tmp_path / "fomo")
    with pytest.raises(VlcpError, match=r"00_info/CARS196_train\.json: not found.*CARS196_train_mini\.json"):
        read_fomo_info(root, "CARS196")
    path = dump(root / "00_info" / "DTD_train.json", {"images/a.jpg": {"classname": "banded", "target": "0",
                                                                        "primer_caption": "p"}})
    with pytest.raises(VlcpError, match=r"DTD_train\.json: entry 'images/a\.jpg': field 'target'"):
        read_fomo_info(root, "DTD")
    dump(path, {"images/a.jpg": {"classname": "banded", "target": 0, "default_caption": 5}})
    with pytest.raises(VlcpError, match=r"entry 'images/a\.jpg': field 'default_caption'"):
        read_fomo_info(root, "DTD")
    dump(path, {"images/a.jpg": {"classname": "banded", "target": 0}})
    with pytest.raises(VlcpError, match=r"entry 'images/a\.jpg': no caption"):
        read_fomo_info(root, "DTD")
    dump(path, {"images/a.jpg": {"classname": "banded", "target": 0, "primer_caption": "p"}})
    with pytest.raises(VlcpError, match=r"images/a\.jpg: image file not found.*data/README\.md"):
        load_images(read_fomo_info(root, "DTD"), 4)
    dump(root / "00_info" / "DTD_classnames.json", {"0": "banded"})
    with pytest.raises(VlcpError, match=r"DTD_classnames\.json: expected a JSON list"):
        read_fomo_classnames(root, "DTD")


# ----------------------------------------------------------------------------- PairSet

def test_to_pairset_p9d_tasks_and_classes(tmp_path):
    recs = read_p9d_train(p9d(tmp_path / "p9d"))
    ps = to_pairset(recs, 4, tasks=["母婴", "家居用品"])
    assert ps.tasks.tolist() == [0, 1, 1] and ps.items.tolist() == [2, 0, 1]
    assert ps.labels.tolist() == [0, 1, 2]  # class names by first appearance among the kept records
    assert ps.texts == ["儿童防晒衣夏季薄款", "北欧简约陶瓷马克杯", "收纳盒"] and ps.captions[0] == ["儿童防晒衣夏季薄款"]
    assert ps.images.shape == (3, 4, 4, 3) and ps.image_text.tolist() == [0, 1, 2]
    assert len(to_pairset(recs, 4, tasks=["母婴"])) == 1
    with pytest.raises(VlcpError, match="image_size"):
        load_images(recs, 0)


# ----------------------------------------------------------------------------- damaged files: one line naming the file

def _triplets(tmp_path):
    path = tmp_path / "corpus" / "coco_vision-en-de.tsv.gz"
    path.parent.mkdir(parents=True)
    (tmp_path / "coco").mkdir()
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("".join(f"train2014/{i}.jpg\tcaption {i} with some words\tBildunterschrift {i}\n" for i in range(400)))
    return path, lambda: read_triplets(path, tmp_path / "coco")


def _wds(tmp_path):
    import webdataset as wds

    pool = tmp_path / "pool"
    pool.mkdir()
    with wds.TarWriter(str(pool / "00000.tar")) as w:
        for i in range(20):
            w.write({"__key__": f"{i:09d}", "png": encode(COLOURS[i % 4], "PNG"), "txt": f"sample {i}"})
    return pool / "00000.tar", lambda: load_images(read_wds(pool), 4)


def _xm3600(tmp_path):
    root = tmp_path / "xm3600"
    dump(root / "de" / "test.json", [{"image": "a.jpg", "caption": "Ein Hund", "image_id": 0}])
    image(root / "images" / "a.jpg")
    return root / "de" / "test.json", lambda: read_xm3600(root, languages=["de"])


READERS = {   # reader -> (fixture in its format) -> (the file to damage, a call that reads it)
    "p9d-train": lambda t: (p9d(t / "p9d") / "json" / "train.json", lambda: read_p9d_train(t / "p9d")),
    "p9d-eval": lambda t: (p9d(t / "p9d") / "json" / "test.json", lambda: read_p9d_eval(t / "p9d", "test")),
    "p9d-image": lambda t: (p9d(t / "p9d") / "train_images" / "600000000001.jpg",
                            lambda: load_images(read_p9d_train(t / "p9d"), 4)),
    "karpathy": lambda t: (dump(t / "coco" / "dataset_coco.json", {"images": [karpathy_entry(0, "test", "a.jpg", "val")]}),
                           lambda: read_coco_karpathy(t / "coco")),
    "caption-rows": lambda t: (dump(t / "rows.json", [{"image": "a.jpg", "caption": "c"}]),
                               lambda: read_caption_rows(t / "rows.json", t, "train")),
    "xm3600": _xm3600,
    "triplets": _triplets,
    "wds": _wds,
    "fomo-info": lambda t: (fomo(t / "fomo") / "00_info" / "DTD_train.json", lambda: read_fomo_info(t / "fomo", "DTD")),
    "fomo-classnames": lambda t: (fomo(t / "fomo") / "00_info" / "DTD_classnames.json",
                                  lambda: read_fomo_classnames(t / "fomo", "DTD")),
    "fomo-image": lambda t: (fomo(t / "fomo") / "DTD" / "images" / "banded" / "banded_0002.jpg",
                             lambda: load_images(read_fomo_info(t / "fomo", "DTD"), 4)),
    "stream": lambda t: (write_stream(t / "stream.json", [Concept("DTD", "banded"), Concept("DTD", "dotted")]) or
                         t / "stream.json", lambda: read_stream(t / "stream.json")),
}


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        mid = len(data) // 3
        path.write_bytes(data[:mid] + bytes(range(256)) * 4 + data[mid + 1024:])
    elif how == "missing":
        path.unlink()


@pytest.mark.parametrize("how", ["truncated", "empty", "garbage", "missing"])
@pytest.mark.parametrize("reader", sorted(READERS))
def test_damaged_file_is_one_error_naming_it(tmp_path, reader, how):
    """Every real-format reader, on each damage to its file: a VlcpError whose message names the
    file (the CLI prints it as one line), or (a truncation a format cannot see) records that still
    read; never another exception."""
    path, read = READERS[reader](tmp_path)
    read()                                          # the intact fixture reads
    _damage(path, how)
    try:
        read()
    except VlcpError as e:
        named = path.name if how != "missing" or reader != "wds" else path.parent.name   # no shard left: the pool
        assert named in str(e), str(e)
        return
    assert how in ("truncated", "garbage") and reader in ("wds", "triplets", "p9d-image", "fomo-image"), \
        f"{reader}: {how} file read without an error"
