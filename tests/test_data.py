"""The embedded emoji benchmark: structure, splits, captions, determinism, CLDR table."""
import json

import numpy as np

from vlcp.config import DataCfg
from vlcp.data.benchmark import EmojiBenchmark
from vlcp.data.cldr import load_cldr
from vlcp.data.emoji import prepare_emoji, split_items
from vlcp.data.emoji_test import parse_emoji_test

SAMPLE = """# group: Smileys & Emotion
# subgroup: face-smiling
1F600 ; fully-qualified # 😀 E1.0 grinning face
263A FE0F ; fully-qualified # ☺️ E0.6 smiling face
263A ; unqualified # ☺ E0.6 smiling face
# group: People & Body
# subgroup: hand-fingers-open
1F44B 1F3FB ; fully-qualified # 👋🏻 E1.0 waving hand: light skin tone
1F44B ; fully-qualified # 👋 E0.6 waving hand
# group: Component
# subgroup: skin-tone
1F3FB ; fully-qualified # 🏻 E1.0 light skin tone
"""


def test_parse_emoji_test():
    rows = parse_emoji_test(SAMPLE)
    assert [r.name for r in rows] == ["grinning face", "smiling face", "waving hand"]
    assert rows[1].char == "\u263a\ufe0f" and rows[1].key == "\u263a" and rows[1].version == 0.6
    assert rows[2].group == "People & Body" and rows[2].subgroup == "hand-fingers-open"


def test_prepared_benchmark_structure(emoji_root):
    meta = json.loads((emoji_root / "meta.json").read_text())
    assert meta["groups"] == ["Smileys & Emotion", "People & Body", "Animals & Nature", "Food & Drink",
                              "Travel & Places", "Activities", "Objects", "Symbols", "Flags"]
    assert len(meta["subgroups"]) == 98
    items = meta["items"]
    assert len(items) > 1850 and all(it["version"] <= 15.1 for it in items)
    assert {"twemoji", "noto-mono", "openmoji"} <= set(meta["styles"])
    with np.load(emoji_root / "images.npz") as z:
        for s in meta["styles"]:
            assert z[s].shape == (len(items), 32, 32, 3) and z[s].dtype == np.uint8
            assert ((z[s].reshape(len(items), -1) < 245).sum(1) > 100).all()  # no blank renders
    splits = {s: sum(it["split"] == s for it in items) for s in ("train", "val", "test", "query")}
    assert splits["test"] > 200 and splits["query"] > 100 and splits["train"] > 1200
    # every subgroup keeps training items
    assert {it["subgroup"] for it in items if it["split"] == "train"} == set(meta["subgroups"])
    dog = next(it for it in items if it["name"] == "dog face")
    assert dog["captions"][0].startswith("an emoji of dog face (animal mammal)")
    assert len(dog["captions"]) == 8 and len(set(dog["captions"])) > 4


def test_captions_fit_the_context(emoji_root):
    import open_clip

    meta = json.loads((emoji_root / "meta.json").read_text())
    tok = open_clip.tokenize([c for it in meta["items"] for c in it["captions"]], context_length=77)
    lengths = (tok != 0).sum(1)
    assert lengths.max() <= 40 and lengths.float().mean() < 20


def test_splits_are_deterministic_and_disjoint():
    cfg = DataCfg(seed=7)
    subgroups = {"a": list(range(20)), "b": list(range(20, 23)), "c": [23]}
    s1, s2 = split_items(subgroups, cfg), split_items(subgroups, cfg)
    assert s1 == s2 and sorted(s1) == list(range(24))
    assert [s1[i] for i in range(20)].count("test") == 3  # round(0.15 * 20)
    assert s1[23] == "train"
    assert split_items(subgroups, DataCfg(seed=8)) != s1


def test_prepare_is_deterministic(tmp_path, emoji_root):
    cfg = DataCfg(root=str(tmp_path / "e"), styles=["twemoji"], train_styles=["twemoji"], unseen_styles=[],
                  max_version=1.0)
    a = prepare_emoji(cfg, tmp_path / "a", progress=False)
    b = prepare_emoji(cfg, tmp_path / "b", progress=False)
    a.pop("build_seconds"), b.pop("build_seconds")
    assert a == b
    with np.load(tmp_path / "a" / "images.npz") as za, np.load(tmp_path / "b" / "images.npz") as zb:
        assert np.array_equal(za["twemoji"], zb["twemoji"])


def test_pair_sets(emoji_root):
    cfg = DataCfg(root=str(emoji_root), tasks=["Activities", "Flags"])
    bench = EmojiBenchmark(emoji_root, cfg)
    assert bench.task_names == ["Activities", "Flags"]
    test = bench.pairs("test", ["twemoji", "noto-mono"])
    assert len(test) == 2 * len(test.texts)  # one image per style
    assert set(test.tasks.tolist()) == {0, 1}
    sub = test.of_tasks([1])
    assert set(sub.tasks.tolist()) == {1} and len(sub) == 2 * len(sub.texts)
    assert all("flag" in t for t in sub.texts)
    rev = EmojiBenchmark(emoji_root, DataCfg(root=str(emoji_root), tasks=["Activities", "Flags"], reverse=True))
    assert rev.task_names == ["Flags", "Activities"]


def test_cldr_table_has_the_36_xm3600_languages():
    table = load_cldr()
    assert len(table) == 36 and {"en", "sw", "fil", "he", "qu", "mi", "zh"} <= set(table)
    assert table["en"]["\U0001F436"].name == "dog face"
    assert "dog" in table["en"]["\U0001F436"].keywords
    assert len(table["ja"]) > 1800
