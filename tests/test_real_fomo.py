"""The FoMo-in-Flux runner on FoMo's own data formats (`data.benchmark: fomo`): per-dataset info dicts
(`00_info/<NAME>_{train,test}.json`, `<NAME>_classnames.json`), images under `<NAME>/`, a webdataset
pool, FoMo's `DATASET+++class` stream files, written here in their layouts and trained on end to end."""
import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from vlcp.config import experiment_from_dict
from vlcp.data import concepts as cs
from vlcp.data.fomo import subset_mask
from vlcp.data.load import load_fomo_data
from vlcp.errors import ConfigError, VlcpError
from vlcp.run import run_experiment

# name -> (primer, classes, training images per class); FLOWERS and MSCOCO are eval-only
DATASETS = {"DTD": ("A photo of a {} texture.", ["banded", "dotted", "striped"], 3),
            "CARS": ("A photo of a {}, a type of car.", ["sedan", "pickup"], 3),
            "FLOWERS": ("A photo of a {}, a type of flower.", ["rose", "tulip"], 0)}
SHADES = [(200, 40, 40), (40, 200, 40), (40, 40, 200), (200, 200, 40), (200, 40, 200)]


def jpeg(colour) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (18, 12), colour).save(buf, "JPEG")
    return buf.getvalue()


def write_fomo(root: Path) -> tuple[Path, Path]:
    info = root / "00_info"
    info.mkdir(parents=True)
    for name, (primer, classes, per_class) in DATASETS.items():
        (info / f"{name}_classnames.json").write_text(json.dumps(classes))
        for split, n in (("train", per_class), ("test", 2)):
            if not n:
                continue
            entries = {}
            for y, c in enumerate(classes):
                for k in range(n):
                    key = f"{split}/{c}_{k}.jpg"
                    (root / name / key).parent.mkdir(parents=True, exist_ok=True)
                    (root / name / key).write_bytes(jpeg(SHADES[(y + k) % 5]))
                    entries[key] = {"classname": c, "default_caption": None, "primer_caption": primer.format(c),
                                    "synthetic_caption": None, "synthetic_merged_caption": [f"{c} number {k}", f"a {c}"],
                                    "target": y}
            (info / f"{name}_{split}.json").write_text(json.dumps(entries))
    entries = {}
    for k in range(3):   # a retrieval set: real captions, no class
        (root / "MSCOCO" / f"{k}.jpg").parent.mkdir(parents=True, exist_ok=True)
        (root / "MSCOCO" / f"{k}.jpg").write_bytes(jpeg(SHADES[k]))
        entries[f"{k}.jpg"] = {"classname": None, "default_caption": [f"scene {k}", f"view {k}"], "primer_caption": "",
                               "synthetic_caption": None, "synthetic_merged_caption": None, "target": None}
    (info / "MSCOCO_test.json").write_text(json.dumps(entries))
    # FSCOCO as FoMo ships it: an adaptation dataset scored by retrieval; one caption as a string,
    # no primer, keys under fscoco/raster_sketches/<user>/, a class noun picked from the caption
    (info / "FSCOCO_classnames.json").write_text(json.dumps(["cow", "zebra"]))
    for split, users in (("train", (1, 2)), ("test", (3,))):
        entries = {}
        for u in users:
            for y, c in enumerate(["cow", "zebra"]):
                key = f"fscoco/raster_sketches/{u}/00000{u}{y}.jpg"
                (root / "FSCOCO" / key).parent.mkdir(parents=True, exist_ok=True)
                (root / "FSCOCO" / key).write_bytes(jpeg(SHADES[u + y]))
                entries[key] = {"classname": c, "default_caption": f"A sketch of {u} {c}s on the grass.",
                                "primer_caption": None, "synthetic_caption": None, "synthetic_merged_caption": None,
                                "target": y}
        (info / f"FSCOCO_{split}.json").write_text(json.dumps(entries))
    pool = root.parent / "pools" / "laion"
    pool.mkdir(parents=True)
    with tarfile.open(pool / "00000.tar", "w") as tf:
        for k in range(12):
            for ext, data in (("jpg", jpeg(SHADES[k % 5])), ("txt", f"a web photo of a striped thing {k}".encode())):
                ti = tarfile.TarInfo(f"{k:05d}.{ext}")
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
    return root, pool


@pytest.fixture(scope="module")
def fomo_dirs(tmp_path_factory):
    return write_fomo(tmp_path_factory.mktemp("data") / "fomo")


def experiment(root, pool, method="seqf", transform="shift", **fomo):
    return experiment_from_dict({
        "name": f"fomo-real-{method}", "seed": 0,
        "data": {"benchmark": "fomo", "root": str(root), "stream": "concepts", "unseen_styles": [], "image_size": 16,
                 "workers": 2, "transform": transform},
        "model": {"name": "vlcp-tiny"}, "method": {"name": method},
        "fomo": {"datasets": ["DTD", "CARS"], "retention": ["FLOWERS"], "retrieval": ["MSCOCO"],
                 "pool_root": str(pool), "pool_size": 10, "num_tasks": 2, "steps_per_task": 2, **fomo},
        "train": {"batch_size": 8, "progress": False, "device": "cpu", "num_threads": 1},
        "eval": {"batch_size": 64}})


def test_fomo_data_from_info_dicts(fomo_dirs):
    """Concepts are (dataset, class) of the adaptation datasets' training splits; P is the first
    `pool_size` pool pairs; templates are the datasets' primers; every test split is evaluated."""
    root, pool = fomo_dirs
    data = load_fomo_data(experiment(root, pool))
    assert [cs.format_entry(c) for c in data.concepts] == ["DTD+++banded", "DTD+++dotted", "DTD+++striped",
                                                           "CARS+++sedan", "CARS+++pickup"]
    assert len(data.pool) == 10 and len(data.train) == 10 + 15
    assert [len(i) for i in data.concept_images] == [3] * 5 and int(data.concept_images[0][0]) == 10
    assert data.train.captions[10] == ["banded number 0", "a banded"] and data.train.texts[0].startswith("a web photo")
    assert data.templates == {"DTD": "A photo of a {} texture.", "CARS": "A photo of a {}, a type of car."}
    assert data.frequency[2] > 0 == data.frequency[0]   # "striped" is in the pool's captions, "banded" is not
    sets = {s.name: s for s in data.eval_sets}
    assert {n: s.role for n, s in sets.items()} == {"DTD": "adaptation", "CARS": "adaptation",
                                                    "FLOWERS": "retention", "MSCOCO": "retention"}
    assert sets["FLOWERS"].classes == ["rose", "tulip"] and sets["FLOWERS"].labels.tolist() == [0, 0, 1, 1]
    assert sets["FLOWERS"].template == "A photo of a {}, a type of flower." and sets["DTD"].images[:2].shape == (2, 16, 16, 3)
    coco = sets["MSCOCO"].pairs   # every caption is a text of its image
    assert coco.texts == ["scene 0", "view 0", "scene 1", "view 1", "scene 2", "view 2"]
    assert coco.items.tolist() == [0, 0, 1, 1, 2, 2] and coco.image_text.tolist() == [0, 2, 4]


def test_fomo_runs_on_info_dicts_and_fomo_streams(fomo_dirs, tmp_path):
    """Full fine-tuning streams the concepts of FoMo's own stream-file format (all 41 datasets'
    entries, handles in either case: this run's are kept, in the file's order) under the P/D/B
    mixture with FoMo's random-resized-crop augmentation, and is evaluated after every task on the
    adaptation and retention sets."""
    root, pool = fomo_dirs
    order = ["FOOD101+++pizza", "cars+++pickup", "DTD+++striped", "DTD+++banded", "CARS+++sedan", "DTD+++dotted"]
    stream = tmp_path / "random_sequence_1.json"
    stream.write_text(json.dumps(order))
    res = run_experiment(experiment(root, pool, transform="fomo", stream_file=str(stream)), tmp_path / "run")
    assert res["stream"] == ["CARS+++pickup", "DTD+++striped", "DTD+++banded", "CARS+++sedan", "DTD+++dotted"]
    assert res["task_sizes"] == [9, 6] and len(res["trajectory"]) == 2
    last = res["trajectory"][-1]
    assert set(last["datasets"]) == {"DTD", "CARS", "FLOWERS", "MSCOCO"}
    assert 0 <= last["A_KA"] <= 100 and 0 <= last["A_ZS"] <= 100 and (tmp_path / "run" / "results.json").exists()
    res = run_experiment(experiment(root, pool, method="lora", ordering="frequency"), tmp_path / "lora")
    assert res["stream"][-1] == "DTD+++striped" and len(res["trajectory"]) == 2   # the pool's most frequent class name comes last


def test_fscoco_streams_its_classes_and_scores_retrieval_in_a_ka(fomo_dirs, tmp_path):
    """FSCOCO, FoMo's 41st adaptation dataset: its sketches train as concepts of its class nouns
    (prompts with FoMo's "A sketch of a {}"), and its test split counts in A_KA by R@5 over its
    captions (FoMo's type: retrieval), not by zero-shot accuracy."""
    root, pool = fomo_dirs
    cfg = experiment(root, pool, datasets=["DTD", "fscoco"])
    data = load_fomo_data(cfg)
    assert [cs.format_entry(c) for c in data.concepts][-2:] == ["FSCOCO+++cow", "FSCOCO+++zebra"]
    assert data.class_prompt(data.concepts[-1]) == "A sketch of a zebra"
    assert data.train.texts[-1] == "A sketch of 2 zebras on the grass."   # a string caption is one caption
    sets = {s.name: s for s in data.eval_sets}
    assert sets["FSCOCO"].role == "adaptation" and not sets["FSCOCO"].classes and sets["FSCOCO"].pairs is not None
    assert sets["FSCOCO"].pairs.texts == ["A sketch of 3 cows on the grass.", "A sketch of 3 zebras on the grass."]
    res = run_experiment(cfg, tmp_path / "run")
    last = res["trajectory"][-1]
    assert last["A_KA"] == pytest.approx((last["datasets"]["DTD"] + last["datasets"]["FSCOCO"]) / 2)
    assert 0 <= last["datasets"]["FSCOCO"] <= 100
    classified = load_fomo_data(experiment(root, pool, datasets=["DTD", "fscoco"], adaptation_retrieval=[]))
    assert {s.name: s.classes for s in classified.eval_sets}["FSCOCO"] == ["cow", "zebra"]


def test_evaluation_subset_is_class_stratified_then_filled():
    """FoMo's subset: max(floor, 10 %) of the split; with labels, ⌊size / classes⌋ of each class
    first (a rare class is always in), then a random fill; seeded, the same every evaluation."""
    labels = torch.tensor([0] * 30 + [1] * 2 + [2] * 8)
    for seed in range(5):
        m = subset_mask(40, seed, floor=6, labels=labels)
        assert int(m.sum()) == 6 and [int(m[labels == c].sum()) for c in range(3)] == [2, 2, 2]
        assert torch.equal(m, subset_mask(40, seed, floor=6, labels=labels))
    m = subset_mask(40, 0, floor=7, labels=labels)    # 2 per class + 1 random fill
    assert int(m.sum()) == 7 and int(m[labels == 1].sum()) == 2
    assert int(subset_mask(4000, 0, floor=6, labels=torch.arange(4000) % 3).sum()) == 400   # 10 %
    # without labels: a seeded permutation's first max(floor, 10 %), as before
    first = np.sort(np.random.default_rng(3).permutation(40)[:6])
    assert torch.equal(subset_mask(40, 3, floor=6).nonzero()[:, 0], torch.from_numpy(first))


def test_fomo_real_data_errors(fomo_dirs, tmp_path):
    root, pool = fomo_dirs
    with pytest.raises(ConfigError, match="fomo.datasets: name the adaptation datasets"):
        load_fomo_data(experiment(root, pool, datasets=[]))
    with pytest.raises(ConfigError, match="fomo.pool_root: λP = 0.33"):
        load_fomo_data(experiment(root, ""))
    assert len(load_fomo_data(experiment(root, "", mixture=[0.0, 0.5, 0.5])).pool) == 0
    with pytest.raises(ConfigError, match="fomo.ordering: 'time' needs release dates"):
        load_fomo_data(experiment(root, pool, ordering="time"))
    with pytest.raises(VlcpError, match=r"00_info/GTSRB_classnames\.json: not found"):
        load_fomo_data(experiment(root, pool, datasets=["GTSRB"]))
    with pytest.raises(ConfigError, match="runs the concepts stream only"):
        experiment_from_dict({"data": {"benchmark": "fomo", "root": str(root), "unseen_styles": []}})


def test_dataset_names_ignore_case(fomo_dirs):
    root, pool = fomo_dirs
    data = load_fomo_data(experiment(root, pool, datasets=["dtd"], retention=["flowers"], retrieval=["mscoco"]))
    assert {c.dataset for c in data.concepts} == {"DTD"} and [s.name for s in data.eval_sets] == ["DTD", "FLOWERS", "MSCOCO"]


def test_paper_profile_brings_fomo_data_with_the_fomo_models(paper_experiments):
    """Under the `paper` profile every FoMo-in-Flux experiment (the fomo, fomo-s and fomo-l models)
    trains on FoMo's info dicts at 224 px with its 41 adaptation datasets (FSCOCO scored by
    retrieval), 20 + 2 retention datasets and the LAION pool, under the experiment's own fomo settings."""
    for name, cfg in paper_experiments.items():
        assert (cfg.data.benchmark == "fomo") == (cfg.data.stream == "concepts"), name
        if cfg.data.benchmark == "fomo":
            assert (len(cfg.fomo.datasets), len(cfg.fomo.retention), len(cfg.fomo.retrieval)) == (41, 20, 2), name
            assert "fscoco" in cfg.fomo.datasets and cfg.fomo.adaptation_retrieval == ["fscoco"], name
            assert cfg.data.image_size == 224 and cfg.fomo.pool_root == "data/pools/laion" and cfg.data.transform == "fomo"
