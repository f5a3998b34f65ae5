"""The IncCLIP report's table and claim functions on hand-made results."""
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vlcp.report import incclip as ic
from vlcp.report.refs import paper_table
from vlcp.report.results import step_time


def result(acc, matrix, seconds):
    cls = {k: acc for k in ic.CLASSIFICATION}
    cell = {f"{d}@{k}": acc for d in ("TR", "IR") for k in (1, 5, 10)} | {"Rm": acc}
    return {"heldout": [{"classification": cls, "retrieval": {"test": cell, "unseen_style": cell}}],
            "matrix": {"test": {"Rm": matrix}},
            "train": [{"seconds": 100.0, "steps": 10}, {"seconds": seconds, "steps": 20}, {"seconds": seconds, "steps": 20}]}


def test_classification_average_and_retrieval_columns():
    r = result(12.0, [[1.0]], 1.0)
    row = ic.classification(r)
    assert row["Average"] == 12.0 and len(row) == len(ic.CLASSIFICATION) + 1
    t = ic.retrieval(r)
    assert t[("unseen items", "I2T", "R@5")] == 12.0 and len(t) == 12


def test_chunk_bwt_hand_computed():
    # after step 1: chunk 0 = 10; after step 2: chunk 0 = 4, chunk 1 = 8 -> BWT = 4 - 10 = -6
    r = result(0.0, [[10.0, 0.0], [4.0, 8.0]], 1.0)
    assert ic.chunk_bwt(r, "Rm", "test") == pytest.approx(-6.0)


def test_step_time_skips_the_first_task():
    assert step_time(result(0, [[0]], 2.0)) == pytest.approx(4.0 / 40)


# ---------------------------------------------------------------------------------------------
# the claims ledger: each claim function, fed data for each verdict it can return

SRC = "test sd"


def subset(er, inc):
    """The seed subset's runs: Average = mean R@1 = the value, BWT (Rm) = the value − 10."""
    run = lambda a: result(a, [[10.0, 0.0], [a, 8.0]], 1.0)  # noqa: E731
    return {"ic4-er": [run(a) for a in er], "ic4-incclip": [run(a) for a in inc]}


def test_spread_is_measured_on_the_seed_subset_and_names_its_runs_and_seeds():
    sp = ic.spread(subset([10.0, 12.0, 14.0], [20.0, 21.0, 22.0]), [0, 1, 2])   # seed stds 2 and 1
    for m in ("average", "r1_mean", "bwt_rm"):
        d = sp["metrics"][m]
        assert d["std_per_experiment"] == {"ic4-er": pytest.approx(2.0), "ic4-incclip": pytest.approx(1.0)}
        assert d["pooled_std"] == pytest.approx(math.sqrt(2.5)) and d["dof"] == 4
        assert d["difference_spread"] == pytest.approx(math.sqrt(5.0))
    assert sp["seeds"] == [0, 1, 2] and sp["experiments"] == ["ic4-er", "ic4-incclip"]
    sds = ic.noise_sds(sp, 3.4)
    assert sds["average"][0] == pytest.approx(math.sqrt(5.0)) and sds["average"].dof == 4
    assert "ic4-er, ic4-incclip at seeds 0, 1, 2" in sds["bwt_rm"][1] and "Student's t on 4 dof" in sds["bwt_rm"][1]
    assert all(n.dof == 4 for n in sds.values())
    t = ic.spread_frame(sp)
    assert list(t.index) == ["average", "r1_mean", "bwt_rm"] and t.loc["average", "dof"] == 4
    assert t.loc["average", "seed std ic4-er"] == pytest.approx(2.0)


def test_noise_sds_without_a_spread_fall_back_to_the_noise_floor():
    sp = ic.spread(subset([10.0, 12.0], [20.0, 21.0]), [0, 1])
    del sp["metrics"]["bwt_rm"]
    sds = ic.noise_sds(sp, 3.4)
    assert sds["bwt_rm"] == (3.4, "report.incclip.noise_floor (seed subset not run)", None)   # a floor: normal quantile
    assert "seeds 0, 1" in sds["average"][1] and sds["average"].dof == 2
    assert ic.noise_sds(None, 2.0)["average"] == (2.0, "report.incclip.noise_floor (seed subset not run)", None)


def test_a_large_seed_spread_turns_a_gap_confirmed_on_the_floor_inconclusive():
    vals = {"incclip": [15.0], "er": [10.0], "ucir": [11.0]}
    floor = ic.noise_sds(None, 1.0)["average"]
    c = ic.beats_all("c", vals, "incclip", ["er", "ucir"], floor.sd, floor.source, "", sd_dof=floor.dof)
    assert c.verdict == "confirmed"
    wide = ic.noise_sds(ic.spread(subset([0.0, 10.0, 20.0], [5.0, 15.0, 25.0]), [0, 1, 2]), 1.0)["average"]
    assert wide[0] == pytest.approx(10 * math.sqrt(2))
    c = ic.beats_all("c", vals, "incclip", ["er", "ucir"], wide.sd, wide.source, "", sd_dof=wide.dof)
    assert c.verdict == "inconclusive" and "at seeds 0, 1, 2" in c.evidence


def few_dof():
    """The seed spread of two experiments at 2 seeds each (seed stds √2): sd of a difference 2 on 2 dof."""
    n = ic.noise_sds(ic.spread(subset([10.0, 12.0], [20.0, 22.0]), [0, 1]), 1.0)["average"]
    assert n.sd == pytest.approx(2.0) and n.dof == 2
    return n


# each claim function on one single-seed gap that clears the normal interval on sd 2 (q 1.96; 90 %: 1.645) but
# not Student's t on 2 dof (q 4.30; 90 %: 2.92)
ONE_GAP = {
    "beats_all": lambda n, **k: ic.beats_all("c", {"incclip": [15.0], "er": [10.0]}, "incclip", ["er"],
                                             n.sd, n.source, "", **k),
    "greater_claim": lambda n, **k: ic.greater_claim("c", [15.0], [10.0], n.sd, n.source, "", **k),
    "ordered_claim": lambda n, **k: ic.ordered_claim("c", {"a": [15.0], "b": [10.0]}, ["a", "b"],
                                                     n.sd, n.source, "", **k),
    "gain_grows": lambda n, **k: ic.gain_grows({"incclip": [12.0], "er": [10.0]}, {"incclip": [19.0], "er": [10.0]},
                                               "incclip", ["er"], n.sd, n.source, **k),      # 7 ± q × 2√2
    "above_at_every_step": lambda n, **k: ic.above_at_every_step(
        {"4 steps": {"incclip": [[0.0, 15.0]], "er": [[0.0, 10.0]]}}, "incclip", ["er"], n.sd, n.source, **k),
    "slightly_better": lambda n, **k: ic.slightly_better(                                   # margin ±5
        {"4 steps": {"er": [10.0], "ucir": [10.0], "co2l": [10.0]}}, ["ucir", "co2l"], "er", 0.5, "half", n.sd, n.source, **k),
}


@pytest.mark.parametrize("name", list(ONE_GAP))
def test_single_seed_claims_use_t_on_the_spreads_dof(name):
    n = few_dof()
    assert ONE_GAP[name](n).verdict == "confirmed"                      # normal quantile on the same sd
    c = ONE_GAP[name](n, sd_dof=n.dof)
    assert c.verdict == "inconclusive" and "Student's t on 2 dof" in c.evidence
    floor = ic.noise_sds(None, 2.0)["average"]                          # the fallback floor: normal, as before
    assert ONE_GAP[name](floor, sd_dof=floor.dof).verdict == "confirmed"


def test_subset_spread_reads_the_runs_dir_and_falls_back_when_a_run_is_missing(tmp_path):
    from vlcp.errors import VlcpError
    from vlcp.utils import write_json

    runs = subset([10.0, 12.0, 14.0], [20.0, 21.0, 22.0])
    study = {"seeds": [0], "noise_floor": 3.4, "spread": {"experiments": ["ic4-er", "ic4-incclip"], "seeds": [1, 2]}}
    for exp, rs in runs.items():
        for seed, r in enumerate(rs):
            if (exp, seed) != ("ic4-incclip", 2):
                write_json(tmp_path / exp / f"seed{seed}" / "results.json", r)
    sp, found, note = ic.subset_spread(tmp_path, study)
    assert sp is None and list(found) == ["ic4-er"] and len(found["ic4-er"]) == 3
    assert "missing ic4-incclip seed 2" in note and "noise_floor" in note and "3.4" in note
    write_json(tmp_path / "ic4-incclip" / "seed2" / "results.json", runs["ic4-incclip"][2])
    sp, found, note = ic.subset_spread(tmp_path, study)
    assert sp["metrics"]["average"]["dof"] == 4 and sp["seeds"] == [0, 1, 2] and len(found["ic4-incclip"]) == 3
    assert "ic4-er, ic4-incclip at seeds 0, 1, 2" in note
    sp, found, note = ic.subset_spread(tmp_path, {"seeds": [0], "noise_floor": 3.4})
    assert sp is None and found == {} and "No seed subset" in note
    with pytest.raises(VlcpError, match="report.incclip.spread"):
        ic.subset_spread(tmp_path, {"seeds": [0], "spread": {"experiments": "ic4-er"}})


@pytest.mark.parametrize("inc, sd, verdict", [(20.0, 1.0, "confirmed"), (12.0, 6.4, "inconclusive"),
                                              (9.0, 1.0, "not confirmed")])
def test_beats_all_every_verdict(inc, sd, verdict):
    vals = {"incclip": [inc], "er": [10.0], "ucir": [11.0]}
    c = ic.beats_all("IncCLIP beats every baseline (x)", vals, "incclip", ["er", "ucir"], sd, SRC, "Table 1")
    assert c.verdict == verdict and c.seeds == 1
    assert c.effect == pytest.approx(inc - 11.0)       # the closest rival's effect is shown
    assert "sd" in c.evidence and c.source == "Table 1"


def test_beats_all_is_not_confirmed_when_one_rival_wins():
    vals = {"incclip": [20.0], "er": [10.0], "ucir": [25.0]}
    assert ic.beats_all("c", vals, "incclip", ["er", "ucir"], 1.0, SRC, "").verdict == "not confirmed"


def test_beats_all_pairs_seeds_when_there_are_several():
    vals = {"incclip": [11.0, 12.0, 13.0], "er": [10.0, 11.0, 12.0]}
    c = ic.beats_all("c", vals, "incclip", ["er"], 0.1, SRC, "")
    assert c.verdict == "confirmed" and c.seeds == 3 and "paired by seed" in c.evidence


def test_seed_blocks_pool_every_experiment_at_common_seeds_and_reach_the_claims():
    from vlcp.report.claims import block_spread
    runs = subset([10.0, 12.0, 15.0], [20.0, 21.0, 22.0]) | {"ic4-ucir": [result(a, [[10.0, 0.0], [a, 8.0]], 1.0)
                                                                for a in (11.0, 14.0, 14.5)]}
    for rs in runs.values():
        for s, r in enumerate(rs):
            r["seed"] = s
    blocks = ic.seed_blocks(runs, "t")
    ref = block_spread({e: [ic.average(r) for r in rs] for e, rs in runs.items()})
    assert blocks["average"].dof == 4 and blocks["average"].sd == pytest.approx(ref["difference_spread"])
    assert set(blocks) == set(ic.SPREAD_METRICS)
    vals = {e.split("-")[1]: [ic.average(r) for r in rs] for e, rs in runs.items()}
    c = ic.beats_all("c", vals, "incclip", ["er", "ucir"], None, SRC, "", block=blocks["average"])
    assert "seeds as blocks" in c.evidence
    assert ic.seed_blocks(subset([10.0, 12.0], [20.0, 22.0]))["average"] is None    # two experiments: nothing pooled


@pytest.mark.parametrize("a, verdict", [(20.0, "confirmed"), (11.0, "inconclusive"), (9.0, "not confirmed")])
def test_greater_claim_every_verdict(a, verdict):
    c = ic.greater_claim("Joint stays above IncCLIP", [a], [10.0], 2.0, SRC, "§4.2.1", ("Joint", "IncCLIP"))
    assert c.verdict == verdict and "Joint" in c.evidence


def test_greater_claim_without_an_sd_is_never_confirmed():
    assert ic.greater_claim("c", [50.0], [10.0], None, SRC, "").verdict == "inconclusive"


@pytest.mark.parametrize("inc8, verdict", [(40.0, "confirmed"), (22.0, "inconclusive"), (15.0, "not confirmed")])
def test_gain_grows_every_verdict_and_scales_the_sd(inc8, verdict):
    v4 = {"incclip": [20.0], "er": [10.0], "ucir": [10.0]}      # gain 10
    v8 = {"incclip": [inc8], "er": [10.0], "ucir": [10.0]}
    c = ic.gain_grows(v4, v8, "incclip", ["er", "ucir"], 2.0, SRC)
    assert c.verdict == verdict and c.effect == pytest.approx(inc8 - 20.0)
    assert f"sd {2.0 * math.sqrt(1.5):.2f}" in c.evidence    # a gain over 2 baselines: × √(1 + 1/2)


def test_slight_margin_comes_from_the_papers_table1():
    rel, how = ic.slight_margin(paper_table("incclip_table1"))
    assert rel == pytest.approx((12.62 - 11.02) / 11.02)      # Co2L over ER at 8 steps, the largest
    assert "co2l at 8 steps" in how


@pytest.mark.parametrize("ucir, sd, verdict", [(10.2, 0.1, "confirmed"), (10.5, 6.4, "inconclusive"),
                                               (20.0, 0.1, "not confirmed")])
def test_slightly_better_is_an_equivalence_with_the_stated_margin(ucir, sd, verdict):
    vals = {"4 steps": {"er": [10.0], "ucir": [ucir], "co2l": [10.1]}}
    c = ic.slightly_better(vals, ["ucir", "co2l"], "er", 0.145, "paper", sd, SRC)   # margin ±1.45
    assert c.verdict == verdict
    assert "margin ±1.4" in c.evidence and "14.5%" in c.claim


def test_slight_gain_is_the_margins_gain_in_points():
    pts, how = ic.slight_gain(paper_table("incclip_table1"))
    assert pts == pytest.approx(12.62 - 11.02) and "1.60 points" in how


@pytest.mark.parametrize("shift, jitter, verdict", [
    (0.1, 0.05, "confirmed"),     # every paired difference inside ±0.8
    (5.0, 0.05, "refuted"),       # UCIR 5 points above ER at every seed: outside even the Bonferroni interval
    (0.0, 3.0, "underpowered"),   # seed noise far above the margin
])
def test_slightly_better_judged_for_power_reaches_every_verdict(shift, jitter, verdict):
    """The margin: the paper's 1.60 points × our H 5 / the paper's 10 = 0.80, paired at 5 seeds."""
    from vlcp.report.claims import Scale

    er = [10.0, 12.0, 11.0, 13.0, 9.0]
    noise = [0.0, 1.0, -1.0, 0.5, -0.5]
    vals = {"4 steps": {"er": er, "ucir": [e + shift + jitter * n for e, n in zip(er, noise)],
                        "co2l": [e + 0.05 + jitter * n for e, n in zip(er, noise[::-1])]}}
    c = ic.slightly_better(vals, ["ucir", "co2l"], "er", 0.145, "paper", 1.0, SRC, scale=Scale(5.0, 10.0, "test"),
                           paper_gain=1.60)
    assert c.verdict == verdict and c.scaled_effect == pytest.approx(0.80)
    assert "2 equivalences, all must hold" in c.evidence and "±0.80" in c.claim
    single = {"4 steps": {"er": [10.0], "ucir": [10.0 + shift], "co2l": [10.0]}}
    one = ic.slightly_better(single, ["ucir", "co2l"], "er", 0.145, "paper", 0.01, SRC, scale=Scale(5.0, 10.0, "test"),
                             paper_gain=1.60)
    assert one.verdict in ("inconclusive", "underpowered")         # one run each: exploratory, never decided
    unknown = Scale(0.0, 10.0, "test; carried to 0", "Joint − ER does not resolve its headroom")   # claims.measured_scale's
    far = ic.slightly_better(vals, ["ucir", "co2l"], "er", 0.145, "paper", 1.0, SRC, scale=unknown, paper_gain=1.60)
    assert far.verdict == "underpowered" and "margin unknown here" in far.claim   # no margin to confirm or refute by
    zero = ic.slightly_better(vals, ["ucir", "co2l"], "er", 0.145, "paper", 1.0, SRC, scale=Scale(-1.0, 10.0, "test"), paper_gain=1.60)
    assert "(95 % [" in zero.evidence and "(90 % [" not in zero.evidence.split("; the deciding one")[0]   # margin 0: Bonferroni


@pytest.mark.parametrize("vals, sd, verdict", [([40, 30, 20, 10], 1.0, "confirmed"), ([13, 12, 11, 10], 6.4, "inconclusive"),
                                               ([40, 30, 35, 10], 1.0, "not confirmed")])
def test_ordered_claim_every_verdict(vals, sd, verdict):
    names = ["+H", "+D", "W", "ER"]
    c = ic.ordered_claim("Each component helps", {n: [float(v)] for n, v in zip(names, vals)}, names, sd, SRC, "Table 3")
    assert c.verdict == verdict and c.evidence.startswith("+H")


@pytest.mark.parametrize("inc, verdict", [([5, 30, 40], "confirmed"), ([5, 21, 22], "inconclusive"),
                                          ([5, 30, 15], "not confirmed")])
def test_above_at_every_step_skips_step_one(inc, verdict):
    curves = {"4 steps": {"incclip": [inc], "er": [[10.0, 20.0, 20.0]]}}   # step 1: IncCLIP lower, left out
    c = ic.above_at_every_step(curves, "incclip", ["er"], 2.0, SRC)
    assert c.verdict == verdict and "from step 2" in c.evidence
    assert ic.above_at_every_step(curves, "incclip", ["er"], 2.0, SRC, first=0).verdict == "not confirmed"


def test_step_values_reads_every_step():
    r = result(12.0, [[1.0]], 1.0)
    r["heldout"] = r["heldout"] * 3
    assert ic.step_values([r]) == [[12.0, 12.0, 12.0]]
    assert ic.r1_mean(r) == 12.0


def test_engineering_targets_are_a_plain_table():
    t = ic.engineering_targets([{"target": "a", "ratio": 1.2, "slowest": 1.4, "goal": 1.5, "source": "bench"},
                                {"target": "b", "ratio": 1.4, "slowest": 1.6, "goal": 1.5, "source": "bench"},
                                {"target": "c", "ratio": 1.6, "slowest": 1.7, "goal": 1.5, "source": "bench"}])
    assert list(t["result"]) == ["met", "met by the median only", "not met"]


# ---------------------------------------------------------------------------------------------
# the notebook's ledger cell, run in plain Python on fake runs


def notebook_cell(name, cell_id):
    nb = json.loads((Path(__file__).parents[1] / "notebooks" / name).read_text())
    return "".join(next(c for c in nb["cells"] if c.get("id") == cell_id)["source"])


def ledger_ns(tmp_path, sds, ic_module=ic, deep_seeds: int = 1, study: dict | None = None):
    """The ledger cell's namespace on fake single-seed runs (IncCLIP ahead of every baseline); with
    `deep_seeds` > 1 the 4-step split's runs (and naive fine-tuning) at that many seeds, as the
    seed subset gives the main claims."""
    from vlcp.report.claims import claims_frame, ledger_style, write_claims

    methods = ["joint", "er", "ucir", "geodl", "co2l", "incclip"]
    base = {"joint": 30.0, "er": 10.0, "ucir": 10.5, "geodl": 11.0, "co2l": 10.8, "incclip": 15.0}

    def run(acc, steps):
        r = result(acc, [[acc] * steps] * steps, 1.0)
        r["heldout"] = [r["heldout"][0]] * steps
        return r

    runs = {f"{s}-{m}": [run(v, 8 if s == "ic8" else 4)] for s in ("ic4", "ic8", "ici") for m, v in base.items()}
    runs |= {"ic4-incclip-wnc": [run(12.0, 4)], "ic4-incclip-wnc-kd": [run(13.0, 4)], "ic4-seqf": [run(5.0, 4)]}
    mem = {p: [run(10.0 + p / 10, 4)] for p in (1, 5, 10, 20, 50)}
    deep = dict(runs)
    if deep_seeds > 1:   # seed i moves every run by a seed-specific amount, scaled per experiment (paired noise)
        deep |= {e: [run(rs[0]["heldout"][0]["classification"]["test/subgroup"] + (i - 1) * (1 + j / 10), 4)
                     for i in range(deep_seeds)] for j, (e, rs) in enumerate(runs.items()) if e.startswith("ic4-")}
    study = {"fig1": {"fine_tuning": "ic4-seqf", "offline": "ic4-joint"}, **(study or {})}
    return {"report": True, "runs": runs, "study": study, "methods": methods, "splits": {"ic4": "4 steps", "ic8": "8 steps", "ici": "instance"},
            "sds": sds, "ic": ic_module, "paper_table": paper_table, "mem": mem, "np": np, "Path": Path,
            "claims_frame": claims_frame, "ledger_style": ledger_style, "write_claims": write_claims, "reports_dir": str(tmp_path),
            "display": lambda *a, **k: None, "study_power_table": None, "unresolved": None,
            "deep": deep}   # (the power cell, earlier in the notebook)


def test_ledger_cell_holds_only_paper_claims(tmp_path):
    ns = ledger_ns(tmp_path, ic.noise_sds(None, 1.0), deep_seeds=3)
    exec(notebook_cell("incclip_ablations.ipynb", "854beca6"), ns)
    texts = [c.claim for c in ns["claims"]]
    assert sum(t.startswith("IncCLIP beats every baseline") for t in texts) == 6
    assert not any("Target" in t or "step time" in t for t in texts)
    assert any(t.startswith("UCIR and Co2L are only slightly better than ER") for t in texts)
    fig1 = next(c for c in ns["claims"] if c.claim.startswith("Naive fine-tuning degrades below offline training"))
    assert fig1.verdict == "confirmed" and fig1.effect == pytest.approx(25.0) and fig1.seeds == 3   # joint 30 vs 5
    assert all(c.effect is not None for c in ns["claims"])
    written = json.loads((tmp_path / "incclip_ablations_claims.json").read_text())
    assert len(written["claims"]) == len(texts)


def test_ledger_cell_passes_the_spreads_dof_to_every_claim_function(tmp_path):
    import types

    calls = []

    def recording(name):
        def fn(*a, **k):
            calls.append((name, k.get("sd_dof")))
            return getattr(ic, name)(*a, **k)
        return fn

    proxy = types.SimpleNamespace(**{n: getattr(ic, n) for n in dir(ic) if not n.startswith("__")})
    for name in ONE_GAP:
        setattr(proxy, name, recording(name))
    ns = ledger_ns(tmp_path, ic.noise_sds(ic.spread(subset([10.0, 12.0], [20.0, 22.0]), [0, 1]), 1.0), proxy)
    exec(notebook_cell("incclip_ablations.ipynb", "854beca6"), ns)
    assert {n for n, _ in calls} == set(ONE_GAP) and all(dof == 2 for _, dof in calls)
    assert all("Student's t on 2 dof" in c.evidence for c in ns["claims"])


def test_sensitivity_reads_each_choice_against_its_noise():
    runs = {"ref": [result(20.0, [[0.0]], 1.0)], "band": [result(26.0, [[0.0]], 1.0)],
            "kd": [result(21.0, [[0.0]], 1.0)], "two": [result(20.0, [[0.0]], 1.0), result(22.0, [[0.0]], 1.0)]}
    sds = {"average": (2.0, "given"), "r1_mean": (2.0, "given")}
    choices = [{"choice": "band", "ours": "[0.1, 0.3]", "alternative": "[0.3, 0.5]", "experiment": "band"},
               {"choice": "kd", "ours": "own", "alternative": "0.2", "experiment": "kd"},
               {"choice": "missing", "ours": 1, "alternative": 2, "experiment": "absent"},
               {"choice": "two seeds", "ours": 1, "alternative": 2, "experiment": "two"}]
    t = ic.sensitivity(runs, "ref", choices, sds).set_index("open choice")
    assert list(t.index) == ["band", "kd", "two seeds"]                      # absent runs are left out
    assert t.loc["band", "Δ Average"] == pytest.approx(6.0) and t.loc["band", "reading"].startswith("moves")
    assert t.loc["kd", "Δ Average"] == pytest.approx(1.0) and t.loc["kd", "reading"].startswith("within")
    assert t.loc["two seeds", "noise Average"] == pytest.approx(2.0)           # min(2, 1) seeds: no √ reduction


def test_notebook_measures_the_spread_in_the_pipeline_not_from_a_file():
    params, setup = notebook_cell("incclip_ablations.ipynb", "b4b45dcb"), notebook_cell("incclip_ablations.ipynb", "d0af9fa0")
    assert "seed_spread_file" not in params + setup and "ic.subset_spread(runs_dir, study)" in setup


def test_spread_cell_shows_the_subsets_spread_or_says_it_falls_back():
    shown = []
    sp = ic.spread(subset([10.0, 12.0, 14.0], [20.0, 21.0, 22.0]), [0, 1, 2])
    ns = {"report": True, "spread": sp, "spread_note": "measured on ic4-er, ic4-incclip at seeds 0, 1, 2.", "ic": ic,
          "Markdown": lambda t: t, "display": shown.append}
    exec(notebook_cell("incclip_ablations.ipynb", "ccaadaac"), ns)
    assert shown[0].endswith("seeds 0, 1, 2.") and shown[1].loc["average", "dof"] == 4
    shown.clear()
    exec(notebook_cell("incclip_ablations.ipynb", "ccaadaac"), ns | {"spread": None, "spread_note": "fallback"})
    assert shown == ["fallback"]


def test_teach_cell_uses_every_seed_of_the_subset():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def run(seed):
        r = result(0.0, [[10.0 + seed, 0.0], [8.0, 20.0 + seed]], 1.0)
        r |= {"zero_shot": {"test": {"ZS@1": [1.0, 2.0]}}, "tasks": ["a", "b"], "experiment": "x", "seed": seed}
        r["matrix"]["test"]["ZS@1"] = r["matrix"]["test"]["Rm"]
        return r

    runs = {"ic4-er": [run(0)], "ic4-incclip": [run(0)]}
    sub = {"ic4-er": [run(s) for s in (0, 1, 2)], "ic4-incclip": [run(s) for s in (0, 1, 2)]}
    ns = {"report": True, "runs": runs, "subset": sub, "seeds": [0], "study": {}, "plt": plt, "Markdown": lambda t: t,
          "display": lambda *a, **k: None}
    exec(notebook_cell("incclip_ablations.ipynb", "ae26cede"), ns)   # one seed would read pool sizes from data/: absent here
    plt.close("all")
    assert all((g["n_seeds"] == 3).all() and g["noise_source"].str.startswith("seed std").all() for g in ns["gains"].values())
    assert "rm_gains" not in ns   # results without Rm at the start: no retrieval line
    for rs in sub.values():       # with it, the same gains are counted on Rm too
        for r in rs:
            r["zero_shot"]["test"]["Rm"] = [1.0, 2.0]
    exec(notebook_cell("incclip_ablations.ipynb", "ae26cede"), ns)
    plt.close("all")
    assert set(ns["rm_gains"]) == {"er", "incclip"} and all(len(g) == 2 for g in ns["rm_gains"].values())


def test_ledger_rows_carry_the_papers_effect_scaled_and_single_seed_rows_are_exploratory(tmp_path):
    """The 4-step claims at 3 seeds decide; the 8-step and instance rows (one seed) can only read
    underpowered or inconclusive. No calibrated headroom: ours measured on the ledger's own runs
    (Joint 30 − ER 10 = 20 against the paper's 16.32)."""
    ns = ledger_ns(tmp_path, ic.noise_sds(None, 1.0), deep_seeds=3)
    exec(notebook_cell("incclip_ablations.ipynb", "854beca6"), ns)
    rows = {c.claim: c for c in ns["claims"]}
    main = rows["IncCLIP beats every baseline (4 steps, zero-shot classification Average)"]
    assert main.verdict == "confirmed" and main.seeds == 3 and main.comparisons == 4
    assert "incclip 21.57" in main.paper_effect and "own ic4-joint and ic4-er runs" in main.paper_effect
    assert main.scaled_effect == pytest.approx((21.57 - 17.00) / 16.32 * 20.0)   # GeoDL, the paper's closest
    for split in ("8 steps", "instance"):
        row = rows[f"IncCLIP beats every baseline ({split}, zero-shot classification Average)"]
        assert row.verdict in ("underpowered", "inconclusive") and row.seeds == 1
        assert row.verdict == "underpowered" or "exploratory" in row.evidence
    assert all(c.scaled_effect is not None for c in ns["claims"] if not c.claim.startswith("UCIR and Co2L"))


def test_a_calibrated_headroom_below_zero_carries_the_papers_effects_to_zero(tmp_path):
    """Joint not above ER on the Average (the calibrated -0.63): the paper's Average effects scale
    to 0, so IncCLIP 5 below every baseline at 3 seeds is refuted by sign; retrieval keeps its scale."""
    study = {"power": {"calibrated": "test", "headroom": {"average": -0.63, "r1_mean": 1.0, "bwt_rm": 1.28}}}
    ns = ledger_ns(tmp_path, ic.noise_sds(None, 1.0), deep_seeds=3, study=study)
    ns["deep"] = {e: [dict(r, heldout=[{"classification": {k: (v - 10 if e == "ic4-incclip" else v)
                                                              for k, v in h["classification"].items()},
                                        "retrieval": h["retrieval"]} for h in r["heldout"]]) for r in rs]
                  for e, rs in ns["deep"].items()}
    exec(notebook_cell("incclip_ablations.ipynb", "854beca6"), ns)
    rows = {c.claim: c for c in ns["claims"]}
    main = rows["IncCLIP beats every baseline (4 steps, zero-shot classification Average)"]
    assert main.scaled_effect == 0.0 and main.verdict == "refuted" and "calibrated test" in main.paper_effect
    joint = rows["Joint (upper bound) stays above IncCLIP (4 steps, Average)"]
    assert joint.scaled_effect == 0.0 and joint.verdict == "confirmed"          # 30 vs 5
    r1 = rows["IncCLIP beats every baseline (4 steps, retrieval, mean R@1)"]
    assert r1.scaled_effect == pytest.approx((15.5275 - 12.205) / 12.0275 * 1.0)


def test_paper_scores_and_headrooms_read_the_papers_tables():
    assert ic.paper_headroom("average") == pytest.approx(32.61 - 16.29)
    assert ic.paper_headroom("bwt_rm") == pytest.approx(31.93)
    assert ic.paper_scores("r1_mean", "ic4")["incclip"] == pytest.approx((24.1 + 17.14 + 12.38 + 8.49) / 4)
    assert ic.paper_scores("average", "ici")["co2l"] == pytest.approx(15.33)
    assert ic.paper_ablation("average") == {"ic4-incclip-wnc": 16.01, "ic4-incclip-wnc-kd": 17.67,
                                            "ic4-incclip": 18.85, "ic4-er": 14.45}
    assert ic.paper_ablation_headroom("average") == pytest.approx(29.97 - 14.45)
    assert ic.paper_memory()[50] == pytest.approx(30.61)
    from vlcp.errors import VlcpError

    with pytest.raises(VlcpError, match="Table 7"):
        ic.paper_scores("bwt_rm", "ic8")


def test_the_long_profiles_ledger_has_no_exploratory_row(tmp_path):
    """The long profile (`long = True`): every row at 3 seeds, paired by seed, so no row is below the
    study's depth: the 8-step and instance rows can now be decided, as the 4-step ones are."""
    ns = ledger_ns(tmp_path, ic.noise_sds(None, 1.0), deep_seeds=3)
    ns["runs"] = ns["deep"] = {e: rs if len(rs) == 3 else [rs[0]] * 3 for e, rs in ns["deep"].items()}
    ns["mem"] = {p: rs * 3 for p, rs in ns["mem"].items()}
    exec(notebook_cell("incclip_ablations.ipynb", "854beca6"), ns)
    rows = {c.claim: c for c in ns["claims"]}
    assert not any("exploratory" in c.evidence for c in ns["claims"])
    for split in ("8 steps", "instance"):
        row = rows[f"IncCLIP beats every baseline ({split}, zero-shot classification Average)"]
        assert row.seeds == 3 and row.verdict == "confirmed"       # IncCLIP 15 against the best baseline's 11, no seed noise


def test_shown_frame_gives_one_seeds_means_and_several_seeds_mean_and_std():
    fn = lambda r: {"Average": r["v"], "R@1": 2 * r["v"]}  # noqa: E731
    one = ic.shown_frame({"er": [{"v": 10.0}], "joint": [{"v": 20.0}]}, fn)
    assert one.loc["er", "Average"] == 10.0 and one.loc["joint", "R@1"] == 40.0        # floats, as mean_frame
    long = ic.shown_frame({"er": [{"v": 10.0}, {"v": 12.0}, {"v": 14.0}], "joint": [{"v": 20.0}]}, fn)
    assert long.loc["er", "Average"] == "12.0 ± 2.0" and long.loc["er", "R@1"] == "24.0 ± 4.0"
    assert long.loc["joint", "Average"] == "20.0 (1 seed)"                                # never "± 0.0"
    assert ic.mean_frame({"er": [{"v": 10.0}, {"v": 12.0}, {"v": 14.0}]}, fn).loc["er", "Average"] == 12.0


def test_shown_frame_gives_a_column_no_seed_moves_as_its_values():
    """A setting (steps per task, a memory multiplier) is the same at every seed: "10.0 ± 0.0" would
    only be noise, so such a column shows its values; a column any seed moves keeps mean ± std."""
    fn = lambda r: {"steps": 10.0, "GM": r["v"]}  # noqa: E731
    shown = ic.shown_frame({"ft": [{"v": 10.0}, {"v": 12.0}], "merge": [{"v": 11.0}, {"v": 11.0}]}, fn)
    assert shown.loc["ft", "steps"] == 10.0 and shown.loc["merge", "steps"] == 10.0
    assert shown.loc["ft", "GM"] == "11.0 ± 1.4" and shown.loc["merge", "GM"] == "11.0 ± 0.0"   # moved in one row: kept
    part = ic.shown_frame({"ft": [{"v": 1.0}, {"v": 2.0}], "lora": [{"v": 3.0, "rank": 4.0}, {"v": 5.0, "rank": 4.0}]},
                          lambda r: r)   # a column only some rows have
    assert part.loc["lora", "rank"] == 4.0 and pd.isna(part.loc["ft", "rank"]) and part.loc["ft", "v"] == "1.5 ± 0.7"


def test_a_calibration_of_another_configuration_gives_way_to_the_ledgers_own_headroom():
    """report.incclip.power.calibrated_on records the configuration the calibration ran; runs of
    another (here 12 steps against 240) scale by their own Joint − ER and say why."""
    from vlcp.report.claims import calibration_fingerprint

    cfg = lambda steps: {"name": "ic4-joint", "train": {"steps": steps}}  # noqa: E731
    run = lambda a, seed: dict(result(a, [[10.0, 0.0], [a, 8.0]], 1.0), config=cfg(12), seed=seed)  # noqa: E731
    runs = {"ic4-joint": [run(29.5, 0), run(30.5, 1)], "ic4-er": [run(20.0, 0), run(20.0, 1)]}   # Joint − ER 10 ± 0.71
    power = {"calibrated": "test", "headroom": {"average": -0.63, "r1_mean": 1.0, "bwt_rm": 1.28}}
    same = ic.study_scales({"power": power | {"calibrated_on": {"ic4-joint": calibration_fingerprint(cfg(12))}}}, runs)
    assert same["average"].headroom == -0.63 and same["average"].how == "calibrated test"
    other = ic.study_scales({"power": power | {"calibrated_on": {"ic4-joint": calibration_fingerprint(cfg(240))}}}, runs)
    assert other["average"].headroom == pytest.approx(10.0) and other["r1_mean"].headroom == pytest.approx(10.0)
    assert "own ic4-joint and ic4-er runs: report.incclip.power was calibrated on another configuration of ic4-joint" \
        in other["average"].how
    stale = {"power": power | {"calibrated_on": {"ic4-joint": calibration_fingerprint(cfg(240))}}}
    blind = ic.study_scales(stale, runs, "its own runs do not resolve it")   # claims.unresolved_headroom's reason
    assert blind["average"].headroom == 0.0 and blind["average"](5.0) == 0.0
    assert "it measures 10.00, but its own runs do not resolve it: carried to 0" in blind["average"].how
    assert ic.study_scales({"power": power}, runs, "unresolved")["average"].headroom == -0.63   # calibrated: no gate
    # the power table's pair is Joint − naive FT: Joint − ER must resolve its own headroom too
    loose = {"ic4-joint": [run(25.0, 0), run(35.0, 1)], "ic4-er": runs["ic4-er"]}   # 10 ± 7.07: H/σ_d 1.4
    murky = ic.study_scales(stale, loose)["average"]
    assert murky.headroom == 0.0 and "Joint − ER on average does not resolve its headroom (H/σ_d 1.4 ≤ 2: H 10.00, σ_d 7.07, " \
        "sd of the per-seed differences, 2 seeds)" in murky.how
    single = ic.study_scales(stale, {e: rs[:1] for e, rs in runs.items()})["average"]
    assert single.headroom == 0.0 and "no σ_d of Joint − ER on average to check it against" in single.how
