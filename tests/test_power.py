"""Power tables and levers, the calibration fingerprints, and the older MDE, seeds to decide, scaling
rule and `power_verdict` (tests/legacy_claims.py). The engine's own rules are simulated in
tests/test_verdict_rules.py."""
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

import legacy_claims as old   # the older power rules, which tests/legacy_claims.py keeps
from vlcp.report import power as pw


def test_mde_of_one_run_each_with_a_known_sd_is_z_plus_z():
    # the normal case by hand: (z_0.975 + z_0.8) × σ_d
    assert old.mde(1.0, 1) == pytest.approx(1.959964 + 0.841621, abs=1e-5)
    assert old.mde(2.0, 1) == pytest.approx(2 * (1.959964 + 0.841621), abs=1e-5)
    assert old.mde(1.0, 4, paired=False) == pytest.approx((1.959964 + 0.841621) / 2, abs=1e-5)


def test_mde_shrinks_with_seeds_and_grows_with_comparisons():
    ms = [old.mde(1.0, n) for n in (2, 3, 5, 10, 30)]
    assert all(x > y for x, y in zip(ms, ms[1:]))
    ks = [old.mde(1.0, 5, comparisons=k) for k in (1, 2, 10, 80)]
    assert all(x < y for x, y in zip(ks, ks[1:]))
    assert old.detection_power(old.mde(1.0, 5, comparisons=10), 1.0, 5) == pytest.approx(0.8 ** 0.1, abs=1e-6)


def test_seeds_to_decide_is_the_fewest_that_detect_the_effect():
    n = old.seeds_to_decide(1.0, 1.0)
    assert old.mde(1.0, n) <= 1.0 < old.mde(1.0, n - 1)
    assert old.seeds_to_decide(0.01, 1.0) is None         # more than MAX_SEEDS
    assert old.seeds_to_decide(-1.0, 1.0) is None         # no positive effect to detect
    assert old.seeds_to_decide(1.0, 1.0, comparisons=10) > n


def test_scaled_effect_is_the_papers_share_of_its_headroom_times_ours():
    assert old.scaled_effect(2.0, 10.0, 5.0) == pytest.approx(1.0)
    assert old.scaled_effect(-3.0, 12.0, 4.0) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="headroom"):
        old.scaled_effect(1.0, 0.0, 5.0)


@pytest.mark.parametrize("low,high,scaled,mde,refute_high,verdict", [
    (0.5, 3.0, 2.0, 1.0, None, "confirmed"),        # the interval clears 0
    (-1.0, 1.5, 2.0, 1.0, None, "refuted"),         # ... excludes the scaled effect
    (-1.0, 3.0, 2.0, 2.5, None, "underpowered"),    # the MDE is above it
    (-1.0, 3.0, 2.0, 1.5, None, "inconclusive"),
    (-1.0, 3.0, 2.0, 1.5, 1.9, "refuted"),          # one comparison's Bonferroni interval excludes it
    (-1.0, 1.5, 2.0, 9.0, None, "refuted"),         # an interval that excludes it refutes, however weak the study
])
def test_power_verdict_returns_each_verdict(low, high, scaled, mde, refute_high, verdict):
    assert old.power_verdict(low, high, scaled, mde, refute_high=refute_high) == verdict


def test_study_power_from_paired_seeds_or_a_subset_spread_and_its_line():
    from vlcp.report.stats import seed_spread

    gains = pd.DataFrame({"teaches": [True, True, False]})
    p = pw.study_power("Rm", [10.0, 12.0, 11.0], [2.0, 3.0, 2.5], gains, headroom_from="JointT − SeqF")
    assert p.headroom == pytest.approx(8.5) and p.sigma_d == pytest.approx(np.std([8, 9, 8.5], ddof=1))
    assert (p.tasks_teaching, p.tasks, p.seeds) == (2, 3, 3)
    assert "meets both power goals" in pw.power_line(p)
    sd, how = pw.spread_sigma(seed_spread({"Rm": {"a": [1.0, 3.0], "b": [2.0, 4.0]}}, "a, b"), "Rm")
    assert sd == pytest.approx(2.0) and "2 dof" in how
    assert pw.spread_sigma(None, "Rm")[0] is None
    assert pw.spread_dof(seed_spread({"Rm": {"a": [1.0, 3.0], "b": [2.0, 4.0]}}, "a, b"), "Rm") == 2   # Σ (seeds − 1)
    assert pw.spread_dof(None, "Rm") is None
    one = pw.study_power("Rm", [10.0], [2.0], None, headroom_from="x", sigma_d=sd, noise_from=how)
    assert one.headroom_over_noise == pytest.approx(4.0) and one.tasks == 0
    line = pw.power_line(one)
    assert "falls short of H/σ_d ≥ 10 and teaching" in line and "no per-task scores" in line
    with pytest.raises(ValueError, match="≥ 2 seeds"):
        pw.study_power("Rm", [10.0], [2.0], gains, headroom_from="x")


def test_the_noise_of_a_few_seeds_is_itself_uncertain():
    """σ from 2 dof (3 seeds): chi-square 97.5 % / 2.5 % points 7.378 and 0.0506, so σ ∈ [√(2/7.378),
    √(2/0.0506)] = [0.521, 6.29] × the estimate; a study's H/σ_d carries that interval."""
    lo, hi = pw.sigma_interval(1.0, 2)
    assert lo == pytest.approx(0.5207, abs=1e-3) and hi == pytest.approx(6.285, abs=1e-2)
    p = pw.study_power("Rm", [10.0, 12.0, 11.0], [2.0, 3.0, 2.5], None, headroom_from="x")
    assert p.sigma_dof == 2
    a, b = p.headroom_over_noise_interval()
    assert a == pytest.approx(p.headroom / (p.sigma_d * hi)) and b == pytest.approx(p.headroom / (p.sigma_d * lo))
    assert "95 % interval" in pw.power_line(p) and p.to_dict()["headroom_over_noise_interval"] == (a, b)
    assert pw.power_frame({"s": p}).loc[0, "H/σ_d 95 % interval"] == f"{a:.1f}–{b:.1f}"
    given = pw.study_power("Rm", [10.0], [2.0], None, headroom_from="x", sigma_d=2.0)
    assert given.headroom_over_noise_interval() is None and "95 % interval" not in pw.power_line(given)
    with pytest.raises(ValueError, match="dof"):
        pw.sigma_interval(1.0, 0)


def test_equivalence_mde_is_what_two_one_sided_tests_show_80_percent_of_the_time():
    from scipy import stats

    assert old.equivalence_mde(1.0) == pytest.approx(stats.norm.ppf(0.95) + stats.norm.ppf(0.9))     # one run each, known sd
    assert old.equivalence_mde(2.0, 5) > (stats.norm.ppf(0.95) + stats.norm.ppf(0.9)) * 2 / math.sqrt(5)   # an estimated sd costs
    # simulated: at a true difference of 0 and a margin of the MDE, the paired 90 % interval lies inside it ≈ 80 % of the time
    rng = np.random.default_rng(1)
    n, sd = 8, 1.0
    m = old.equivalence_mde(sd, n)
    d = rng.normal(0, sd, (4000, n))
    half = stats.t.ppf(0.95, n - 1) * d.std(axis=1, ddof=1) / math.sqrt(n)
    inside = (np.abs(d.mean(axis=1)) + half < m).mean()
    assert 0.77 < inside < 0.83
    assert old.seeds_to_show_equivalence(m, sd) <= n and old.seeds_to_show_equivalence(-1, sd) is None


def test_levers_frame_from_recorded_rows():
    """benchmarks/power_levers.py's rows → H (mean upper − lower), σ_d (sd of the per-seed
    differences), tasks that teach, and whether the setting meets the goal."""
    from vlcp.report.power import levers_frame

    row = {"study": "ctp", "label": "640 steps", "seeds": [10, 11, 12], "upper": "u", "lower": "l", "metric": "final Rm",
           "values": {"10": [10.0, 4.0], "11": [11.0, 4.5], "12": [12.0, 5.5]},   # differences 6, 6.5, 6.5
           "teaches": [True] * 7 + [False] * 2, "lower_train_seconds": [30.0, 32.0, 34.0], "date": "d", "commit": "c"}
    weak = {**row, "label": "weak", "values": {"10": [10.0, 4.0], "11": [11.0, 9.0], "12": [9.0, 8.0]}}
    df = levers_frame([row, weak, {**row, "study": "incclip"}], "ctp").set_index("setting")
    assert list(df.index) == ["640 steps", "weak"]
    sd = float(np.std([6, 6.5, 6.5], ddof=1))
    assert df.loc["640 steps", "H"] == pytest.approx(19 / 3) and df.loc["640 steps", "σ_d"] == pytest.approx(sd)
    assert df.loc["640 steps", "tasks that teach"] == "7/9" and df.loc["640 steps", "lower's training s"] == 32.0
    assert bool(df.loc["640 steps", "meets the goal"]) and not bool(df.loc["weak", "meets the goal"])
    assert levers_frame([row], "fomo").empty


def test_levers_frame_reads_a_candidate_metric():
    from vlcp.report.power import levers_frame

    row = {"study": "incclip", "label": "study", "seeds": [10, 11], "upper": "u", "lower": "l", "metric": "Average",
           "values": {"10": [20.0, 10.0], "11": [22.0, 11.0]}, "teaches": None, "lower_train_seconds": [1.0, 1.0],
           "more_values": {"R@1": {"10": [4.0, 1.0], "11": [5.0, 1.0]}}, "date": "d", "commit": "c"}
    df = levers_frame([row, {**row, "label": "old", "more_values": {}}], "incclip", "R@1")
    assert list(df["setting"]) == ["study"] and df["H"].iloc[0] == pytest.approx(3.5) and df["metric"].iloc[0] == "R@1"
    assert df["tasks that teach"].iloc[0] == "0/0" and not df["meets the goal"].iloc[0]


def test_levers_frame_reads_tasks_that_teach_on_another_pool():
    """`teach_on`: tasks that teach (and the goal) read on that pool, the test pools' reading beside
    it; a row that did not record the pool says so and cannot meet the goal."""
    from vlcp.report.power import lever_powers, levers_frame

    row = {"study": "spine", "label": "study", "seeds": [10, 11, 12], "upper": "u", "lower": "l", "metric": "final Rm",
           "values": {"10": [10.0, 4.0], "11": [11.0, 4.5], "12": [12.0, 5.5]}, "teaches": [True] * 3 + [False] * 6,
           "more_teaches": {"unseen_style": [True] * 8 + [False]}, "lower_train_seconds": [1.0] * 3,
           "date": "d", "commit": "c"}
    old = {**row, "label": "old"}
    del old["more_teaches"]
    df = levers_frame([row, old], "spine", teach_on="unseen_style").set_index("setting")
    assert df.loc["study", "tasks that teach"] == "8/9" and df.loc["study", "on the test pools"] == "3/9"
    assert df.loc["old", "tasks that teach"] == "not recorded" and df.loc["old", "on the test pools"] == "3/9"
    assert bool(df.loc["study", "meets the goal"]) and not bool(df.loc["old", "meets the goal"])
    assert not bool(levers_frame([row], "spine").set_index("setting").loc["study", "meets the goal"])   # 3/9 on test
    assert lever_powers([row], "spine", teach_on="unseen_style")["study"].to_dict()["teaching_from"] == "unseen_style"


def test_power_levers_records_one_row_per_setting_and_keeps_ledger_seeds_out(tmp_path):
    """benchmarks/power_levers.py: a re-measured setting replaces its row; the ledger's seeds (0-9)
    are refused, so a lever is never judged on the runs the verdicts read."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import power_levers

    out = tmp_path / "levers.json"
    power_levers.record({"study": "ctp", "label": "a", "v": 1}, out)
    power_levers.record({"study": "ctp", "label": "b", "v": 2}, out)
    power_levers.record({"study": "ctp", "label": "a", "v": 3}, out)
    import json
    rows = json.loads(out.read_text())["rows"]
    assert [(r["label"], r["v"]) for r in rows] == [("b", 2), ("a", 3)]
    with pytest.raises(SystemExit):
        power_levers.main(["--study", "ctp", "--label", "x", "--seeds", "0", "1", "--out", str(out)])


def test_blocked_noise_reads_a_repros_paired_runs_both_ways():
    """benchmarks/blocked_noise.py: today's paired sd (each pair's own, n − 1 dof) against the
    seeds-as-blocks residual (pooled over every experiment); a seed effect every experiment shares
    is noise to the single-seed spread, not to the blocks."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import blocked_noise

    rng = np.random.default_rng(1)
    shared = 5 * rng.normal(size=3)                    # one draw per seed, shared by every experiment
    values = {f"e{k}": list(k + shared + 0.5 * rng.normal(size=3)) for k in range(12)}
    row = blocked_noise.measure(values)
    assert row["experiments"] == 12 and row["seeds"] == 3 and row["blocked_sd"]["dof"] == 22
    assert row["paired_own_sd"]["dof"] == 2 and row["single_seed_sd"]["sd"] > 3 * row["blocked_sd"]["sd"]
    assert row["mde_paired_blocked"] < row["mde_paired_today"]      # 22 dof against 2, at similar sds
    params = {"seeds": [0, 1], "report": {
        "overview": {"experiments": ["a", "b"]}, "ctp": {"experiments": ["c", "d"], "seeds": [0, 1]},
        **{s: {"seeds": [0], "spread": {"experiments": ["x"], "seeds": [1]}, "experiments": ["x", "y"],
               "long": {"runs": f"runs-{s}-long", "seeds": [1, 2]}} for s in ("incclip", "cllclip")},
        "fomo": {"seed": 0, "spread": {"experiments": ["f"], "seeds": [1]}, "studies": {"m": ["f", "g"]},
                 "long": {"runs": "runs-fomo-long", "seeds": [1, 2]}}}}
    assert blocked_noise.study_runs(params, long=False)["incclip"] == (["runs-incclip"], ["x"], [0, 1])
    assert blocked_noise.study_runs(params, long=True)["fomo"] == (["runs-fomo", "runs-fomo-long"], ["f", "g"], [0, 1, 2])


def test_levers_intro_says_how_the_lever_rows_read_sigma_d():
    """The lever table pairs by seed; a power table above it may not (IncCLIP's, FoMo's and CLL-CLIP's read
    the subset's √2 × pooled seed std): the sentence says so, with the study's own note and the goal."""
    from vlcp.report.power import levers_intro

    plain, noted = levers_intro(), levers_intro("H here is joint − full fine-tuning", goal=12)
    assert "paired by seed" in plain and "σ_d from" in plain and "H/σ_d ≥ 10 " in plain and "never the ledger's" in plain
    assert "; H here is joint − full fine-tuning;" in noted and "H/σ_d ≥ 12 " in noted and "; ;" not in plain


# -- a calibrated headroom holds for the configuration it was measured on (study.calibration_mismatch) --

def _cfg(**train):
    return {"name": "seqf", "seed": 0, "data": {"root": "data/emoji", "seed": 0, "workers": 4},
            "train": {"steps": 240, "num_threads": 2, "progress": True} | train, "eval": {"batch_size": 512}}


def test_a_fingerprint_ignores_seed_paths_and_execution_but_not_what_the_runs_measure():
    from vlcp.report.study import calibration_fingerprint

    base = calibration_fingerprint(_cfg())
    moved = {"seed": 7, "data": {"root": "/elsewhere", "seed": 0, "workers": 1},
             "train": {"steps": 240, "num_threads": 1, "progress": False}, "eval": {"batch_size": 64}}
    assert calibration_fingerprint(_cfg() | moved) == base and len(base) == 12
    assert calibration_fingerprint(_cfg(steps=12)) != base                  # another step count
    assert calibration_fingerprint(_cfg() | {"data": {"root": "data/emoji", "seed": 3, "workers": 4}}) != base  # split


def test_calibration_mismatch_names_the_experiment_and_both_fingerprints():
    from vlcp.errors import VlcpError
    from vlcp.report.study import calibration_fingerprint, calibration_mismatch

    on = {"seqf": calibration_fingerprint(_cfg())}
    same = {"seqf": [{"config": _cfg() | {"seed": s}} for s in (0, 1)]}
    assert calibration_mismatch({"calibrated_on": on}, same, "report.x.power") is None
    assert calibration_mismatch({}, {"seqf": [{"config": _cfg(steps=12)}]}, "report.x.power") is None   # nothing recorded
    assert calibration_mismatch({"calibrated_on": on}, {"er": [{"config": _cfg()}]}, "report.x.power") is None  # not run here
    why = calibration_mismatch({"calibrated_on": on}, {"seqf": [{"config": _cfg(steps=12)}]}, "report.x.power")
    here = calibration_fingerprint(_cfg(steps=12))
    assert why.startswith("report.x.power was calibrated on another configuration of seqf") and on["seqf"] in why and here in why
    mixed = {"seqf": [{"config": _cfg()}, {"config": _cfg(steps=12)}]}      # one seed ran another setup
    assert calibration_mismatch({"calibrated_on": on}, mixed, "report.x.power") is not None
    with pytest.raises(VlcpError, match=r"report.x.power.calibrated_on"):
        calibration_mismatch({"calibrated_on": ["seqf"]}, same, "report.x.power")


def test_every_calibration_in_params_matches_the_default_configuration():
    """Each study's calibrated headroom was measured on its experiments as the default runs them: a
    change to those experiments' settings fails here until they are re-calibrated (or, where the
    change leaves the runs' numbers alone, the fingerprint is re-recorded)."""
    from vlcp.config import load_params, resolve_experiment
    from vlcp.report.study import calibration_fingerprint

    from vlcp.report.study import load_study, registered

    params = load_params(str(Path(__file__).resolve().parents[1] / "params.yaml"))
    studies = {k: v["power"] for k, v in params["report"].items() if isinstance(v, dict) and "headroom" in (v.get("power") or {})}
    studies |= {s: c.calibration for s in registered() if (c := load_study(s).claims) is not None and c.calibration}   # claims files
    assert set(studies) == {"overview", "incclip", "cllclip", "ctp", "fomo"}
    for study, power in studies.items():
        for e, fp in power["calibrated_on"].items():
            assert calibration_fingerprint(resolve_experiment(params, e, 0).to_dict()) == fp, (study, e)
    # a study that starts from a pretrained θ0 names its pretraining run too (read from base_runs)
    for study, power in studies.items():
        bases = {Path(cfg["model"]["pretrained"]).stem for e in power["calibrated_on"]
                 if str((cfg := resolve_experiment(params, e, 0).to_dict())["model"].get("pretrained") or "").endswith(".pt")}
        assert bases <= set(power["calibrated_on"]) and (not bases or power.get("base_runs")), (study, bases)
    # ... and its report stages (default and long) depend on that folder, so a re-pretrained θ0 re-renders them
    stages = {"cllclip": "cllclip_teir", "ctp": "ctp_tables", "fomo": "fomo_figures"}
    root = Path(__file__).resolve().parents[1]
    for dvc_file, suffix in (("dvc.yaml", ""), ("long/dvc.yaml", "_long")):
        spec = yaml.safe_load((root / dvc_file).read_text())["stages"]
        for study, power in studies.items():
            if power.get("base_runs"):
                assert power["base_runs"] in spec[stages[study] + suffix]["deps"], (dvc_file, study)


def test_a_calibration_covers_the_theta0_its_runs_start_from(tmp_path):
    """A study whose runs load a pretrained θ0 (model.pretrained: a weights file) lists that
    pretraining run in calibrated_on; its results are read from base_runs, so a θ0 pretrained
    otherwise (here: more steps) voids the calibration though the stream's own configs match."""
    from vlcp.errors import VlcpError
    from vlcp.report.study import calibration_fingerprint, calibration_mismatch, pretraining_runs
    from vlcp.utils import write_json

    base = _cfg() | {"name": "x-base"}
    power = {"calibrated_on": {"seqf": calibration_fingerprint(_cfg()), "x-base": calibration_fingerprint(base)},
             "base_runs": str(tmp_path)}
    same = {"seqf": [{"config": _cfg()}]}
    assert pretraining_runs(power, "report.x.power") == {}                 # not pretrained here: nothing to check
    assert calibration_mismatch(power, same, "report.x.power") is None
    write_json(tmp_path / "x-base" / "seed0" / "results.json", {"config": base})
    assert [r["config"] for r in pretraining_runs(power, "report.x.power")["x-base"]] == [base]
    assert calibration_mismatch(power, same, "report.x.power") is None
    write_json(tmp_path / "x-base" / "seed0" / "results.json", {"config": _cfg(steps=480) | {"name": "x-base"}})
    why = calibration_mismatch(power, same, "report.x.power")
    assert why.startswith("report.x.power was calibrated on another configuration of x-base") and "θ0" in why
    assert calibration_mismatch({k: v for k, v in power.items() if k != "base_runs"}, same, "report.x.power") is None
    with pytest.raises(VlcpError, match=r"report.x.power.base_runs"):
        calibration_mismatch(power | {"base_runs": ["runs"]}, same, "report.x.power")