"""Bad input fails fast with the field named, a non-zero exit and nothing half-written."""
import dataclasses
import subprocess
import sys

import pytest
import yaml

from vlcp.cli import main
from vlcp.config import experiment_from_dict, load_params, resolve_experiment
from vlcp.errors import ConfigError, VlcpError


def err(raw):
    with pytest.raises(ConfigError) as e:
        experiment_from_dict(raw)
    return str(e.value)


def test_errors_name_the_field():
    assert err({"method": {"name": "nope"}}).startswith("method.name: unknown method 'nope'")
    assert err({"method": {"name": "er", "buffer_size": -1}}).startswith("method.buffer_size: must be >= 0")
    assert err({"method": {"name": "er", "bufer_size": 3}}).startswith("method.bufer_size: unknown field")
    assert err({"train": {"lr": -0.1}}).startswith("train.lr: must be > 0")
    assert err({"train": {"lr": "fast"}}).startswith("train.lr: expected float")
    assert err({"train": {"steps": True}}).startswith("train.steps: expected int")
    assert err({"train": {"checkpoint_every": 0}}).startswith("train.checkpoint_every: must be >= 1")
    assert err({"train": {"flops_every": 0}}).startswith("train.flops_every: must be >= 1")
    assert err({"data": {"benchmark": "coco"}}).startswith("data.benchmark: unknown benchmark 'coco'")
    assert err({"data": {"benchmark": "p9d"}}).startswith("data.unseen_styles: the p9d benchmark has one image")
    assert err({"data": {"split": {"test": 1.5}}}).startswith("data.split.test:")
    assert err({"data": {"train_styles": ["comic"]}}).startswith("data.train_styles: unknown style")
    assert err({"trian": {}}).startswith("trian: unknown field")


def test_precedence_and_resolved_config():
    params = load_params("params.yaml")
    cfg = resolve_experiment(params, "er", seed=3, overrides=["train.lr=0.002", "method.buffer_size=50"])
    assert cfg.seed == 3 and cfg.train.lr == 0.002 and cfg.method.args["buffer_size"] == 50
    assert cfg.train.steps == params["profiles"]["tiny"]["train"]["steps"]  # profile over defaults
    assert cfg.to_dict()["method"] == {"name": "er", "buffer_size": 50, "replay_fraction": 0.5}
    with pytest.raises(ConfigError, match="experiment: unknown experiment"):
        resolve_experiment(params, "nope")


def write_params(tmp_path, **changes):
    params = load_params("params.yaml")
    params["defaults"]["data"]["root"] = str(tmp_path / "no-such-dir")
    for k, v in changes.items():
        params["experiments"][k] = v
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


@pytest.mark.parametrize("args, field", [
    (["run", "er", "--set", "method.buffer_size=-5"], "method.buffer_size"),
    (["run", "seqf", "--set", "train.lr=-1"], "train.lr"),
    (["run", "seqf", "--set", "method.name=magic"], "method.name"),
    (["run", "seqf"], "data.root"),  # the data directory does not exist
])
def test_cli_one_line_error_and_nothing_written(tmp_path, capsys, args, field):
    params = write_params(tmp_path)
    code = main(args + ["--params", str(params), "--out", str(tmp_path / "runs"),
                        "--checkpoints", str(tmp_path / "ckpt")])
    out = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(out) == 1 and out[0].startswith(f"vlcp: error: {field}")
    assert not (tmp_path / "runs").exists()


def test_cli_unknown_benchmark_exit_code(tmp_path):
    params = load_params("params.yaml")
    params["defaults"]["data"]["benchmark"] = "coco"
    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump(params))
    r = subprocess.run([sys.executable, "-m", "vlcp", "data", "prepare", "--params", str(p),
                        "--out", str(tmp_path / "d")], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip() == "vlcp: error: data.benchmark: unknown benchmark 'coco'; known: emoji, p9d, mscoco36, fomo, cc"
    assert not (tmp_path / "d").exists()


def test_unreadable_images_name_the_file(tmp_path, emoji_root):
    import shutil

    from vlcp.config import DataCfg
    from vlcp.data.benchmark import EmojiBenchmark

    bad = tmp_path / "emoji"
    shutil.copytree(emoji_root, bad)
    (bad / "images.npz").write_bytes(b"not an npz")
    with pytest.raises(VlcpError, match="images.npz: unreadable"):
        EmojiBenchmark(bad, DataCfg(root=str(bad)))


def test_model_errors():
    from vlcp.models import create_clip

    with pytest.raises(VlcpError, match="model.name: unknown open_clip model"):
        create_clip("ViT-Nope")
    with pytest.raises(VlcpError, match="model.pretrained: /no/such/weights.pt not found"):
        create_clip("vlcp-tiny", "/no/such/weights.pt")


def test_profile_model_aliases_pick_the_profiles_model():
    from vlcp.config import resolve_experiment

    params = {"profile": "big",
              "profiles": {"tiny": {"model_aliases": {"resnet": "vlcp-tiny-rn"}},
                           "big": {"model": {"name": "ViT-B-16", "pretrained": "w.bin"}, "model_aliases": {"resnet": "RN50"}}},
              "experiments": {"ic": {"model": {"name": "resnet", "pretrained": None}}, "plain": {}}}
    cfg = resolve_experiment(params, "ic")
    assert cfg.model.name == "RN50" and cfg.model.pretrained is None
    assert resolve_experiment(params, "plain").model.name == "ViT-B-16"
    assert resolve_experiment({**params, "profile": "tiny"}, "ic").model.name == "vlcp-tiny-rn"


def test_profile_alias_train_settings_sit_under_the_experiment():
    from vlcp.config import resolve_experiment

    params = {"profile": "tiny", "defaults": {"train": {"lr": 0.1, "steps": 10}},
              "profiles": {"tiny": {"model_aliases": {"albef": {"name": "albef-tiny", "train": {"lr": 0.01, "batch_size": 64}}}},
                           "big": {"model_aliases": {"albef": "albef-base"}}},
              "experiments": {"a": {"model": {"name": "albef"}}, "b": {"model": {"name": "albef"}, "train": {"lr": 0.5}}}}
    a = resolve_experiment(params, "a")
    assert (a.model.name, a.train.lr, a.train.batch_size, a.train.steps) == ("albef-tiny", 0.01, 64, 10)
    assert resolve_experiment(params, "b").train.lr == 0.5                            # the experiment's own wins
    assert resolve_experiment(params, "a", overrides=["train.batch_size=8"]).train.batch_size == 8
    assert resolve_experiment({**params, "profile": "big"}, "a").train.lr == 0.1     # other profiles unaffected


def test_model_built_for_the_data_image_size():
    import torch

    from vlcp.models.clip import create_clip

    model, _ = create_clip("vlcp-tiny-rn", image_size=64)     # its config says 32
    assert model.encode_image(torch.zeros(2, 3, 64, 64)).shape == (2, 128)


def test_experiment_names_are_file_names():
    """An experiment's resolved config is `configs/<name>.json` and its runs `runs/<name>/seed<S>/`."""
    import re
    from pathlib import Path

    import yaml
    params = yaml.safe_load((Path(__file__).resolve().parents[1] / "params.yaml").read_text())
    bad = [n for n in params["experiments"] if not re.fullmatch(r"[A-Za-z0-9_-]+", n)]
    assert not bad, f"experiment names that are no plain file names: {bad}"


def test_config_resolve_writes_each_experiment_and_each_study(tmp_path, capsys):
    """`vlcp config resolve` (dvc.yaml's `configs` stage): one file per experiment, one bundle per
    study list, byte-identical when re-run; a bad study key fails naming it and writes nothing."""
    import json

    params = write_params(tmp_path)
    out = tmp_path / "configs"
    args = ["config", "resolve", "--params", str(params), "--out", str(out),
            "--study", "report.ctp.experiments", "--study", "report.fomo.studies"]
    assert main(args) == 0
    first = {f.name: f.read_bytes() for f in out.iterdir()}
    raw = load_params(params)
    assert {f"{e}.json" for e in raw["experiments"]} < set(first)
    seqf = json.loads(first["seqf.json"])
    assert seqf["method"]["name"] == "seqf" and "seed" not in seqf
    assert seqf["train"] == dataclasses.asdict(resolve_experiment(raw, "seqf").train)
    ctp = json.loads(first["study-report.ctp.experiments.json"])
    assert ctp["experiments"] == raw["report"]["ctp"]["experiments"]
    assert ctp["configs"]["ctp-ctp"] == json.loads(first["ctp-ctp.json"])
    assert json.loads(first["study-report.fomo.studies.lr.json"])["experiments"] == raw["report"]["fomo"]["studies"]["lr"]
    assert main(args) == 0
    assert {f.name: f.read_bytes() for f in out.iterdir()} == first

    assert main(["config", "resolve", "--params", str(params), "--out", str(tmp_path / "c2"), "--study", "report.nope"]) == 2
    assert "vlcp: error: --study report.nope: no such key" in capsys.readouterr().err
    assert not (tmp_path / "c2").exists()


def test_every_experiment_resolves_and_base_files_fit_their_consumers():
    """In every profile of params.yaml each experiment resolves, and a model that loads a weights
    file `models/<exp>.pt` (written by `vlcp pretrain <exp>`) has the architecture <exp> trains."""
    from pathlib import Path

    from vlcp.config import load_params, resolve_experiment

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    for profile in params["profiles"]:
        p = {**params, "profile": profile}
        cfgs = {name: resolve_experiment(p, name) for name in params["experiments"]}
        for name, cfg in cfgs.items():
            stem = Path(str(cfg.model.pretrained)).stem
            if stem in cfgs and str(cfg.model.pretrained).endswith(".pt"):
                assert cfg.model.name == cfgs[stem].model.name, (profile, name, stem)


def test_arch_of_names_an_alias_architecture_without_its_weights():
    from vlcp.config import resolve_experiment

    params = {"profile": "tiny", "profiles": {"tiny": {"model_aliases": {
        "fomo": {"name": "vlcp-tiny-s", "pretrained": "models/base.pt", "train": {"lr": 0.5}}}}},
        "experiments": {"base": {"model": {"arch_of": "fomo", "pretrained": None}}, "bad": {"model": {"arch_of": "nope"}}}}
    cfg = resolve_experiment(params, "base")
    assert (cfg.model.name, cfg.model.pretrained, cfg.train.lr != 0.5) == ("vlcp-tiny-s", None, True)
    with pytest.raises(ConfigError, match="model.arch_of: 'nope'"):
        resolve_experiment(params, "bad")


def test_cli_parallel_jobs_equal_sequential_runs(emoji_root, tmp_path):
    """`vlcp run --jobs 2` runs the experiments on two worker processes with train.num_threads // 2
    threads each: every result equals the sequential run at that thread count."""
    import json

    from conftest import SMALL_TASKS, strip_timings

    params = load_params("params.yaml")
    params["profile"] = "tiny"
    params["defaults"]["data"].update(root=str(emoji_root), tasks=SMALL_TASKS)
    params["profiles"]["tiny"]["train"].update(steps=6, num_threads=2, progress=False)
    params["experiments"]["t-seqf"] = {"method": {"name": "seqf"}, "train": {"batch_size": 16}}
    params["experiments"]["t-er"] = {"method": {"name": "er", "buffer_size": 20}, "train": {"batch_size": 16}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    common = ["--params", str(path), "--checkpoints", str(tmp_path / "ckpt")]
    assert main(["run", "t-seqf", "t-er", "--jobs", "2", "--out", str(tmp_path / "par")] + common) == 0
    assert main(["run", "t-seqf", "t-er", "--set", "train.num_threads=1", "--out", str(tmp_path / "seq"),
                 "--no-resume"] + common) == 0
    for name in ("t-seqf", "t-er"):
        par, seq = (json.loads((tmp_path / d / name / "seed0" / "results.json").read_text()) for d in ("par", "seq"))
        assert par["config"]["train"]["num_threads"] == 1
        assert strip_timings(par) == strip_timings(seq)
    assert main(["run", "t-seqf", "--jobs", "0"] + common) == 2
