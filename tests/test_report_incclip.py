"""The IncCLIP report's tables, its ledger's rows and its own claim kinds on hand-made results."""
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vlcp.report import incclip as ic
from vlcp.report.paper import paper_table
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
# the seed subset: the noise floor of the ledger's single-run rows

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
    assert sds["average"].sd == pytest.approx(math.sqrt(5.0)) and sds["average"].dof == 4
    assert "ic4-er, ic4-incclip at seeds 0, 1, 2" in sds["bwt_rm"].source and "Student's t on 4 dof" in sds["bwt_rm"].source
    assert all(n.dof == 4 for n in sds.values())
    t = ic.spread_frame(sp)
    assert list(t.index) == ["average", "r1_mean", "bwt_rm"] and t.loc["average", "dof"] == 4
    assert t.loc["average", "seed std ic4-er"] == pytest.approx(2.0)


def test_noise_sds_without_a_spread_fall_back_to_the_noise_floor():
    sp = ic.spread(subset([10.0, 12.0], [20.0, 21.0]), [0, 1])
    del sp["metrics"]["bwt_rm"]
    sds = ic.noise_sds(sp, 3.4)
    assert sds["bwt_rm"] == ic.Noise(3.4, None, "report.incclip.noise_floor (seed subset not run)")   # a floor: normal quantile
    assert "seeds 0, 1" in sds["average"].source and sds["average"].dof == 2
    assert ic.noise_sds(None, 2.0)["average"] == ic.Noise(2.0, None, "report.incclip.noise_floor (seed subset not run)")


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


def test_engineering_targets_are_a_plain_table():
    t = ic.engineering_targets([{"target": "a", "ratio": 1.2, "slowest": 1.4, "goal": 1.5, "source": "bench"},
                                {"target": "b", "ratio": 1.4, "slowest": 1.6, "goal": 1.5, "source": "bench"},
                                {"target": "c", "ratio": 1.6, "slowest": 1.7, "goal": 1.5, "source": "bench"}])
    assert list(t["result"]) == ["met", "met by the median only", "not met"]


# ---------------------------------------------------------------------------------------------
# the notebook's cells, run in plain Python on fake runs


def notebook_cell(name, cell_id):
    nb = json.loads((Path(__file__).parents[1] / "notebooks" / name).read_text())
    return "".join(next(c for c in nb["cells"] if c.get("id") == cell_id)["source"])


def test_sensitivity_reads_each_choice_against_its_noise():
    runs = {"ref": [result(20.0, [[0.0]], 1.0)], "band": [result(26.0, [[0.0]], 1.0)],
            "kd": [result(21.0, [[0.0]], 1.0)], "two": [result(20.0, [[0.0]], 1.0), result(22.0, [[0.0]], 1.0)]}
    sds = {"average": ic.Noise(2.0, None, "given"), "r1_mean": ic.Noise(2.0, None, "given")}
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


# ---------------------------------------------------------------------------------------------
# the ledger: the rows of vlcp/report/studies/incclip/claims.yaml, judged by vlcp.report.ledger

BASE = {"joint": 30.0, "er": 10.0, "ucir": 10.5, "geodl": 11.0, "co2l": 10.8, "incclip": 15.0}
EXTRA = {"ic4-incclip-wnc": 12.0, "ic4-incclip-wnc-kd": 13.0, "ic4-seqf": 5.0, "ic4-incclip-mem1": 13.0,
         "ic4-incclip-mem5": 14.0, "ic4-incclip-mem20": 16.0, "ic4-incclip-mem50": 17.0}


def ledger_run(avg, steps: int = 4, seed: int = 0) -> dict:
    """One run: Average `avg` after every step, mean R@1 avg / 5, BWT of Rm −(30 − avg) / 2."""
    cls = {k: avg for k in ic.CLASSIFICATION}
    cell = {f"{d}@{k}": avg / 5 for d in ("TR", "IR") for k in (1, 5, 10)}
    forget = -(30.0 - avg) / 2
    m = [[10.0 if i == j else (10.0 + forget if i == steps - 1 else 0.0) for j in range(steps)] for i in range(steps)]
    return {"heldout": [{"classification": cls, "retrieval": {"test": cell, "unseen_style": cell}}] * steps,
            "matrix": {"test": {"Rm": m}}, "seed": seed}


def ledger_runs(seeds4: int = 3) -> dict:
    """{experiment: {seed: results}}: the 4-step main experiments and naive fine-tuning at `seeds4` seeds (a small seed- and
    experiment-specific shift, fixed, so every paired difference varies), every other at seed 0."""
    exps = {f"{s}-{m}": v for s in ("ic4", "ic8", "ici") for m, v in BASE.items()} | EXTRA
    out = {}
    for j, (e, v) in enumerate(exps.items()):
        seeds = range(seeds4) if e == "ic4-seqf" or (e.startswith("ic4-") and e.split("-", 1)[1] in BASE) else [0]
        shift = np.random.default_rng(j).normal(0.0, 0.3, len(seeds))
        out[e] = {s: ledger_run(v + shift[s], 8 if e.startswith("ic8") else 4, s) for s in seeds}
    return out


FLOORS = {m: ic.Noise(2.0, 20, "a test subset") for m in ("average", "r1_mean", "bwt_rm")}


def judged(runs, calibrated=False, floors=FLOORS) -> dict:
    from vlcp.report.ledger import evaluate
    from vlcp.report.results import MEASURES
    from vlcp.report.study import load_study

    return {r.claim_id: r for r in evaluate(load_study("incclip"), runs, MEASURES, calibrated, floors)}


def test_the_claims_file_holds_the_papers_effects_from_its_tables():
    from vlcp.report.study import load_study

    inc = load_study("incclip")
    assert (inc.title, inc.notebook, inc.params, inc.module) == ("IncCLIP", "incclip_ablations", "incclip", "vlcp.report.incclip")
    rows = {r.id: r for r in inc.claims.rows}
    assert len(rows) == 16 and {r.kind for r in rows.values()} == {"greater", "equivalent", "gain grows", "above at every step"}
    main = rows["beats-all-ic4-average"]
    assert [c.b for c in main.comparisons] == ["ic4-er", "ic4-ucir", "ic4-geodl", "ic4-co2l"]
    assert [c.effect for c in main.comparisons] == pytest.approx([21.57 - 16.29, 21.57 - 16.55, 21.57 - 17.00, 21.57 - 16.84])
    r1 = lambda *v: sum(v) / 4  # noqa: E731
    assert rows["retrieval-falls"].comparisons[0].effect == pytest.approx(r1(24.1, 17.14, 12.38, 8.49) - r1(16.0, 10.92, 9.52, 6.29))
    assert [c.effect for c in rows["components-average"].comparisons] == pytest.approx([18.85 - 17.67, 17.67 - 16.01, 16.01 - 14.45])
    sc = inc.claims.scales
    assert sc["average"].paper_headroom == pytest.approx(32.61 - 16.29) and sc["bwt_rm"].paper_headroom == pytest.approx(31.93)
    assert sc["r1_mean"].paper_headroom == pytest.approx(r1(35.7, 25.16, 18.8, 13.14) - r1(17.5, 11.18, 9.6, 6.41))
    assert sc["ablation_average"].paper_headroom == pytest.approx(29.97 - 14.45)
    assert (sc["average"].calibrated, sc["r1_mean"].calibrated, sc["bwt_rm"].calibrated) == (-0.63, 1.0, 1.28)


def test_the_slight_margin_is_the_papers_largest_ucir_or_co2l_gain_over_er():
    from vlcp.report.study import load_study

    t = paper_table("incclip_table1")
    avg = {(str(s), m): v for s, m, v in zip(t["steps"], t["method"], t["Average"])}
    best = max(((avg[(s, m)] - avg[(s, "er")]) / avg[(s, "er")], avg[(s, m)] - avg[(s, "er")])
               for s in ("4", "8") for m in ("ucir", "co2l"))
    row = next(r for r in load_study("incclip").claims.rows if r.id == "slightly-better")
    assert [c.effect for c in row.comparisons] == pytest.approx([best[1]] * 4) and best[1] == pytest.approx(1.60)


def test_a_clear_effect_confirms_on_the_subsets_seeds():
    rows = judged(ledger_runs())
    main = rows["beats-all-ic4-average"]
    assert main.verdict == "confirmed" and main.seeds == 3 and len(main.comparisons) == 4
    h = np.mean([ic.average(ledger_runs()["ic4-joint"][s]) - ic.average(ledger_runs()["ic4-er"][s]) for s in range(3)])
    shown = next(c for c in main.comparisons if c["label"] == "IncCLIP − GeoDL")     # the paper's closest baseline
    assert shown["scaled_effect"] == pytest.approx((21.57 - 17.00) / (32.61 - 16.29) * h)
    assert rows["joint-above"].verdict == rows["fine-tuning-degrades"].verdict == rows["forgets-least"].verdict == "confirmed"


def test_single_run_rows_read_their_floor_and_stay_exploratory():
    rows = judged(ledger_runs())
    row = rows["beats-all-ic8-average"]
    assert row.verdict in ("underpowered", "inconclusive") and row.seeds == 1
    assert all(c["sigma_d"] == 2.0 and c["dof"] == 20 and "a test subset" in c["how"] for c in row.comparisons)
    assert "exploratory" in " ".join(row.notes)
    bare = judged(ledger_runs(), floors={})["beats-all-ic8-average"]
    assert bare.verdict == "not testable" and "no noise floor 'average'" in bare.notes[0]


def test_a_missing_arm_is_not_testable():
    runs = ledger_runs()
    del runs["ic4-seqf"], runs["ic8-co2l"]
    rows = judged(runs)
    for cid in ("fine-tuning-degrades", "beats-all-ic8-average", "gain-grows", "above-every-step", "slightly-better"):
        assert rows[cid].verdict == "not testable", cid
    assert "no runs of ic8-co2l here" in rows["gain-grows"].notes[0]
    assert rows["beats-all-ic4-average"].verdict == "confirmed"


def test_a_calibrated_headroom_within_its_pairs_noise_leaves_the_scale_unknown():
    """The calibrated Average headroom (−0.63) is no known zero: its scale is unknown, and a clear
    effect still confirms by its interval's sign. Mean R@1's 1.00 clears its pair's noise here."""
    rows = judged(ledger_runs(), calibrated=True)
    main = rows["beats-all-ic4-average"]
    assert main.verdict == "confirmed" and all(c["scaled_effect"] is None for c in main.comparisons)
    r1 = rows["beats-all-ic4-r1-mean"].comparisons[0]
    assert r1["scaled_effect"] == pytest.approx(r1["paper_effect"] / 12.0275 * 1.0)


def kind_context(floor=None, headroom=10.0):
    from vlcp.report.ledger import Context, Scale

    return Context({"v": lambda r, step=-1: r["v"][step]}, {"h": Scale(1.0, headroom)}, 2, {"v": floor} if floor else {})


def test_gain_grows_by_hand():
    """Gains of 2 comparisons each, one run per arm: (8 − 1 + 8 − 3) / 2 − (5 − 1 + 5 − 3) / 2 = 3; the
    floor widens by √(1 + 1/2)."""
    from vlcp.report.stats import Noise
    from vlcp.report.study import ClaimSpec, ComparisonSpec

    runs = {e: {0: {"v": [v]}} for e, v in {"a4": 5.0, "b4": 1.0, "c4": 3.0, "a8": 8.0, "b8": 1.0, "c8": 3.0}.items()}
    comps = (ComparisonSpec("a4", "b4", 1.0, "4 b"), ComparisonSpec("a4", "c4", 2.0, "4 c"),
             ComparisonSpec("a8", "b8", 2.0, "8 b"), ComparisonSpec("a8", "c8", 3.0, "8 c"))
    spec = ClaimSpec("g", "the gain grows", "gain grows", measure="v", scale="h", comparisons=comps,
                     options={"earlier": ["4 b", "4 c"], "floor": "v"})
    row = ic.gain_grows(spec, runs, kind_context(Noise(2.0, 10, "test")))
    assert row.kind == "gain grows" and row.effect == pytest.approx(3.0) and row.paper_effect == pytest.approx(1.0)
    assert row.sigma_d == pytest.approx(2.0 * math.sqrt(1.5)) and row.scaled_effect == pytest.approx(10.0)
    with pytest.raises(Exception, match="`earlier` must name half"):
        ic.gain_grows(ClaimSpec("g", "x", "gain grows", measure="v", scale="h", comparisons=comps,
                                options={"earlier": ["4 b"], "floor": "v"}), runs, kind_context(Noise(2.0, 10)))


def test_above_at_every_step_by_hand():
    """One comparison over steps 2-3 (from_step 2) at 3 seeds: above at both confirms; below 0 at
    step 3 by far more than its noise refutes."""
    from vlcp.report.study import ClaimSpec, ComparisonSpec

    def runs(step3):
        return {"a": {s: {"v": [0.0, 5.0 + s / 10, step3 + s / 5], "heldout": [{}] * 3} for s in range(3)},
                "b": {s: {"v": [0.0, 1.0, 1.0], "heldout": [{}] * 3} for s in range(3)}}

    spec = ClaimSpec("s", "a above b after every step", "above at every step", measure="v", scale="h",
                     comparisons=(ComparisonSpec("a", "b", 0.5, "a − b"),), options={"from_step": 2})
    row = ic.above_at_every_step(spec, runs(6.0), kind_context(headroom=1.0))
    assert [c["label"] for c in row.comparisons] == ["a − b, step 2", "a − b, step 3"]
    assert [c["effect"] for c in row.comparisons] == pytest.approx([4.1, 5.2]) and row.verdict == "confirmed"
    low = ic.above_at_every_step(spec, runs(-9.0), kind_context(headroom=1.0))
    assert low.verdict == "refuted" and low.effect == pytest.approx(-9.8)


def test_the_ledger_cell_evaluates_the_claims_file(tmp_path):
    """The notebook's ledger cell only calls the study's ledger hook (the rows tests/test_pins.py pins)
    and writes every row of the claims file."""
    import types

    from vlcp.report.ledger import evaluate, ledger_frame, ledger_json, ledger_style, provenance
    from vlcp.report.results import MEASURES
    from vlcp.report.study import load_study
    from vlcp.utils import write_json

    cell = notebook_cell("incclip_ablations.ipynb", "854beca6")
    assert "claims.append" not in cell and "evaluate(" not in cell and "ic.ledger(inc, params, runs_dir, long)" in cell
    inc = load_study("incclip")
    hook = types.SimpleNamespace(ledger=lambda study, params, runs_dir, long: evaluate(study, ledger_runs(), MEASURES, False, FLOORS))
    ns = {"report": True, "stale": None, "inc": inc, "ic": hook, "params": {}, "runs_dir": "runs", "long": False,
          "write_json": write_json, "ledger_json": ledger_json,
          "ledger_style": ledger_style, "provenance": provenance, "ledger_frame": ledger_frame, "display": lambda *a, **k: None,
          "Markdown": lambda t: t, "Path": Path, "reports_dir": str(tmp_path), "study_power_table": None}
    exec(cell, ns)
    written = json.loads((tmp_path / "incclip_ablations_claims.json").read_text())
    assert written["report"] == "IncCLIP" and [c["claim"] for c in written["claims"]] == [r.claim for r in inc.claims.rows]


def test_the_ledger_reads_the_runs_folder_and_the_seed_subsets_floor(tmp_path):
    """`ic.ledger` as a report stage calls it: the main seed's runs and the subset's, the subset's
    spread as the single-run rows' floor."""
    from vlcp.report.study import load_study
    from vlcp.utils import write_json

    runs = ledger_runs()
    for e, by_seed in runs.items():
        for s, r in by_seed.items():
            write_json(tmp_path / (f"stream-seed{s}" if s == 0 else f"spread-seed{s}") / e / f"seed{s}" / "results.json", r)
    subset = sorted(e for e, by_seed in runs.items() if len(by_seed) == 3)
    block = {"experiments": list(runs), "seeds": [0], "noise_floor": 3.4, "spread": {"experiments": subset, "seeds": [1, 2]}}
    rows = {r.claim_id: r for r in ic.ledger(load_study("incclip"), {"report": {"incclip": block}}, tmp_path)}
    assert len(rows) == 16 and rows["beats-all-ic4-average"].verdict == "confirmed" and rows["beats-all-ic4-average"].seeds == 3
    floor = rows["beats-all-ic8-average"].comparisons[0]
    assert floor["dof"] == 2 * len(subset) and "seed spread of this study's subset" in floor["how"]
