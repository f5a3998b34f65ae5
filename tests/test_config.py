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
    tiny = params["profiles"]["tiny"]
    assert cfg.train.steps == tiny["model_aliases"]["spine"]["train"]["steps"] != tiny["train"]["steps"]  # the spine's alias over the profile
    assert resolve_experiment(params, "ic4-er").train.steps == tiny["train"]["steps"]  # profile over defaults
    assert cfg.to_dict()["method"] == {"name": "er", "buffer_size": 50, "replay_fraction": 0.5, "memory_update": "online"}
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
    assert r.stderr.strip() == "vlcp: error: data.benchmark: unknown benchmark 'coco'; known: emoji, p9d, mscoco36, fomo, cc, user"
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


# -- numbers in every notation, ranges, structure (the `vlcp` CLI prints one line and exits 2) ----------


def cli_error(capsys, argv) -> str:
    """Run `vlcp ARGV`; it must exit 2 with one line on stderr `vlcp: error: ...` (no traceback), and
    print nothing on stdout. Returns the message after `vlcp: error: `."""
    code = main(argv)
    out, errs = capsys.readouterr()
    lines = errs.strip().splitlines()
    assert code == 2, (code, errs)
    assert len(lines) == 1 and lines[0].startswith("vlcp: error: "), errs
    assert "Traceback" not in errs and not out.strip()
    return lines[0][len("vlcp: error: "):]


def show(capsys, params, *sets, experiment="seqf") -> dict:
    import json

    argv = ["config", "show", experiment, "--params", str(params)]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("text, value", [("1e-3", 0.001), ("1E-3", 0.001), ("5e+2", 500.0), (".5", 0.5),
                                         ("1_000", 1000.0), ("2", 2.0), ("1.5e-4", 1.5e-4)])
def test_set_takes_floats_in_every_notation(tmp_path, capsys, text, value):
    """YAML 1.1 (PyYAML) reads `1e-3` as a string: a float field still takes it."""
    params = write_params(tmp_path)
    assert show(capsys, params, f"train.lr={text}")["train"]["lr"] == pytest.approx(value)


def test_params_file_takes_floats_in_every_notation(tmp_path, capsys):
    """Numbers as a user writes them in params.yaml (and in a params dict)."""
    params = write_raw(tmp_path, """\
profile: tiny
defaults:
  train: {lr: 1e-3, weight_decay: 5E-2, steps: 1_000, cooldown_frac: .5, warmup_steps: 1e1}
  data: {max_version: 1.5e+1}
profiles: {tiny: {}}
experiments:
  seqf: {}
  sci: {method: {name: incclip, s_min: -1.5e-4, pseudo_lr: 1E0}}
""")
    cfg = show(capsys, params)
    assert (cfg["train"]["lr"], cfg["train"]["weight_decay"], cfg["train"]["steps"]) == (0.001, 0.05, 1000)
    assert (cfg["train"]["cooldown_frac"], cfg["train"]["warmup_steps"], cfg["data"]["max_version"]) == (0.5, 10, 15.0)
    method = show(capsys, params, experiment="sci")["method"]
    assert (method["s_min"], method["pseudo_lr"]) == (-1.5e-4, 1.0)
    assert experiment_from_dict({"train": {"lr": "1e-3", "steps": "1e3"}}).train.steps == 1000   # a params dict


def test_numbers_bools_are_no_numbers():
    assert err({"train": {"lr": True}}).startswith("train.lr: expected float")
    assert err({"train": {"steps": "true"}}).startswith("train.steps: expected int")
    assert err({"train": {"steps": 2.5}}).startswith("train.steps: expected int")
    assert err({"train": {"lr": "1e-3x"}}).startswith("train.lr: expected float")


@pytest.mark.parametrize("setting, field", [
    ("train.lr=.inf", "train.lr"),
    ("train.lr=1e400", "train.lr"),
    ("train.weight_decay=.nan", "train.weight_decay"),
    ("train.beta2=1.5", "train.beta2"),
    ("train.num_threads=0", "train.num_threads"),
    ("eval.batch_size=0", "eval.batch_size"),
    ("train.grad_clip=.nan", "train.grad_clip"),     # NaN < 0 is false: clipping was silently off
    ("eval.ks=[0]", "eval.ks"),                       # results with R@0
    ("eval.ks=[1, 5, 5]", "eval.ks"),
    ("eval.ks=[]", "eval.ks"),
    ("eval.zeroshot_templates=[an emoji]", "eval.zeroshot_templates"),   # no {} for the class name
    ("eval.zeroshot_templates=[]", "eval.zeroshot_templates"),
    ("data.seed=-1", "data.seed"),
    ("data.max_version=-.inf", "data.max_version"),
    ("fomo.mixture=[.nan, 0.5, 0.5]", "fomo.mixture"),
    ("fomo.temperature=.nan", "fomo.temperature"),
    ("method.replay_fraction=.nan", "method.replay_fraction"),
    ("train.pass_flops_seeds=[-1]", "train.pass_flops_seeds"),
    (".lr=1", "--set '.lr=1'"),                       # an empty key part
    ("train..lr=1", "--set 'train..lr=1'"),
    ("train=3", "train"),                             # a scalar onto a section
    ("data.split=0.2", "data.split"),
    ("method=er", "method"),
    ("train.lr=[", "--set 'train.lr=['"),             # not YAML
])
def test_out_of_range_and_non_finite_values_name_the_field(tmp_path, capsys, setting, field):
    params = write_params(tmp_path)
    exp = "er" if setting.startswith("method.") else "seqf"
    msg = cli_error(capsys, ["run", exp, "--params", str(params), "--set", setting,
                             "--out", str(tmp_path / "runs"), "--checkpoints", str(tmp_path / "ckpt")])
    assert msg.startswith(field), msg
    assert not (tmp_path / "runs").exists() and not (tmp_path / "ckpt").exists()


def test_non_finite_values_rejected_on_direct_construction():
    from vlcp.config import EvalCfg, TrainCfg
    from vlcp.methods import get_method

    for kw in ({"lr": float("inf")}, {"weight_decay": float("nan")}, {"grad_clip": float("nan")}, {"beta2": 1.5},
               {"num_threads": 0}):
        with pytest.raises(ConfigError, match=f"^{next(iter(kw))}:"):
            TrainCfg(**kw)
    with pytest.raises(ConfigError, match=r"^ks\[0\]:"):
        EvalCfg(ks=[0])
    with pytest.raises(ConfigError, match="^batch_size:"):
        EvalCfg(batch_size=0)
    with pytest.raises(ConfigError, match="^ewc_lambda:"):
        get_method("ewc").Config(ewc_lambda=float("nan"))
    with pytest.raises(ConfigError, match="^pull:"):
        get_method("cll-dualprompt").Config(pull=-1.0)


def write_raw(tmp_path, text: str):
    path = tmp_path / "params.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, key", [
    ("- a\n- b\n", "params.yaml: the top level must be a mapping"),
    ("just a string\n", "params.yaml: the top level must be a mapping"),
    ("defaults: [1, 2]\nexperiments: {seqf: {}}\n", "defaults: expected a mapping"),
    ("profiles: [tiny]\nexperiments: {seqf: {}}\n", "profiles: expected a mapping"),
    ("profiles: {tiny: 3}\nexperiments: {seqf: {}}\n", "profiles.tiny: expected a mapping"),
    ("profiles: {tiny: {model_aliases: [a]}}\nexperiments: {seqf: {}}\n", "profiles.tiny.model_aliases: expected a mapping"),
    ("profiles: {tiny: {}}\nexperiments: [seqf]\n", "experiments: expected a mapping"),
    ("profiles: {tiny: {}}\nexperiments: {seqf: 3}\n", "experiments.seqf: expected a mapping"),
    ("profiles: {tiny: {}}\nexperiments: {seqf: {train: 3}}\n", "experiments.seqf.train: expected a mapping"),
    ("profiles: {tiny: {}}\nexperiments: {seqf: {model: vlcp-tiny}}\n", "experiments.seqf.model: expected a mapping"),
    ("profiles: {tiny: {}}\nexperiments: {seqf: {method: er}}\n", "experiments.seqf.method: expected a mapping"),
    ("profiles: {tiny: {}}\nexperiments: {seqf: {fomo: [1]}}\n", "experiments.seqf.fomo: expected a mapping"),
    ("profiles: {tiny: {eval: 1}}\nexperiments: {seqf: {}}\n", "profiles.tiny.eval: expected a mapping"),
    ("defaults: {data: [1]}\nprofiles: {tiny: {}}\nexperiments: {seqf: {}}\n", "defaults.data: expected a mapping"),
    ("defaults: {data: {split: 0.2}}\nprofiles: {tiny: {}}\nexperiments: {seqf: {}}\n",
     "defaults.data.split: expected a mapping"),
    ("profile: [tiny]\nprofiles: {tiny: {}}\nexperiments: {seqf: {}}\n", "profile: expected a profile name"),
    ("profiles: {tiny: {model_aliases: {r: {pretrained: x.pt}}}}\nexperiments: {seqf: {model: {arch_of: r}}}\n",
     "profiles.tiny.model_aliases.r.name: a model alias needs a model name"),
])
def test_params_structure_errors_name_the_key_and_file(tmp_path, capsys, text, key):
    params = write_raw(tmp_path, text)
    msg = cli_error(capsys, ["config", "show", "seqf", "--params", str(params)])
    assert msg.startswith(key.replace("params.yaml", str(params))), msg
    assert str(params) in msg


def test_data_prepare_takes_data_overrides_only(tmp_path, capsys):
    params = write_params(tmp_path)
    out = tmp_path / "prepared"
    for setting, field in [("train.lr=0.1", "train.lr"), ("data.sed=1", "data.sed"), ("data.seed=-1", "data.seed"),
                           ("data=3", "data"), ("data.split.test=.nan", "data.split.test")]:
        msg = cli_error(capsys, ["data", "prepare", "--params", str(params), "--out", str(out), "--set", setting])
        assert msg.startswith(field), msg
    assert not out.exists()


def test_cli_model_override_wins_over_a_model_alias():
    """`--set model.pretrained=X` on an experiment whose model is a profile alias (cll, fomo, albef)
    was silently replaced by the alias's own weights file."""
    from vlcp.config import load_params, resolve_experiment

    params = load_params("params.yaml")
    assert resolve_experiment(params, "cll-clip").model.pretrained == "models/cll-base.pt"
    cfg = resolve_experiment(params, "cll-clip", overrides=["model.pretrained=other/base.pt"])
    assert cfg.model.pretrained == "other/base.pt" and cfg.model.name == "vlcp-tiny"
