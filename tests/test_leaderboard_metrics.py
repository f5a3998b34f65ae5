"""The leaderboard as a registered study: `vlcp report metrics --study leaderboard` on hand-made runs of
both tracks (each ranking's means over its track's seeds, rank intervals and tied group), and on none."""
import csv
import json

import numpy as np
import pytest
import yaml

from test_leaderboard_track2 import ROOT, fomo_run
from vlcp import cli
from vlcp.report import leaderboard as lb
from vlcp.report.study import load_study
from vlcp.utils import write_json


def group_run(experiment: str, method: str, seed: int, rm: float) -> dict:
    """A group stream's results, reduced to what the metrics read: the final Rm and mAP@1."""
    return {"experiment": experiment, "seed": seed, "config": {"method": {"name": method}},
            "cumulative": [{"test": {"Rm": rm - 5, "mAP@1": rm / 2}}, {"test": {"Rm": rm, "mAP@1": rm / 2}}]}


def board_params(tmp_path) -> dict:
    """params.yaml with a small leaderboard: track 1 of three methods (EWC compute-matched), track 2 of two."""
    p = yaml.safe_load((ROOT / "params.yaml").read_text())
    board = p["report"]["leaderboard"]
    board["track1"] |= {"experiments": ["lb1-seqf", "lb1-er", "lb1-ewc"], "compute_matched": ["lb1c-ewc"],
                        "seeds": [0, 1, 2, 3, 4]}
    board["track2"] |= {"experiments": ["fomo-ft", "fomo-zscl"], "seeds": [0, 1, 2]}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p, allow_unicode=True))
    return p


def metrics(tmp_path, monkeypatch) -> dict:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["report", "metrics", "--study", "leaderboard"]) == 0
    return json.loads((tmp_path / "metrics" / "leaderboard.json").read_text())


def test_the_leaderboard_is_a_study_without_a_claims_file():
    study = load_study("leaderboard")
    assert study.claims is None and study.runs == "runs-leaderboard"
    assert study.metric_sources({"report": {}})["claims"] is None


def test_metrics_rank_each_track_on_its_runs_at_its_seeds(tmp_path, monkeypatch):
    board_params(tmp_path)
    rng, rm = np.random.default_rng(5), {"lb1-seqf": 10.0, "lb1-er": 20.0, "lb1-ewc": 12.0, "lb1c-ewc": 11.0}
    method = {"lb1-seqf": "seqf", "lb1-er": "er", "lb1-ewc": "ewc", "lb1c-ewc": "ewc"}
    scores = {e: {} for e in rm}
    for s in range(5):
        shift = rng.normal(0, 3)
        for e, mu in rm.items():
            scores[e][s] = mu + shift + rng.normal(0, 0.3)
            folder = "matched" if e.startswith("lb1c") else "track1"
            write_json(tmp_path / "runs-leaderboard" / f"{folder}-seed{s}" / e / f"seed{s}" / "results.json",
                       group_run(e, method[e], s, scores[e][s]))
    for s in (20, 21, 22):   # calibration seeds: in no ranking
        write_json(tmp_path / "runs-leaderboard" / f"calibration-seed{s}" / "lb1-seqf" / f"seed{s}" / "results.json",
                   group_run("lb1-seqf", "seqf", s, 99.0))
    ends = {"fomo-ft": ("seqf", (30.0, 20.0)), "fomo-zscl": ("zscl", (33.0, 36.0))}
    for s in range(3):
        for e, (m, (ka, zs)) in ends.items():
            write_json(tmp_path / "runs-leaderboard" / f"track2-seed{s}" / e / f"seed{s}" / "results.json",
                       fomo_run(e, m, s, (ka + s, zs)))
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "leaderboard_claims.json").write_text('{"report": "Leaderboard", "claims": []}')
    m = metrics(tmp_path, monkeypatch)

    assert m["run_count"] == 4 * 5 + 2 * 3 and m["claims"] == {}          # no claims file: no verdicts counted
    assert m["experiments"]["lb1-seqf"]["Rm"] == pytest.approx(np.mean(list(scores["lb1-seqf"].values())), abs=1e-4)
    assert m["experiments"]["fomo-zscl"]["GM"] == pytest.approx(np.mean([((33 + s) * 36) ** 0.5 for s in range(3)]),
                                                                abs=1e-4)
    track1 = m["rankings"]["track1"]
    matched = {"seqf": scores["lb1-seqf"], "er": scores["lb1-er"], "ewc": scores["lb1c-ewc"]}
    assert list(track1["methods"]) == ["er", "ewc", "seqf"] and track1["best"] == "er"
    ranks = lb.rank_intervals(matched)
    for name, v in matched.items():
        row = track1["methods"][name]
        assert row["mean"] == pytest.approx(np.mean(list(v.values())), abs=1e-4) and row["seeds"] == 5
        assert (row["rank_low"], row["rank_high"]) == ranks[name]
    assert ranks["er"] == (1, 1) and track1["tied_with_best"] == 1 and track1["methods"]["er"]["tied_with_best"]
    equal = m["rankings"]["track1_equal_steps"]["methods"]
    assert equal["ewc"]["mean"] == pytest.approx(np.mean(list(scores["lb1-ewc"].values())), abs=1e-4)
    track2 = m["rankings"]["track2"]
    assert track2["best"] == "zscl" and set(track2["methods"]) == {"zscl", "seqf"}
    assert track2["methods"]["seqf"]["mean"] == pytest.approx(np.mean([((30 + s) * 20) ** 0.5 for s in range(3)]),
                                                              abs=1e-4)
    rows = list(csv.DictReader((tmp_path / "plots" / "leaderboard.csv").open()))
    assert list(rows[0]) == ["task", "lb1-seqf", "lb1-er", "lb1-ewc", "lb1c-ewc"] and len(rows) == 2


def test_metrics_without_runs_hold_none(tmp_path, monkeypatch):
    board_params(tmp_path)
    assert metrics(tmp_path, monkeypatch) == {"run_count": 0, "experiments": {}, "claims": {}, "rankings": {}}
    assert (tmp_path / "plots" / "leaderboard.csv").read_text() == "task\n"
