"""IncCLIP on its real data's formats (`data.benchmark: cc`): CC2M as webdataset shards (images
read from the shards on access) with pseudo labels, cut into class or instance chunks, and
evaluated after every task on downstream datasets in FoMo-in-Flux's format (zero-shot
classification, retrieval with every caption a match), as IncCLIP's suite."""
import io
import json
import tarfile
from pathlib import Path

import pytest

from test_real_fomo import write_fomo   # FoMo-format downstream datasets: DTD, CARS, FLOWERS (classification), MSCOCO
from vlcp.config import DataCfg, SplitCfg, experiment_from_dict
from vlcp.data.formats import ShardMember
from vlcp.data.load import load_benchmark
from vlcp.errors import ConfigError, VlcpError
from vlcp.run import run_experiment

COLOURS = [(200, 30, 30), (30, 200, 30), (30, 30, 200), (200, 200, 30), (200, 30, 200), (30, 200, 200)]
WORDS = ["red", "green", "blue", "yellow", "purple", "cyan"]


def write_cc(root: Path, n: int = 36, per_shard: int = 12) -> Path:
    """`n` pairs in shards of `per_shard` (img2dataset's layout: jpg, txt, json per key), pair k of
    pseudo class (k % 6) x 100, and the pseudo-label file."""
    from PIL import Image

    root.mkdir(parents=True)
    labels = {}
    for first in range(0, n, per_shard):
        with tarfile.open(root / f"{first // per_shard:05d}.tar", "w") as tf:
            for k in range(first, min(n, first + per_shard)):
                key, y = f"{k:09d}", k % 6
                labels[key] = y * 100
                buf = io.BytesIO()
                Image.new("RGB", (20, 14), COLOURS[y]).save(buf, "JPEG")
                for ext, data in (("jpg", buf.getvalue()), ("txt", f"a {WORDS[y]} photo number {k}".encode()),
                                  ("json", b"{}")):
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(data)
                    tf.addfile(info, io.BytesIO(data))
    (root / "pseudo_labels.json").write_text(json.dumps(labels))
    return root


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    base = tmp_path_factory.mktemp("data")
    return write_cc(base / "cc2m"), write_fomo(base / "fomo")[0]


def cc_data(root: Path, **kw) -> DataCfg:
    return DataCfg(**{"benchmark": "cc", "root": str(root), "stream": "class", "num_tasks": 3, "unseen_styles": [],
                      "image_size": 16, "labels": str(root / "pseudo_labels.json"), "split": SplitCfg(test=0.2), **kw})


def test_cc_class_and_instance_chunks(dirs):
    root, _ = dirs
    bench = load_benchmark(cc_data(root))
    assert bench.task_names == ["class 0000…class 0100", "class 0200…class 0300", "class 0400…class 0500"]
    for i, it in enumerate(bench.items):   # every pair is in its pseudo class's chunk of contiguous class ids
        assert bench.item_task[i] == int(it["subgroup"].split()[1]) // 200, it["key"]
    splits = [it["split"] for it in bench.items]
    assert 0 < splits.count("test") < 36 and splits.count("train") + splits.count("test") == 36
    assert isinstance(bench.images.sources[0], ShardMember) and bench.images[[0]].shape == (1, 16, 16, 3)
    train = bench.pairs("train", ["twemoji"])
    assert len(train) == splits.count("train") and train.texts[0].startswith("a ")
    assert len(bench.pairs("query", ["twemoji"])) == 0
    inst = load_benchmark(cc_data(root, stream="instance", labels=""))   # no labels needed
    assert [int((inst.item_task == t).sum()) for t in range(3)] == [12, 12, 12]
    assert sorted(inst.item_task.tolist()) != inst.item_task.tolist()   # random chunks, not the shard order
    assert len(load_benchmark(cc_data(root, max_pairs=24)).items) == 24


def experiment(root, fomo, method="er", stream="class", **args):
    return experiment_from_dict({
        "name": f"cc-{method}", "seed": 0,
        "data": {"benchmark": "cc", "root": str(root), "stream": stream, "num_tasks": 3, "unseen_styles": [],
                 "image_size": 32, "labels": str(root / "pseudo_labels.json"), "split": {"test": 0.2}, "workers": 2},
        "model": {"name": "vlcp-tiny-rn"}, "method": {"name": method, **args},
        "train": {"steps": 6, "batch_size": 8, "progress": False, "device": "cpu", "num_threads": 1},
        "eval": {"batch_size": 64, "heldout": True, "downstream_root": str(fomo), "downstream": ["dtd", "FLOWERS"],
                 "downstream_retrieval": ["MSCOCO"]}})


@pytest.mark.parametrize("method,stream,args", [("er", "class", {"buffer_size": 6}),
                                                ("incclip", "instance", {"buffer_size": 6, "replay_fraction": 0.5})])
def test_incclip_study_runs_on_cc(dirs, tmp_path, method, stream, args):
    """ER on the class split and IncCLIP on the instance split train on CC2M's shards and are
    evaluated after every task on the downstream suite (DTD and FLOWERS zero-shot, MSCOCO
    retrieval) and on the held-out pairs of each chunk."""
    root, fomo = dirs
    res = run_experiment(experiment(root, fomo, method, stream, **args), tmp_path / method)
    assert len(res["tasks"]) == 3 and len(res["heldout"]) == 3
    last = res["heldout"][-1]
    assert set(last["classification"]) == {"DTD", "FLOWERS"} and set(last["retrieval"]) == {"MSCOCO"}
    assert all(0 <= v <= 100 for v in last["classification"].values()) and "TR@1" in last["retrieval"]["MSCOCO"]
    assert set(res["matrix"]) == {"test"} and not any(k.startswith("mAP") for k in res["cumulative"][-1]["test"])
    assert "TR@1" in res["matrix"]["test"] and "ZS@1" not in res["matrix"]["test"]   # pseudo classes have no names to prompt


def test_cc_errors(dirs, tmp_path):
    root, fomo = dirs
    with pytest.raises(ConfigError, match="stream: the cc benchmark runs the class or instance stream only"):
        cc_data(root, stream="group")
    with pytest.raises(ConfigError, match="data.labels: the class stream of cc needs"):
        load_benchmark(cc_data(root, labels=""))
    partial = tmp_path / "labels.json"
    partial.write_text(json.dumps({"000000000": 3}))
    with pytest.raises(VlcpError, match=r"labels\.json: sample '000000001' has no label \(35 of 36 samples lack one\)"):
        load_benchmark(cc_data(root, labels=str(partial)))
    partial.write_text(json.dumps({f"{k:09d}": "cat" for k in range(36)}))
    with pytest.raises(VlcpError, match="sample '000000000' has label 'cat', not a class id"):
        load_benchmark(cc_data(root, labels=str(partial)))
    with pytest.raises(VlcpError, match=r"nowhere.*not found"):
        load_benchmark(cc_data(tmp_path / "nowhere"))
    cfg = experiment(root, fomo)
    cfg.eval.downstream, cfg.eval.downstream_retrieval = [], []
    with pytest.raises(ConfigError, match="eval.downstream: a cc run's held-out suite"):
        run_experiment(cfg, tmp_path / "none")


def test_paper_profile_brings_cc2m_and_the_downstream_suite(paper_experiments):
    """Under the `paper` profile every IncCLIP experiment (RN50 from scratch) trains on CC2M's
    shards at 224 px, split by pseudo labels into equal class ranges (class) or at random (instance), and is evaluated on
    IncCLIP's 8 classification datasets and MSCOCO / Flickr30K retrieval."""
    ic = {n: c for n, c in paper_experiments.items() if c.model.name == "RN50"}
    assert ic
    for name, cfg in ic.items():
        assert (cfg.data.benchmark, cfg.data.root, cfg.data.image_size) == ("cc", "data/cc2m", 224), name
        assert cfg.data.stream in ("class", "instance") and cfg.eval.heldout, name
        assert cfg.data.class_chunks == "classes", name
        assert len(cfg.eval.downstream) == 8 and cfg.eval.downstream_retrieval == ["mscoco", "flickr30k"], name
    assert ic["ic4-incclip"].data.labels == "data/cc2m/pseudo_labels.json"
