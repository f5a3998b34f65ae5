"""The IncCLIP report's table and claim functions on hand-made results."""
import json
import math
from pathlib import Path

import numpy as np
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


def test_noise_sds_reuse_the_measured_difference_spread_with_its_source():
    spread = {"date": "2026-01-01", "commit": "abc", "seeds": [0, 1, 2],
              "metrics": {"average": {"difference_spread": 6.4}, "r1_mean": {"difference_spread": 0.9}}}
    sds = ic.noise_sds(spread, 3.4)
    assert sds["average"][0] == 6.4 and "seed spread measured on 2026-01-01" in sds["average"][1]
    assert sds["r1_mean"][0] == 0.9
    assert sds["bwt_rm"] == (3.4, "report.incclip.noise_floor (no seed-spread measurement found)")
    assert ic.noise_sds(None, 2.0)["average"][0] == 2.0


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


def test_ledger_cell_holds_only_paper_claims(tmp_path):
    from vlcp.report.claims import claims_frame, write_claims

    methods = ["joint", "er", "ucir", "geodl", "co2l", "incclip"]
    base = {"joint": 30.0, "er": 10.0, "ucir": 10.5, "geodl": 11.0, "co2l": 10.8, "incclip": 15.0}

    def run(acc, steps):
        r = result(acc, [[acc] * steps] * steps, 1.0)
        r["heldout"] = [r["heldout"][0]] * steps
        return r

    runs = {f"{s}-{m}": [run(v, 8 if s == "ic8" else 4)] for s in ("ic4", "ic8", "ici") for m, v in base.items()}
    runs |= {"ic4-incclip-wnc": [run(12.0, 4)], "ic4-incclip-wnc-kd": [run(13.0, 4)]}
    mem = {p: [run(10.0 + p / 10, 4)] for p in (1, 5, 10, 20, 50)}
    ns = {"report": True, "runs": runs, "methods": methods, "splits": {"ic4": "4 steps", "ic8": "8 steps", "ici": "instance"},
          "sds": ic.noise_sds(None, 1.0), "ic": ic, "paper_table": paper_table, "mem": mem, "np": np, "Path": Path,
          "claims_frame": claims_frame, "write_claims": write_claims, "reports_dir": str(tmp_path),
          "display": lambda *a, **k: None}
    exec(notebook_cell("incclip_ablations.ipynb", "854beca6"), ns)
    texts = [c.claim for c in ns["claims"]]
    assert sum(t.startswith("IncCLIP beats every baseline") for t in texts) == 6
    assert not any("Target" in t or "step time" in t for t in texts)
    assert any(t.startswith("UCIR and Co2L are only slightly better than ER") for t in texts)
    assert all(c.effect is not None for c in ns["claims"])
    written = json.loads((tmp_path / "incclip_ablations_claims.json").read_text())
    assert len(written["claims"]) == len(texts)


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
