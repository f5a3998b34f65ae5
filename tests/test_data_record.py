"""The prepared emoji benchmark records what its preparation fixed (meta.json), a run loads only
data that matches its `data` config, and damaged data ends in one line naming the file."""
import json
import shlex
import shutil

import numpy as np
import pytest
import yaml

from conftest import SMALL_TASKS
from vlcp.cli import main
from vlcp.config import DataCfg, SplitCfg, load_params
from vlcp.data.benchmark import EmojiBenchmark
from vlcp.errors import VlcpError

# a cheap benchmark to prepare (~0.3 s): Emoji 0.6 (719 emoji), 8 px, one style
CHEAP = {"max_version": 0.6, "image_size": 8, "styles": ["twemoji"], "train_styles": ["twemoji"], "unseen_styles": []}


def cli(capsys, argv) -> tuple[int, list[str]]:
    code = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err.strip().splitlines()


def one_line_error(capsys, argv) -> str:
    code, lines = cli(capsys, argv)
    assert code == 2 and len(lines) == 1 and lines[0].startswith("vlcp: error: "), (code, lines)
    return lines[0]


def run_params(tmp_path, root, **data) -> str:
    """params.yaml (the repository's, tiny profile) with data.root = `root`, a fast seqf run."""
    params = load_params("params.yaml")
    params["profile"] = "tiny"
    params["defaults"]["data"].update(root=str(root), tasks=SMALL_TASKS, **data)
    params["profiles"]["tiny"]["train"].update(steps=4, progress=False)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return str(path)


# -- the record and the check at load ------------------------------------------------------------


def test_meta_records_what_the_preparation_fixed(emoji_root):
    meta = json.loads((emoji_root / "meta.json").read_text())
    cfg = DataCfg()
    assert meta["format"] == 2
    assert (meta["seed"], meta["image_size"], meta["max_version"], meta["captions_per_item"]) == \
        (cfg.seed, cfg.image_size, cfg.max_version, cfg.captions_per_item)
    assert meta["split"] == {"test": cfg.split.test, "val": cfg.split.val, "query": cfg.split.query}
    assert meta["required_styles"] == cfg.styles
    assert meta["styles"] == cfg.styles + meta["optional_styles"]


@pytest.mark.parametrize("field, change, mine, theirs", [
    ("seed", {"seed": 1}, "1", "0"),
    ("split.test", {"split": SplitCfg(test=0.2)}, "0.2", "0.15"),
    ("split.query", {"split": SplitCfg(query=0.05)}, "0.05", "0.1"),
    ("max_version", {"max_version": 14.0}, "14.0", "15.1"),
    ("image_size", {"image_size": 64}, "64", "32"),
    ("captions_per_item", {"captions_per_item": 4}, "4", "8"),
    ("styles", {"styles": ["twemoji", "noto-mono"], "unseen_styles": []}, "[twemoji, noto-mono]",
     "[twemoji, noto-mono, openmoji]"),
])
def test_data_settings_that_differ_from_the_prepared_data_are_an_error(emoji_root, field, change, mine, theirs):
    with pytest.raises(VlcpError) as e:
        EmojiBenchmark(emoji_root, DataCfg(root=str(emoji_root), **change))
    msg = str(e.value)
    assert msg.startswith(f"data.{field}: this run has {mine} but {emoji_root} was prepared with {theirs}"), msg
    assert "\n" not in msg
    command = msg.split("`")[1]
    assert command.startswith("vlcp data prepare --set ") and f"data.{field}=" in command
    assert f"--set data.root={emoji_root}-" in command


def test_matching_data_loads_and_a_run_may_use_fewer_styles(emoji_root):
    from conftest import tiny_experiment

    assert len(EmojiBenchmark(emoji_root, tiny_experiment(emoji_root).data).items) > 1000
    same = DataCfg(root=str(emoji_root), split=SplitCfg(test=0.15 + 1e-13), max_version=15.1)   # floats: a tolerance
    EmojiBenchmark(emoji_root, same)
    EmojiBenchmark(emoji_root, DataCfg(root=str(emoji_root), train_styles=["openmoji"], unseen_styles=[]))
    EmojiBenchmark(emoji_root, DataCfg(root=str(emoji_root), styles=["openmoji", "noto-mono", "twemoji"]))   # any order


def test_cli_run_on_other_data_is_one_line(emoji_root, tmp_path, capsys):
    """`--set data.seed=1` trained on seed-0 data and wrote `data.seed: 1` into results.json."""
    params = run_params(tmp_path, emoji_root)
    line = one_line_error(capsys, ["run", "seqf", "--params", params, "--set", "data.seed=1",
                                   "--out", str(tmp_path / "runs"), "--checkpoints", str(tmp_path / "ckpt")])
    assert line.startswith("vlcp: error: data.seed: this run has 1 but")
    assert not list((tmp_path / "runs").rglob("results.json"))


def test_data_prepare_with_set_records_it_and_the_suggested_command_fixes_a_mismatch(tmp_path, capsys):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"profile": "tiny", "profiles": {"tiny": {}}, "experiments": {},
                                      "defaults": {"data": {"root": str(tmp_path / "emoji"), **CHEAP}}}))
    out = tmp_path / "seed1"
    code, _ = cli(capsys, ["data", "prepare", "--params", str(params), "--out", str(out), "--set", "data.seed=1",
                           "--set", "data.split.test=2e-1", "--set", "data.captions_per_item=3"])
    assert code == 0
    meta = json.loads((out / "meta.json").read_text())
    assert (meta["seed"], meta["split"]["test"], meta["captions_per_item"]) == (1, 0.2, 3)
    assert (meta["max_version"], meta["image_size"], meta["required_styles"]) == (0.6, 8, ["twemoji"])
    assert all(len(it["captions"]) == 3 for it in meta["items"])
    EmojiBenchmark(out, DataCfg(root=str(out), seed=1, split=SplitCfg(test=0.2), captions_per_item=3, **CHEAP))

    with pytest.raises(VlcpError) as e:   # the params' own data (seed 0, ...) on that folder
        EmojiBenchmark(out, DataCfg(root=str(out), **CHEAP))
    msg = str(e.value)
    assert msg.startswith(f"data.seed: this run has 0 but {out} was prepared with 1; data.split.test: this run has "
                          f"0.15 but {out} was prepared with 0.2; data.captions_per_item: this run has 8")
    argv = shlex.split(msg.split("`")[1])
    assert argv[:2] == ["vlcp", "data"]
    code, _ = cli(capsys, argv[1:] + ["--params", str(params)])
    assert code == 0
    fixed = tmp_path / "seed1-seed0-test0.15-8captions"
    assert f"--set data.root={fixed}" in msg
    EmojiBenchmark(fixed, DataCfg(root=str(fixed), **CHEAP))


def test_data_prepare_set_is_the_run_resolution(tmp_path):
    from vlcp.config import resolve_data, resolve_experiment

    params = load_params("params.yaml")
    sets = ["data.seed=3", "data.max_version=1.4e+1", "data.split.val=0.05"]
    assert resolve_data(params, sets) == resolve_experiment(params, "seqf", overrides=sets).data


def test_meta_of_an_older_vlcp_says_re_prepare(emoji_root, tmp_path):
    old = tmp_path / "emoji"
    shutil.copytree(emoji_root, old)
    meta = json.loads((old / "meta.json").read_text())
    for key in ("split", "captions_per_item", "required_styles", "optional_styles"):
        meta.pop(key)
    meta["format"] = 1
    (old / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(VlcpError, match=r"meta\.json: prepared by an older vlcp .*re-run `vlcp data prepare`"):
        EmojiBenchmark(old, DataCfg(root=str(old)))


# -- damaged data: one line naming the file ------------------------------------------------------


def _truncate(path, keep=0.5):
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * keep)])


def _edit_meta(root, edit):
    meta = json.loads((root / "meta.json").read_text())
    edit(meta)
    (root / "meta.json").write_text(json.dumps(meta))


def _edit_images(root, edit):
    with np.load(root / "images.npz") as z:
        arrays = {s: z[s] for s in z.files}
    edit(arrays)
    np.savez(root / "images.npz", **arrays)


def _no_train_in(group):
    def edit(meta):
        for it in meta["items"]:
            if group is None or it["group"] == group:
                it["split"] = "test"
    return edit


FAULTS = {
    "truncated images.npz": ("images.npz", lambda r: _truncate(r / "images.npz")),
    "truncated images.npz tail": ("images.npz", lambda r: _truncate(r / "images.npz", 0.999)),
    "empty images.npz": ("images.npz", lambda r: (r / "images.npz").write_bytes(b"")),
    "missing images.npz": ("images.npz", lambda r: (r / "images.npz").unlink()),
    "truncated meta.json": ("meta.json", lambda r: _truncate(r / "meta.json")),
    "empty meta.json": ("meta.json", lambda r: (r / "meta.json").write_text("")),
    "meta.json a list": ("meta.json", lambda r: (r / "meta.json").write_text("[1, 2]")),
    "meta.json without items": ("meta.json", lambda r: _edit_meta(r, lambda m: m.pop("items"))),
    "meta.json without format": ("meta.json", lambda r: _edit_meta(r, lambda m: m.pop("format"))),
    "meta.json without seed": ("meta.json", lambda r: _edit_meta(r, lambda m: m.pop("seed"))),
    "meta.json items not a list": ("meta.json", lambda r: _edit_meta(r, lambda m: m.update(items={"a": 1}))),
    "meta.json item not an object": ("meta.json", lambda r: _edit_meta(r, lambda m: m["items"].__setitem__(3, [1]))),
    "meta.json item without captions": ("meta.json", lambda r: _edit_meta(r, lambda m: m["items"][5].pop("captions"))),
    "meta.json item of no group": ("meta.json", lambda r: _edit_meta(r, lambda m: m["items"][0].update(group="Nope"))),
    "meta.json item of no split": ("meta.json", lambda r: _edit_meta(r, lambda m: m["items"][0].update(split="dev"))),
    "meta.json seed a string": ("meta.json", lambda r: _edit_meta(r, lambda m: m.update(seed="0"))),
    "wrong array shape": ("images.npz", lambda r: _edit_images(r, lambda a: a.update(twemoji=a["twemoji"][:-1]))),
    "wrong image size": ("images.npz", lambda r: _edit_images(r, lambda a: a.update(twemoji=a["twemoji"][:, :16, :16]))),
    "channels first": ("images.npz", lambda r: _edit_images(r, lambda a: a.update(twemoji=a["twemoji"].transpose(0, 3, 1, 2)))),
    "wrong dtype": ("images.npz", lambda r: _edit_images(r, lambda a: a.update(twemoji=a["twemoji"].astype(np.float32)))),
    "missing style": ("images.npz", lambda r: _edit_images(r, lambda a: a.pop("openmoji"))),
    "empty training set": ("meta.json", lambda r: _edit_meta(r, _no_train_in(None))),
    "a task without training items": ("meta.json", lambda r: _edit_meta(r, _no_train_in("Activities"))),
}


@pytest.fixture
def damaged(emoji_root, tmp_path, request):
    name, damage = FAULTS[request.param]
    root = tmp_path / "emoji"
    shutil.copytree(emoji_root, root)
    damage(root)
    return root, root / name


@pytest.mark.parametrize("damaged", list(FAULTS), indirect=True)
def test_damaged_data_names_the_file(damaged, tmp_path, capsys):
    root, bad = damaged
    with pytest.raises(VlcpError) as e:
        EmojiBenchmark(root, DataCfg(root=str(root), tasks=SMALL_TASKS))
    assert str(bad) in str(e.value) and "\n" not in str(e.value), str(e.value)
    line = one_line_error(capsys, ["run", "seqf", "--params", run_params(tmp_path, root), "--out",
                                   str(tmp_path / "runs"), "--checkpoints", str(tmp_path / "ckpt")])
    assert str(bad) in line
    assert not list((tmp_path / "runs").rglob("results.json"))
