"""The leaderboard's track 2 (θ0 updated on the concept stream): its experiments and stages against
methods.yaml, its power and ranking helpers on hand-made FoMo-in-Flux runs, and the notebook run on
such runs with track 1 absent, and with no runs at all."""
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from vlcp.report import leaderboard as lb

ROOT = Path(__file__).parents[1]


def params() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def fomo_run(experiment: str, method: str, seed: int, end: tuple[float, float], buffer: int | None = None) -> dict:
    """A concept-stream results dict: θ0 at (A_KA 10, A_ZS 40), two tasks of dataset `a`, ending at `end`."""
    def point(ka, zs):
        return {"A_KA": ka, "A_ZS": zs, "GM": (ka * zs) ** 0.5, "datasets": {"a": ka, "r": zs}}

    ka, zs = end
    m = {"name": method} | ({"buffer_size": buffer} if buffer is not None else {})
    return {"experiment": experiment, "seed": seed, "wall_seconds": 30.0,
            "config": {"method": m, "model": {"name": "vlcp-tiny", "pretrained": f"models/fomo-base-d{seed}.pt"},
                       "fomo": {"steps_per_task": 10}},
            "zero_shot": point(10, 40), "trajectory": [point((10 + ka) / 2, (40 + zs) / 2), point(ka, zs)],
            "tasks": [["a+++x"], ["a+++y"]], "steps_per_task": [10, 10],
            "datasets": {"a": {"role": "adaptation", "n": 100}, "r": {"role": "retention", "n": 100}},
            "train": [{"steps": 10, "seconds": 1.0, "flops_per_step": 2e9, "task_pass_flops": 0} for _ in range(2)],
            "budget": {"memory_multiplier": 1.25 if method == "zscl" else 1.0}}


def test_track2_runs_every_track2_method_once_at_five_seeds_apart_from_its_calibration():
    from vlcp.config import resolve_experiment
    from vlcp.run.requirements import check_config

    p = params()
    board = p["report"]["leaderboard"]
    t1, t2 = board["track1"], board["track2"]
    cat = yaml.safe_load((ROOT / "vlcp/report/studies/leaderboard/methods.yaml").read_text())
    method = {}
    for e in dict.fromkeys(t2["experiments"] + t2["calibration"]["experiments"]):
        for s in (t2["seeds"][0], t2["calibration"]["seeds"][0]):   # the stages' overrides (long/dvc.yaml)
            cfg = resolve_experiment(p, e, s, [f"data.seed={s}", f"data.root=data/emoji-d{s}",
                                               f"model.pretrained=models/fomo-base-d{s}.pt"])
            check_config(cfg)
            assert cfg.data.stream == "concepts" and cfg.fomo.budget == "mafs"   # compute-matched by FoMo's rule
            assert cfg.model.pretrained == f"models/fomo-base-d{s}.pt"
        method[e] = cfg.method.name
    assert sorted(method[e] for e in t2["experiments"]) == sorted(cat["track2"])   # each track 2 method, once
    assert t2["baseline"] in t2["experiments"] and t2["baseline"] in t2["calibration"]["experiments"]
    assert len(t2["seeds"]) >= 5 and not set(t2["seeds"]) & set(t2["calibration"]["seeds"])
    # track 2 reads the benchmark draws leaderboard_data@S and leaderboard_data_calibration@S prepare (track 1's seeds)
    assert set(t2["seeds"]) <= set(t1["seeds"]) and set(t2["calibration"]["seeds"]) <= set(t1["calibration"]["seeds"])


def test_track2_stages_pretrain_a_theta0_per_data_seed_and_run_from_it():
    stages = yaml.safe_load((ROOT / "long" / "dvc.yaml").read_text())["stages"]
    base, cal_base = stages["leaderboard_base"], stages["leaderboard_base_calibration"]
    assert base["foreach"] == "${report.leaderboard.track2.seeds}" and cal_base["do"] == base["do"]
    assert cal_base["foreach"] == "${report.leaderboard.track2.calibration.seeds}"
    assert "models/fomo-base-d${item}.pt" in base["do"]["outs"]
    assert "vlcp pretrain fomo-base --seed ${item} --set data.seed=${item}" in base["do"]["cmd"]
    for name, listed in (("run_leaderboard2", "experiments"),
                         ("run_leaderboard2_calibration", "calibration.experiments")):
        do = stages[name]["do"]
        assert f"--list report.leaderboard.track2.{listed} --seed ${{item}}" in " ".join(do["cmd"].split())
        assert "--set data.seed=${item}" in do["cmd"]
        assert "--set model.pretrained=models/fomo-base-d${item}.pt" in do["cmd"]   # leaderboard_base's out
        assert {"models/fomo-base-d${item}.pt", "data/emoji-d${item}"} <= set(map(str, do["deps"]))
        assert list(do["outs"][0].values())[0]["persist"] is True
    assert "${report.leaderboard.runs}" in stages["leaderboard"]["deps"]   # every track's runs, under that folder
    # each benchmark draw is its own stage, so a track's stage never runs another track's runs first
    for name, seeds in (("leaderboard_data", "track1.seeds"), ("leaderboard_data_calibration", "track1.calibration.seeds")):
        assert stages[name]["foreach"] == f"${{report.leaderboard.{seeds}}}"
        assert stages[name]["do"]["outs"] == ["data/emoji-d${item}"] and "vlcp data prepare" in stages[name]["do"]["cmd"]
    for name, stage in stages.items():
        if name.startswith("run_leaderboard"):
            assert "data/emoji-d${item}" in stage["do"]["deps"] and "data/emoji-d${item}" not in stage["do"].get("outs", [])


def test_track_power_pairs_the_calibration_seeds_and_reads_teaching_from_the_lower_arm():
    from vlcp.report import teach
    from vlcp.report.fomo import MEASURES as FOMO

    cal = {"fomo-joint": {s: fomo_run("fomo-joint", "seqf", s, (40 + s, 38)) for s in (20, 21, 22, 23)},
           "fomo-ft": {s: fomo_run("fomo-ft", "seqf", s, (30 + s * s / 20, 30)) for s in (20, 21, 22)}}
    p = lb.track_power(cal, {"experiments": ["fomo-joint", "fomo-ft"]}, FOMO["GM"], "GM",
                       lambda rs: teach.task_gains(rs, "A_KA"), "adaptation datasets")
    up = [FOMO["GM"](cal["fomo-joint"][s]) for s in (20, 21, 22)]
    lo = [FOMO["GM"](cal["fomo-ft"][s]) for s in (20, 21, 22)]
    assert p.seeds == 3 and p.headroom == pytest.approx(np.mean(up) - np.mean(lo))   # seed 23 has no pair
    assert p.sigma_d == pytest.approx(np.std(np.subtract(up, lo), ddof=1))
    assert p.tasks == 2 and p.tasks_teaching == 2 and p.headroom_from == "fomo-joint − fomo-ft, GM"
    del cal["fomo-ft"][22]
    two_seeds = lb.track_power(cal, {"experiments": ["fomo-joint", "fomo-ft"]}, FOMO["GM"], "GM", lambda rs: None, "")
    assert two_seeds is None


def test_beside_adds_other_metrics_means_and_memory_comes_from_the_runs_budget():
    gm = {"a": {0: 20.0, 1: 22.0, 2: 21.0}, "b": {0: 10.0, 1: 11.5, 2: 10.5}}
    ka = {"a": {0: 30.0, 1: 32.0, 2: 34.0}, "b": {0: 12.0, 1: 12.0, 2: 12.0}}
    t = lb.beside(lb.table(gm, "b"), {"A_KA": ka}).set_index("method")
    assert t.loc["a", "A_KA"] == pytest.approx(32.0) and t.loc["b", "A_KA"] == pytest.approx(12.0)
    runs = {"zscl": {0: fomo_run("fomo-zscl", "zscl", 0, (30, 30))},
            "seqf": {0: fomo_run("fomo-ft", "seqf", 0, (30, 20))}}
    assert lb.memory_multipliers(runs).to_dict() == {"zscl": 1.25, "seqf": 1.0}
    absent = ["x seed 0", "y seed 0", "z seed 1", "z seed 2"]
    assert "`x seed 0`, `y seed 0`, `z seed 1` and 1 more" in lb.missing_track("Track 2", absent, "s")


def run_notebook(tmp_path, monkeypatch, board_edit) -> tuple[dict, list[str]]:
    """Every code cell of notebooks/leaderboard.ipynb in one namespace, on params.yaml edited by
    `board_edit` and the runs under tmp_path/runs; the markdown it displays."""
    import matplotlib
    import IPython.display

    matplotlib.use("Agg")
    shown = []

    def display(obj):   # a table is rendered, so a bad format fails here
        shown.append(obj.data) if isinstance(obj, IPython.display.Markdown) else obj.to_html()

    monkeypatch.setattr(IPython.display, "display", display)
    p = params()
    board_edit(p["report"]["leaderboard"])
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p, allow_unicode=True))
    monkeypatch.chdir(ROOT)
    nb = json.loads((ROOT / "notebooks" / "leaderboard.ipynb").read_text())
    ns = {}
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            exec("".join(cell["source"]), ns)
            if "tags" in cell["metadata"] and "parameters" in cell["metadata"]["tags"]:
                ns |= {"params_file": str(tmp_path / "params.yaml"), "runs_dir": str(tmp_path / "runs"),
                       "reports_dir": str(tmp_path / "reports")}
    return ns, shown


def test_the_notebook_ranks_track2_by_gm_when_track1_has_no_runs(tmp_path, monkeypatch):
    from vlcp.utils import write_json

    rng = np.random.default_rng(2)
    arms = {"fomo-ft": ("seqf", 30.0, 20.0), "lb2-er": ("er", 31.0, 22.0), "fomo-zscl": ("zscl", 33.0, 36.0)}
    for s in range(5):
        shift = rng.normal(0, 2)
        for e, (m, ka, zs) in arms.items():
            end = (ka + shift + rng.normal(0, 0.3), zs + rng.normal(0, 0.3))
            write_json(tmp_path / "runs" / f"track2-seed{s}" / e / f"seed{s}" / "results.json",
                       fomo_run(e, m, s, end, 200 if m == "er" else None))
    for s in (20, 21, 22):
        for e, end in (("fomo-joint", (45 + s % 2, 38)), ("fomo-ft", (30 + s % 3, 20))):
            write_json(tmp_path / "runs" / f"track2-calibration-seed{s}" / e / f"seed{s}" / "results.json",
                       fomo_run(e, "seqf", s, end))

    def edit(board):
        board["track2"] = {**board["track2"], "experiments": list(arms), "seeds": [0, 1, 2, 3, 4],
                           "calibration": {"experiments": ["fomo-joint", "fomo-ft"], "seeds": [20, 21, 22]}}

    ns, md = run_notebook(tmp_path, monkeypatch, edit)
    assert not ns["report"] and ns["report2"] and any(m.startswith("**Track 1 has no report yet**") for m in md)
    ranked = ns["ranked2"].set_index("method")
    assert list(ns["ranked2"]["method"])[0] == "zscl" and ranked.loc["zscl", "rank"] == "1"
    assert {"A_KA", "A_ZS", "vs seqf", "tied with best"} <= set(ranked.columns)
    assert ranked.loc["seqf", "vs seqf"] == "—" and ns["track2_power"].tasks == 2
    assert ns["shown2"].loc["er", "memory (pairs)"] == 200 and ns["shown2"].loc["zscl", "memory ×"] == 1.25
    claims = json.loads((tmp_path / "reports" / "leaderboard_claims.json").read_text())
    assert "ranking" not in claims and claims["track2"]["ranking"][0]["method"] == "zscl"
    assert claims["track2"]["power"]["metric"] == "GM"


def test_the_notebook_runs_without_any_runs_and_says_so_per_track(tmp_path, monkeypatch):
    ns, md = run_notebook(tmp_path, monkeypatch, lambda board: None)
    assert not ns["report"] and not ns["report2"] and ns["track2_power"] is None
    assert sum(m.startswith(("**Track 1 has no report yet**", "**Track 2 has no report yet**")) for m in md) == 2
    assert not (tmp_path / "reports").exists()
