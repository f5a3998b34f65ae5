"""What each profile of params.yaml is meant to train, read off the resolved configs (nothing trains):
FoMo-in-Flux's model-scaling trio grows, the CLL-CLIP ablations run 12 languages and Table 2 all 36,
no base stage of dvc.yaml trains for a profile none of whose runs loads it, `vlcp config show/resolve
--profile`, and every FoMo dataset name vlcp uses finds FoMo's info files."""
import functools
import json
from pathlib import Path

import pytest
import yaml

from vlcp.cli import main
from vlcp.config import load_params, resolve_experiment

ROOT = Path(__file__).resolve().parents[1]

# each dataset's <NAME> in FoMo-in-Flux's data_lib/00_info/ (<NAME>_train.json, ...): by folder, which
# is the module name ignoring case, but for OXFORDPETS (oxford_pets), SNAKECLEF (snake_clef) and MedMNIST*
FOMO_HANDLES = [
    "AI2DIAGRAMS", "ARTBENCH10", "BIRDSNAP", "CALTECH101", "CALTECH256", "CARS196", "CIFAR10", "CIFAR100", "CLEVR",
    "CLRS", "COUNTRY211", "CUB200", "DF20MINI", "DOLLARSTREET", "DOMAINNET_CLIPART", "DOMAINNET_INFOGRAPH",
    "DOMAINNET_PAINTING", "DOMAINNET_QUICKDRAW", "DOMAINNET_SKETCH", "DSPRITES", "DTD", "EuroSAT", "FGVCAircraft",
    "FLICKR30K", "FLOWERS102", "FRU92", "FSCOCO", "FashionMNIST", "Food101", "GTSRB", "IMAGENET", "IMAGENET_A",
    "IMAGENET_D", "IMAGENET_R", "IMAGENET_S", "IMAGENET_V2", "ISICMELANOMA", "MITSTATES", "MNIST", "MONKEYS10",
    "MSCOCO", "MTSD", "MVTECAD_Adapt", "MVTECAD_Eval", "MedMNISTderma", "MedMNISTorganc", "MedMNISTorgans",
    "OBJECTNET", "OBSC_ANIMALS", "OBSC_THINGS", "OPENIMAGES", "OXFORDPETS", "PATTERNNET", "PLACES365", "PLANTVILLAGE",
    "QUILT", "RESISC45", "RETINOPATHY", "SHAPES3D", "SNAKECLEF", "STL10", "SUN397", "SVHN", "SynthCLIP106", "VEG200",
    "ZAPPOS50k", "iNATURALIST2021"]


@pytest.fixture(scope="module")
def params():
    return load_params(ROOT / "params.yaml")


@pytest.fixture(scope="module")
def resolved(params):
    """{profile: {experiment: config}} for every profile of params.yaml."""
    return {profile: {name: resolve_experiment({**params, "profile": profile}, name) for name in params["experiments"]}
            for profile in params["profiles"]}


@functools.lru_cache(maxsize=None)
def parameters(model: str, image_size: int) -> int:
    """The parameter count of an open_clip (or vlcp) CLIP, built on the meta device (no memory, no weights)."""
    import open_clip
    import torch

    from vlcp.models.clip import register_configs
    register_configs()
    with torch.device("meta"):   # (initialisation is a no-op there)
        model = open_clip.create_model(model, device="meta", force_image_size=image_size)
    return sum(p.numel() for p in model.parameters())


def test_fomo_model_scaling_grows_on_every_profile(resolved):
    """fomo-s < fomo < fomo-l: the 'large' model is larger than the default one on every profile (on
    `small` it had been the default model itself), and so is the default one than the small one; on
    `paper` the small one is FoMo-in-Flux's ViT-B/32 (a quarter of B/16's image tokens at 1 % more
    parameters: its patch embedding is 4x B/16's)."""
    import open_clip

    for profile, cfgs in resolved.items():
        trio = [cfgs[e] for e in ("fomo-ft-s", "fomo-ft", "fomo-ft-l")]
        s, m, l = (parameters(c.model.name, c.data.image_size) for c in trio)
        assert m < l, (profile, [c.model.name for c in trio], (m, l))
        assert len({c.model.pretrained for c in trio}) == 3, profile
        for base, user in (("fomo-base-s", trio[0]), ("fomo-base", trio[1]), ("fomo-base-l", trio[2])):
            assert cfgs[base].model.name == user.model.name, (profile, base)   # θ0 of each size, its own architecture
        if profile == "paper":
            patch = [open_clip.get_model_config(c.model.name)["vision_cfg"]["patch_size"] for c in trio[:2]]
            assert patch == [32, 16], patch
        else:
            assert s < m, (profile, [c.model.name for c in trio], (s, m))
    assert resolved["small"]["fomo-ft-l"].model.name == "vlcp-small-l"


def test_cll_ablations_run_12_languages_below_paper_scale_and_36_on_paper(resolved):
    """The CLL-CLIP ablations (cll-*) stream English + 11 languages on `tiny` and `small` (a scale
    choice: `small` had run all 36, at three times tiny's compute share), at the same steps per
    language as Table 2 (cll36-*, all 36); on `paper` they run all 36, as the paper's Table 3."""
    for profile, cfgs in resolved.items():
        language = {n: c for n, c in cfgs.items() if c.data.stream == "language"}
        assert len([n for n in language if n.startswith("cll36-")]) == 19, profile
        ablation = 0 if profile == "paper" else 12
        for name, cfg in language.items():
            assert cfg.data.num_languages == (0 if name.startswith("cll36-") else ablation), (profile, name)
        for method in ("clip", "clip-teir", "er"):
            per_language = [cfgs[f"{study}-{method}"].train.steps / n
                            for study, n in (("cll", ablation or 36), ("cll36", 36))]
            assert per_language[0] == pytest.approx(per_language[1]), (profile, method, per_language)


def base_stages(params: dict) -> dict[str, tuple[str, str, bool]]:
    """dvc.yaml's pretraining stages (`vlcp pretrain`, a foreach expanded): {stage: (experiment,
    weights file, whether it passes --skip-unread)}."""
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    out = {}
    for name, stage in stages.items():
        if "foreach" in stage and "pretrain" in stage["do"]["cmd"]:
            key = stage["foreach"].strip("${}")
            items = functools.reduce(lambda node, part: node[part], key.split("."), params)
            cmds = {f"{name}@{k}": stage["do"]["cmd"].replace("${key}", k).replace("${item}", v) for k, v in items.items()}
        else:
            cmds = {name: stage.get("cmd") or stage.get("do", {}).get("cmd", "")}
        for stage_name, cmd in cmds.items():
            words = cmd.split()
            if "pretrain" in words:
                out[stage_name] = (words[words.index("pretrain") + 1], words[words.index("--out") + 1], "--skip-unread" in words)
    return out


def test_no_base_stage_trains_for_nothing(params, resolved):
    """A pretraining stage trains only where an experiment of the active profile loads its weights: all
    of them on `tiny` and `small` (whose CTP study now starts from ctp-base, as tiny's), none on `paper`,
    whose runs start from the papers' weights (it had trained ViT-B/16 and ViT-L/14 from random init on
    emoji for no run)."""
    from vlcp.config import weights_readers

    stages = base_stages(params)
    assert set(stages) == {"cll_base", "ctp_base", "fomo_base@fomo-base", "fomo_base@fomo-base-s", "fomo_base@fomo-base-l"}
    assert all(skip for _, _, skip in stages.values()), stages

    def readers(profile, weights):   # what weights_readers finds, off the resolved configs
        return [n for n, c in resolved[profile].items() if c.model.pretrained and Path(c.model.pretrained) == Path(weights)]

    trains = {profile: {s for s, (_, weights, _) in stages.items() if readers(profile, weights)} for profile in resolved}
    assert trains == {"tiny": set(stages), "small": set(stages), "paper": set()}, trains
    for profile in ("tiny", "small"):   # ... and each base is what its readers load
        for experiment, weights, _ in stages.values():
            names = {resolved[profile][r].model.name for r in readers(profile, weights)}
            assert names == {resolved[profile][experiment].model.name}, (profile, experiment, names)
    assert weights_readers({**params, "profile": "small"}, "./models/ctp-base.pt") == readers("small", "models/ctp-base.pt")
    assert weights_readers({**params, "profile": "paper"}, "models/cll-base.pt") == []


def test_pretrain_skip_unread_writes_a_note_instead_of_training(params, tmp_path, monkeypatch, capsys):
    """`vlcp pretrain fomo-base-l --out models/fomo-base-l.pt --skip-unread` on `paper` (as the stage
    fomo_base@fomo-base-l runs it): no training (nothing loads the file there), a one-line note in the
    weights file and the run's results, rc 0."""
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({**params, "profile": "paper"}))
    monkeypatch.chdir(tmp_path)
    rc = main(["pretrain", "fomo-base-l", "--out", "models/fomo-base-l.pt", "--runs", "runs-fomo-base", "--skip-unread"])
    out = capsys.readouterr().out
    assert rc == 0 and "not trained, no experiment of profile 'paper' loads models/fomo-base-l.pt" in out, out
    assert (tmp_path / "models/fomo-base-l.pt").read_text() == out
    assert json.loads((tmp_path / "runs-fomo-base/fomo-base-l/seed0/results.json").read_text()) == {"skipped": out.strip()}
    assert not (tmp_path / "checkpoints").exists()


def test_config_show_and_resolve_take_a_profile(tmp_path, capsys):
    """`vlcp config show EXP --profile small` prints what that profile trains (params.yaml unchanged);
    `config resolve --profile`; `--set profile=small` and an unknown profile are one-line errors (rc 2)."""
    p = ["--params", str(ROOT / "params.yaml")]
    assert main(["config", "show", "fomo-ft-l", "--profile", "small", *p]) == 0
    assert json.loads(capsys.readouterr().out)["model"]["name"] == "vlcp-small-l"
    assert main(["config", "show", "fomo-ft-l", *p]) == 0   # the file's own profile: tiny
    assert json.loads(capsys.readouterr().out)["model"]["name"] == "vlcp-tiny-l"
    assert main(["config", "resolve", "--profile", "paper", "--out", str(tmp_path / "configs"), *p]) == 0
    capsys.readouterr()
    assert json.loads((tmp_path / "configs/cll-clip.json").read_text())["data"]["num_languages"] == 0
    assert json.loads((tmp_path / "configs/fomo-ft-l.json").read_text())["model"]["name"] == "ViT-L-14"
    assert main(["config", "show", "er", "--set", "profile=small", *p]) == 2
    err = capsys.readouterr().err
    assert "--profile small" in err and len(err.strip().splitlines()) == 1, err
    assert main(["config", "show", "er", "--profile", "huge", *p]) == 2
    assert "--profile huge: unknown profile; known: tiny, small, paper" in capsys.readouterr().err


def test_every_fomo_dataset_name_finds_its_info_files(tmp_path, resolved):
    """Every FoMo dataset name vlcp uses (the paper profile's adaptation, retention and retrieval sets,
    IncCLIP's downstream suite from FoMo's copies) resolves to its info files' <NAME>: FoMo spells them
    by folder, the module name up to case and underscores (oxford_pets -> OXFORDPETS_train.json)."""
    from vlcp.data.formats.fomo_info import fomo_handle

    info = tmp_path / "00_info"
    info.mkdir()
    for handle in FOMO_HANDLES:
        for split in ("classnames", "train", "test_224"):
            (info / f"{handle}_{split}.json").write_text("[]")
    names = set()
    for cfg in resolved["paper"].values():
        if cfg.data.benchmark == "fomo":
            names |= {*cfg.fomo.datasets, *cfg.fomo.retention, *cfg.fomo.retrieval}
        if cfg.eval.downstream_root == "data/fomo":
            names |= {*cfg.eval.downstream, *cfg.eval.downstream_retrieval}
    assert len(names) == 63, len(names)
    assert sorted(n for n in names if fomo_handle(tmp_path, n) not in FOMO_HANDLES) == []
    assert [fomo_handle(tmp_path, n) for n in ("oxford_pets", "snake_clef", "imagenet", "imagenet_a", "DTD")] == \
        ["OXFORDPETS", "SNAKECLEF", "IMAGENET", "IMAGENET_A", "DTD"]
