"""The runners on a real dataset's format (`data.benchmark: p9d`, `vlcp.data.real`): a tiny P9D
written here in its layout (nested train.json by industry, flat test/query/gallery files,
`{item_id}.jpg` images), read, cut into industry tasks and trained on end to end."""
import json
from pathlib import Path

import pytest
import torch
from PIL import Image

from vlcp.config import DataCfg, experiment_from_dict
from vlcp.data.formats import ImageFiles
from vlcp.data.load import load_benchmark
from vlcp.data.real import pre_caption
from vlcp.errors import ConfigError, VlcpError
from vlcp.run import run_experiment

# three industries (CTP's order: Household, Food, Parenting), two categories each, one colour per category
CATEGORIES = {"家居用品": [("马克杯", (200, 30, 30)), ("收纳", (30, 200, 30))],
              "食品/保健": [("茶叶", (30, 30, 200)), ("坚果", (200, 200, 30))],
              "母婴": [("防晒衣", (200, 30, 200)), ("奶瓶", (30, 200, 200))]}


def write_p9d(root: Path, per_category: int = 6) -> Path:
    """P9D's layout with `per_category` training items per category, 1 test, 1 query and 2 gallery items."""
    (root / "json").mkdir(parents=True)
    train, flat = {}, {"test": {}, "query": {}, "gallery": {}}
    n = 0
    for industry, cats in CATEGORIES.items():
        train[industry] = {}
        for cate, colour in cats:
            for split, count in (("train", per_category), ("test", 1), ("query", 1), ("gallery", 2)):
                for _ in range(count):
                    n += 1
                    key = f"6{n:011d}"
                    info = {"title": f"{cate} Item #{n}!", "cate_name": cate, "image_link": f"https://x/{key}.jpg"}
                    if split == "train":
                        train[industry][key] = info
                    else:
                        flat[split][key] = {**info, "industry_name": industry}
                    folder = root / ("train_images" if split == "train" else "gallery_images")
                    folder.mkdir(exist_ok=True)
                    shade = tuple(min(255, c + 3 * (n % 8)) for c in colour)
                    Image.new("RGB", (24, 16), shade).save(folder / f"{key}.jpg")
    (root / "json" / "train.json").write_text(json.dumps(train, ensure_ascii=False), encoding="utf-8")
    for split, items in flat.items():
        (root / "json" / f"{split}.json").write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def p9d_root(tmp_path_factory):
    return write_p9d(tmp_path_factory.mktemp("data") / "p9d")


def p9d_data(root, **kw) -> DataCfg:
    return DataCfg(benchmark="p9d", root=str(root), image_size=16, unseen_styles=[], **kw)


def test_pre_caption_is_ctps_cleaning():
    assert pre_caption('Red "Mug"; (BIG)  cup~ #1!') == "red mug big cup 1"
    assert pre_caption("a b c d", max_words=2) == "a b"
    assert pre_caption("北欧简约陶瓷马克杯") == "北欧简约陶瓷马克杯"


def test_image_files_decode_on_access(p9d_root):
    paths = sorted((p9d_root / "train_images").glob("*.jpg"))[:5]
    lazy = ImageFiles(paths, 16, workers=3)
    assert lazy.shape == (5, 16, 16, 3) and len(lazy) == 5
    batch = lazy[torch.tensor([4, 0, 4])]
    assert batch.dtype == torch.uint8 and batch.shape == (3, 16, 16, 3)
    assert torch.equal(batch[0], batch[2]) and torch.equal(batch, ImageFiles(paths, 16, workers=1)[[4, 0, 4]])
    assert torch.equal(lazy[1:3], lazy[torch.tensor([1, 2])])
    sub = lazy.subset(torch.tensor([False, True, False, True, False]))
    assert isinstance(sub, ImageFiles) and torch.equal(sub[:], lazy[[1, 3]])
    with pytest.raises(VlcpError, match="nowhere.jpg"):
        ImageFiles([p9d_root / "nowhere.jpg"], 16)[[0]]


def test_p9d_benchmark_tasks_classes_and_splits(p9d_root):
    bench = load_benchmark(p9d_data(p9d_root))
    assert bench.task_names == ["Household", "Food", "Parenting"]          # CTP's order, in English
    train = bench.pairs("train", ["twemoji"])                               # styles do not apply: one image an item
    assert isinstance(train.images, ImageFiles) and len(train) == 36
    assert train.tasks.tolist() == [0] * 12 + [1] * 12 + [2] * 12
    assert train.captions[0] == ["马克杯 item 1"]                           # CTP's caption cleaning
    assert [bench.class_names[c] for c in train.labels[::6].tolist()] == ["马克杯", "收纳", "茶叶", "坚果", "防晒衣", "奶瓶"]
    assert bench.gallery_split == "gallery" and len(bench.pairs("gallery", [])) == 12
    test = bench.pairs("test", [])
    seen = test.of_tasks([0, 1])
    assert isinstance(seen.images, ImageFiles) and len(seen) == 4           # still lazy after selecting tasks
    red = seen.images[[0]][0].float().mean((0, 1))
    assert red[0] > 150 and red[1] < 80                                     # Household's mug is red
    rev = load_benchmark(p9d_data(p9d_root, reverse=True, tasks=["Parenting", "Household"]))
    assert rev.task_names == ["Household", "Parenting"] and len(rev.pairs("train", [])) == 24


def test_p9d_config_and_missing_data_errors(tmp_path):
    with pytest.raises(ConfigError, match="unseen_styles"):
        DataCfg(benchmark="p9d", root=str(tmp_path))
    with pytest.raises(ConfigError, match="stream"):
        DataCfg(benchmark="p9d", root=str(tmp_path), unseen_styles=[], stream="instance", num_tasks=2)
    with pytest.raises(VlcpError, match=r"nowhere.*data/README.md"):
        load_benchmark(p9d_data(tmp_path / "nowhere"))
    root = write_p9d(tmp_path / "p9d", per_category=1)
    with pytest.raises(VlcpError, match="data.tasks: unknown task 'Toys'"):
        load_benchmark(p9d_data(root, tasks=["Toys"]))


def p9d_experiment(root, method: str, transform: str = "shift", **args):
    return experiment_from_dict({
        "name": f"p9d-{method}", "seed": 0,
        "data": {"benchmark": "p9d", "root": str(root), "image_size": 16, "unseen_styles": [], "workers": 2,
                 "transform": transform},
        "model": {"name": "albef-tiny"}, "method": {"name": method, **args},
        "train": {"steps": 9, "batch_size": 8, "progress": False, "device": "cpu", "num_threads": 1},
        "eval": {"batch_size": 64},
    })


@pytest.mark.parametrize("method,args", [("ctp", {"queue_size": 16, "transform": "ctp"}), ("er", {"buffer_size": 6})])
def test_ctp_study_runs_on_p9d(p9d_root, tmp_path, method, args):
    """CTP (queues, compatible momentum model, topology; CTP's crop/flip/RandAugment) and a buffer
    method train on the P9D layout's industries with the runner of the emoji study, and evaluate
    on its test split (cross-modal) and its query vs gallery files (multi-modal, positives = same category)."""
    cfg = p9d_experiment(p9d_root, method, **args)
    assert load_benchmark(cfg.data).images.squash == (method == "ctp")   # CTP's test transform
    res = run_experiment(cfg, tmp_path / method)
    assert res["tasks"] == ["Household", "Food", "Parenting"] and res["task_sizes"] == [12, 12, 12]
    assert len(res["cumulative"]) == 3 and set(res["matrix"]) == {"test"}
    last = res["cumulative"][-1]["test"]
    assert {"Rm", "mAP@1", "mAP_std@10"} <= set(last)
    assert 0 <= last["mAP@1"] <= 100 and len(res["matrix"]["test"]["TR@1"][-1]) == 3
    assert (tmp_path / method / "results.json").exists()


def test_prepare_refuses_a_real_dataset(tmp_path):
    import subprocess
    import sys

    import yaml

    from vlcp.config import load_params
    params = load_params("params.yaml")
    params["defaults"]["data"].update(benchmark="p9d", root=str(tmp_path / "p9d"), unseen_styles=[])
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    r = subprocess.run([sys.executable, "-m", "vlcp", "data", "prepare", "--params", str(tmp_path / "params.yaml")],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "does not download or prepare it" in r.stderr and "data/README.md" in r.stderr
    assert not (tmp_path / "p9d").exists()


def test_paper_profile_brings_p9d_with_the_ctp_model(paper_experiments):
    """The `paper` profile's `albef` alias carries its dataset: every CTP-study experiment (and
    only those) trains on P9D at 224 px with CTP's hyperparameters."""
    for name, cfg in paper_experiments.items():
        assert (cfg.data.benchmark == "p9d") == (cfg.model.name == "albef-base"), name
    cfg = paper_experiments["ctp-rev-ctp"]
    assert (cfg.data.root, cfg.data.image_size, cfg.data.reverse, cfg.data.transform) == ("data/p9d", 224, True, "ctp")
    assert (cfg.train.batch_size, cfg.train.lr, cfg.train.warmup_steps, cfg.train.weight_decay) == (512, 1e-4, 0, 0.05)


def test_paper_profile_trains_incclip_with_lamb(paper_experiments):
    """The `paper` profile's IncCLIP experiments (RN50 from scratch) take the paper's optimizer:
    LAMB, lr 3e-3, weight decay 3e-3, 8 GPUs x 512."""
    ic = {n: c for n, c in paper_experiments.items() if c.model.name == "RN50"}
    assert "ic4-incclip" in ic and "ici-er" in ic
    for name, cfg in ic.items():
        assert (cfg.train.optimizer, cfg.train.lr, cfg.train.weight_decay, cfg.train.batch_size) == \
            ("lamb", 0.003, 0.003, 4096), name
        assert cfg.model.pretrained is None, name
    assert all(c.train.optimizer == "adamw" for n, c in paper_experiments.items() if n not in ic)


def test_language_stream_refuses_compile(tmp_path):
    from vlcp.config import experiment_from_dict
    cfg = experiment_from_dict({"data": {"stream": "language"}, "method": {"name": "cllclip"},
                                "train": {"compile": "default"}})
    with pytest.raises(ConfigError, match="train.compile: the language stream"):
        run_experiment(cfg, tmp_path)
