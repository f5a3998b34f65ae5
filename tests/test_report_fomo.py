"""FoMo-in-Flux report functions on hand-made results (no runs needed)."""
import math

import matplotlib
import numpy as np
import pytest

from vlcp.report import fomo as fm

matplotlib.use("Agg")


def run(points, steps=12, mult=1.0, flops=2e6, datasets=None):
    """A results dict with a zero-shot point then one point per task: (A_KA, A_ZS)."""
    datasets = datasets or {"a": {"role": "adaptation", "n": 100}, "b": {"role": "adaptation", "n": 100},
                            "r": {"role": "retention", "n": 400}}
    rows = [{"A_KA": ka, "A_ZS": zs, "GM": math.sqrt(ka * zs),
             "datasets": {"a": ka, "b": ka, "r": zs}} for ka, zs in points]
    mem = {"total": 100 * mult, "parameters": 40, "gradients": 20, "optimizer": 30, "activations": 10 * mult, "method": 0}
    return {"zero_shot": rows[0], "trajectory": rows[1:], "datasets": datasets, "steps_per_task": [steps] * (len(rows) - 1),
            "budget": {"memory_multiplier": mult, "mafs": flops * mult,
                       "method": {"flops": flops, "task_flops": 0, "memory": mem}},
            "train": [{"seconds": 1.5}] * (len(rows) - 1)}


def test_trajectory_endpoint_and_area():
    r = run([(10, 40), (20, 30), (30, 20)])
    t = fm.trajectory(r)
    assert list(t["A_KA"]) == [10, 20, 30] and t.index.name == "after task"
    assert fm.endpoint(r) == {"A_KA": 30, "A_ZS": 20, "GM": pytest.approx(math.sqrt(600))}
    assert fm.trajectory_area(r) == pytest.approx((math.sqrt(600) + math.sqrt(600)) / 2)


def test_summary_changes_and_distance_above_the_line():
    zs, joint = {"A_KA": 10, "A_ZS": 40}, {"A_KA": 50, "A_ZS": 20}
    s = fm.summary({"ft": run([(10, 40), (30, 25)], mult=1.0), "lora": run([(10, 40), (20, 38)], steps=20, mult=0.5)}, zs, joint)
    assert s.loc["ft", "ΔA_KA"] == 20 and s.loc["ft", "ΔA_ZS"] == -15
    # the line from (10, 40) to (50, 20) is at 30 for A_KA 30 and at 35 for A_KA 20
    assert s.loc["ft", "above line"] == pytest.approx(-5) and s.loc["lora", "above line"] == pytest.approx(3)
    assert s.loc["lora", "steps/task"] == 20 and s.loc["lora", "memory ×"] == 0.5 and s.loc["ft", "train s"] == 1.5


def test_macro_floor_is_the_binomial_se_of_the_macro_mean():
    r = run([(10, 40), (50, 20)])
    # adaptation: two sets at p = 0.5, n = 100: SE of the mean = √(2 · 0.25/100) / 2
    assert fm.macro_floor(r, "adaptation") == pytest.approx(2 * math.sqrt(2) * math.sqrt(0.005) / 2 * 100)
    assert fm.macro_floor(r, "retention") == pytest.approx(2 * math.sqrt(2) * math.sqrt(0.2 * 0.8 / 400) * 100)


def test_budget_table_units():
    b = fm.budget_table({"ft": run([(1, 1), (2, 2)], mult=1.0, flops=3e6), "lt": run([(1, 1), (2, 2)], steps=30, mult=0.4)})
    assert b.loc["ft", "MFLOPs/step"] == 3 and b.loc["lt", "memory multiplier"] == 0.4 and b.loc["lt", "steps/task"] == 30
    assert b.loc["ft", "memory MB"] == pytest.approx(100 / 2**20)


def test_schedule_curves_and_trajectory_plot():
    import matplotlib.pyplot as plt

    c = fm.schedule_curves(["cosine", "autoregressive-cosine"], tasks=3, steps=10)
    assert c.shape == (30, 2) and c["cosine"].max() == pytest.approx(1.0)
    assert c["autoregressive-cosine"].iloc[10:20].max() == pytest.approx(0.5)
    fig, ax = plt.subplots()
    fm.trajectory_plot(ax, {"ft": run([(10, 40), (30, 25)])}, {"A_KA": 10, "A_ZS": 40}, {"A_KA": 50, "A_ZS": 20}, "t")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["ft", "zero-shot θ0", "joint"]
    plt.close(fig)


def test_load_study_skips_missing_runs(tmp_path):
    from vlcp.utils import write_json

    write_json(tmp_path / "methods" / "fomo-ft" / "seed0" / "results.json", run([(1, 1), (2, 2)]))
    got = fm.load_study(tmp_path, {"methods": ["fomo-ft", "fomo-lora4"]}, 0)
    assert list(got) == ["fomo-ft"]


def test_memory_order_against_hand_cases():
    paper = {"locked-image": 0.26, "LNFit": 0.66, "BitFit": 0.66, "LoRA, r=4": 0.87, "full-ft": 1.0, "EWC": 1.01, "SI": 1.0}
    assert fm.memory_order_holds(paper)                        # Table 4's own multipliers
    assert not fm.memory_order_holds({**paper, "locked-image": 0.78})   # our tiny model: locked-image above LNFit
    assert not fm.memory_order_holds({**paper, "BitFit": 0.9})          # BitFit above LoRA
    assert not fm.memory_order_holds({**paper, "SI": 0.99})             # SI below full FT
    assert not fm.memory_order_holds({**paper, "LoRA, r=4": 1.0})       # LoRA not below full FT


def test_paper_scale_budget_beside_table4():
    import pandas as pd

    t4 = pd.DataFrame({"per_task_gflops": [100.0], "max_memory_gb": [40.0], "memory_multiplier": [1.0]}, index=["full-ft"])
    bench = {"methods": {"full-ft": {"flops_per_step_at_target": 9e10, "memory_at_target": {"total": 2 * 2**30},
                                     "memory_multiplier": 1.0},
                         "X": {"flops_per_step_at_target": 4.5e10, "memory_at_target": {"total": 2**30},
                               "memory_multiplier": 0.5}}}
    t = fm.paper_scale_budget(bench, t4)
    assert t.loc["full-ft", "GFLOPs/step (ours)"] == 90 and t.loc["full-ft", "GFLOPs/step (paper)"] == 100
    assert t.loc["X", "memory GiB (ours, fp32 accounting)"] == 1 and math.isnan(t.loc["X", "multiplier (paper)"])


# ------------------------------------------------------------------ the claims ledger (fake single-seed runs)
SD = {"A_KA": 1.0, "A_ZS": 1.0, "GM": 1.0}    # the sd of one difference, given directly


def ends(**gm_or_points):
    """{experiment: a run ending at (A_KA, A_ZS)} from θ0 (10, 40)."""
    return {e: run([(10, 40), p]) for e, p in gm_or_points.items()}


def gm_point(gm):
    return (gm, gm)   # A_KA = A_ZS = GM


def test_noise_sd_is_root_two_binomial_se_and_gm_by_the_delta_method():
    r = run([(10, 40), (50, 20)])
    sd = fm.noise_sd(r)
    se_ka, se_zs = math.sqrt(2 * 0.25 / 100) / 2 * 100, math.sqrt(0.2 * 0.8 / 400) * 100
    assert sd["A_KA"] == pytest.approx(math.sqrt(2) * se_ka) and sd["A_ZS"] == pytest.approx(math.sqrt(2) * se_zs)
    gm = math.sqrt(1000)
    assert sd["GM"] == pytest.approx(math.sqrt(2) * gm / 2 * math.sqrt((se_ka / 50) ** 2 + (se_zs / 20) ** 2))
    assert fm.macro_floor(r, "retention") == pytest.approx(2 * sd["A_ZS"])   # the old floor: 2 × the sd of a difference


def test_similar_fraction_is_the_papers_own_ordering_spread():
    from vlcp.report.refs import paper_table

    txt = paper_table("fomo_text").set_index("setting")
    freq, perf = txt.loc["concept-frequency ordering (endpoint)"], txt.loc["performance (easy-to-hard) ordering (endpoint)"]
    assert fm.PAPER_SIMILAR_ENDPOINTS == {"concept-frequency": (freq.A_KA, freq.A_ZS), "performance (easy-to-hard)": (perf.A_KA, perf.A_ZS)}
    g1, g2 = math.sqrt(55.2 * 65.6), math.sqrt(53.8 * 64.3)
    assert fm.similar_fraction("GM") == pytest.approx((g1 - g2) / ((g1 + g2) / 2)) and 0.022 < fm.similar_fraction() < 0.024
    with pytest.raises(ValueError, match="metric"):
        fm.similar_fraction("R@1")


@pytest.mark.parametrize("merge,other,verdict", [(30, 20, "confirmed"), (20, 30, "not confirmed"), (21, 20, "inconclusive")])
def test_merging_best_each_verdict(merge, other, verdict):
    runs = ends(**{"fomo-ema-merge": gm_point(merge), "fomo-ft": gm_point(other), "fomo-lora4": gm_point(other - 5)})
    c = fm.merging_best_claim(runs, SD)
    assert c.claim.startswith("Model merging gives the best") and c.verdict == verdict, c
    assert "fomo-ft" in c.evidence and fm.TEST_ONLY in c.evidence


@pytest.mark.parametrize("early,verdict", [(45, "confirmed"), (35, "not confirmed"), (40.5, "inconclusive")])
def test_early_retention_is_against_theta0_not_full_ft(early, verdict):
    big = {"a": {"role": "adaptation", "n": 10**4}, "r": {"role": "retention", "n": 2500}}   # A_ZS sd of a difference ≈ 1.4
    traj = [(10, 40)] + [(20, early)] * 5 + [(30, 10)] * 15
    runs = {"fomo-ema-merge": run(traj, datasets=big), "fomo-zs-merge": run(traj, datasets=big),
            "fomo-ft": run([(10, 40)] + [(30, 5)] * 20, datasets=big)}   # full FT far below: it must not matter
    c = fm.merge_early_retention_claim(runs)
    assert c.verdict == verdict, c
    assert "vs θ0 40.0" in c.evidence


def test_early_retention_not_run_is_inconclusive():
    c = fm.merge_early_retention_claim({"fomo-ft": run([(10, 40), (20, 30)])})
    assert c.verdict == "inconclusive" and "not run: fomo-ema-merge, fomo-zs-merge" in c.evidence


@pytest.mark.parametrize("peft,verdict", [((20, 35), "confirmed"), ((32, 35), "not confirmed"), ((29.5, 35), "inconclusive")])
def test_peft_each_verdict(peft, verdict):
    runs = ends(**{"fomo-ft": (30, 20), "fomo-lora4": peft, "fomo-bitfit": (15, 38)})
    assert fm.peft_claim(runs, SD).verdict == verdict


@pytest.mark.parametrize("ewc,verdict", [((12, 38), "confirmed"), ((12, 18), "not confirmed"), ((29, 38), "inconclusive")])
def test_ewc_each_verdict(ewc, verdict):
    assert fm.ewc_claim(ends(**{"fomo-ft": (30, 20), "fomo-ewc": ewc}), SD).verdict == verdict


@pytest.mark.parametrize("si,sd,verdict", [
    (20.0, 0.05, "confirmed"),        # margin 2.3 % of 20 = 0.46; interval ±0.08
    (22.0, 0.05, "not confirmed"),    # 2 points apart, well beyond the margin
    (20.2, 1.0, "inconclusive"),      # within the noise is not equivalence
])
def test_si_equivalence_each_verdict(si, sd, verdict):
    c = fm.si_claim(ends(**{"fomo-ft": gm_point(20.0), "fomo-si": gm_point(si)}), {**SD, "GM": sd})
    assert c.verdict == verdict, c
    assert "margin ±0.46" in c.evidence and "§7.1" in c.evidence


@pytest.mark.parametrize("ar,verdict", [((30, 25), "confirmed"), ((20, 25), "not confirmed"), ((30, 21), "inconclusive")])
def test_ar_rsqrt_each_verdict(ar, verdict):
    # A_KA non-inferiority margin: 2.6 % of 30 ≈ 0.77, so an equal A_KA needs an sd well under it
    assert fm.ar_rsqrt_claim(ends(**{"fomo-ft": (30, 20), "fomo-ar-rsqrt": ar}), {**SD, "A_KA": 0.1}).verdict == verdict
    assert fm.ar_rsqrt_claim(ends(**{"fomo-ft": (30, 20), "fomo-ar-rsqrt": (30, 25)}), SD).verdict == "inconclusive"


@pytest.mark.parametrize("locked,verdict", [(15, "confirmed"), (23.2, "not confirmed"), (19.5, "inconclusive")])
def test_locked_towers_each_verdict_and_what_it_means(locked, verdict):
    runs = ends(**{"fomo-ft": gm_point(20), "fomo-locked-image": gm_point(locked), "fomo-locked-text": gm_point(15),
                   "fomo-ema-merge": gm_point(20.4)})
    runs["fomo-locked-image"]["steps_per_task"] = [16] * 1
    c = fm.locked_towers_claim(runs, SD)
    assert c.verdict == verdict and "Finding 4" in c.source
    assert "fomo-locked-image GM" in c.evidence and "1.3× full FT's steps" in c.evidence and "paper 9.1×" in c.evidence
    if verdict == "not confirmed":
        assert "best endpoint GM of every run" in c.evidence and "do not support Finding 4" in c.evidence


@pytest.mark.parametrize("tau,verdict", [(30, "confirmed"), (10, "not confirmed"), (21, "inconclusive")])
def test_best_of_each_verdict(tau, verdict):
    runs = ends(**{"fomo-tau001": gm_point(tau), "fomo-tau01": gm_point(20), "fomo-tau1": gm_point(5)})
    c = fm.best_of_claim("τ", runs, "fomo-tau001", ["fomo-tau001", "fomo-tau01", "fomo-tau1", "fomo-tau05"], "GM", SD, "§6.4")
    assert c.verdict == verdict
    assert fm.best_of_claim("lr", {"fomo-ft": runs["fomo-tau01"]}, "fomo-ft", ["fomo-lr1e-4"], "A_KA", SD, "").evidence == "not run: fomo-lr1e-4"


@pytest.mark.parametrize("iid,nobuf,verdict", [(30, 10, "confirmed"), (30, 25, "not confirmed"), (30, 19, "inconclusive")])
def test_mixtures_each_verdict(iid, nobuf, verdict):
    runs = ends(**{"fomo-ft": gm_point(20), "fomo-mix-iidify": gm_point(iid), "fomo-mix-nobuffer": gm_point(nobuf)})
    assert fm.mixtures_claim(runs, SD, ["fomo-ft", "fomo-mix-iidify", "fomo-mix-nobuffer"]).verdict == verdict


ORDERS = {"random": "fomo-ft", "easy-to-hard": "fomo-o-easy", "frequency": "fomo-o-freq", "similarity": "fomo-o-sim",
          "time": "fomo-o-time", "dataset": "fomo-o-dataset"}


@pytest.mark.parametrize("sim,sd,verdict", [(20.1, 0.05, "confirmed"), (25, 0.05, "not confirmed"), (20.1, 1.0, "inconclusive")])
def test_orderings_similar_each_verdict(sim, sd, verdict):
    runs = ends(**{"fomo-ft": gm_point(20), "fomo-o-easy": gm_point(20.05), "fomo-o-sim": gm_point(sim),
                   "fomo-o-time": gm_point(5)})   # dataset-level: not part of the claim (§7.1)
    c = fm.orderings_similar_claim(runs, {**SD, "GM": sd}, ORDERS)
    assert c.verdict == verdict and c.claim.startswith("Endpoints are similar across orderings")
    assert "fomo-o-time" not in c.evidence and "margin ±0.46" in c.evidence


@pytest.mark.parametrize("small,large,verdict", [(10, 2, "confirmed"), (3, 2, "not confirmed"), (6.5, 2, "inconclusive")])
def test_model_size_each_verdict(small, large, verdict):
    runs = ends(**{"fomo-ft-s": (20, 40 - small), "fomo-ft": (20, 35), "fomo-ft-l": (20, 40 - large)})   # default forgets 5
    assert fm.model_size_claim(runs, SD).verdict == verdict


@pytest.mark.parametrize("zs,sd,verdict", [
    ((30, 30.2, 29.9, 36), 1.0, "confirmed"),          # one pool 6 points up: beyond Tukey's 3.63 × 0.71
    ((30, 30.05, 29.98, 30.02), 0.05, "not confirmed"),  # all within ±1.1 (3.7 % of 30), shown so
    ((30, 31, 29.5, 32), 1.0, "inconclusive"),
])
def test_pool_each_verdict(zs, sd, verdict):
    runs = ends(**{e: (20, z) for e, z in zip(("fomo-ft", *fm.POOLS), zs)})
    c = fm.pool_claim(runs, {**SD, "A_ZS": sd})
    assert c.verdict == verdict, c
    assert "Tukey-adjusted for 4 pools" in c.evidence


def test_pool_claim_is_rarely_confirmed_under_pure_test_noise():
    """The old check (range > 2 × the sd of a difference) confirmed about 19 % of pure-noise cases."""
    rng = np.random.default_rng(0)
    sd = 1.0
    hits = 0
    for _ in range(400):
        zs = 30 + rng.normal(0, sd / math.sqrt(2), 4)   # one run's A_ZS has sd = (sd of a difference) / √2
        hits += fm.pool_claim(ends(**{e: (20, z) for e, z in zip(("fomo-ft", *fm.POOLS), zs)}), {**SD, "A_ZS": sd}).verdict == "confirmed"
    assert hits / 400 < 0.08


@pytest.mark.parametrize("ema6,verdict", [(30, "confirmed"), (18, "not confirmed"), (21.5, "inconclusive")])
def test_compute_scaling_each_verdict(ema6, verdict):
    runs = ends(**{"fomo-ft-c025": gm_point(18), "fomo-ft-c6": gm_point(19), "fomo-ema-c025": gm_point(18),
                   "fomo-ema-c6": gm_point(ema6)})
    assert fm.compute_scaling_claim(runs, SD).verdict == verdict


@pytest.mark.parametrize("t50,verdict", [((20, 10), "confirmed"), ((35, 10), "not confirmed"), ((29, 10), "inconclusive")])
def test_stream_length_each_verdict(t50, verdict):
    assert fm.stream_length_claim(ends(**{"fomo-ft": (30, 20), "fomo-t50": t50}), SD).verdict == verdict


def test_memory_order_claim_matches_the_order_and_names_missing_rows():
    paper = {"locked-image": 0.26, "LNFit": 0.66, "BitFit": 0.66, "LoRA, r=4": 0.87, "full-ft": 1.0, "EWC": 1.01, "SI": 1.0}
    assert fm.memory_order_claim(paper, "paper").verdict == "confirmed"          # ties allowed at full FT ≤ SI
    assert fm.memory_order_claim({**paper, "locked-image": 0.78}, "tiny").verdict == "not confirmed"
    c = fm.memory_order_claim({k: v for k, v in paper.items() if k != "SI"}, "tiny")
    assert c.verdict == "inconclusive" and "not measured: SI" in c.evidence


def test_ledger_on_a_partial_study_keeps_the_index_claims_and_uses_the_verdict_functions():
    big = {"a": {"role": "adaptation", "n": 10**5}, "r": {"role": "retention", "n": 10**5}}
    runs = {e: run([(10, 40), p], datasets=big) for e, p in
            {"fomo-ft": (30, 20), "fomo-ema-merge": (27, 30), "fomo-lora4": (20, 35), "fomo-o-sim": (29, 21)}.items()}
    study = {"reference": "fomo-ft", "studies": {"methods": ["fomo-ft", "fomo-ema-merge", "fomo-lora4"]}}
    claims = fm.ledger(runs, study, ORDERS, {"full-ft": 1.0})
    by = {c.claim.split(" (")[0]: c for c in claims}
    assert by["Model merging gives the best accumulation–retention trade-off"].verdict == "confirmed"
    assert by["PEFT methods accumulate less and forget less than full fine-tuning"].verdict == "confirmed"
    assert by["Tuning both towers beats locking the image or the text tower"].evidence.startswith("not run")
    assert all(c.source.startswith("FoMo-in-Flux") for c in claims)
    measured = [c for c in claims if not c.evidence.startswith(("not run", "not measured"))]
    assert measured and all(c.low is not None and c.high is not None for c in measured)


def test_notebook_claims_cell_runs_on_fake_results(tmp_path):
    """The notebook's claims cell, run in plain Python on fake runs: it only calls `fm.ledger`."""
    import json
    from pathlib import Path

    from vlcp.report.claims import claims_frame, write_claims

    nb = json.loads((Path(__file__).parents[1] / "notebooks" / "fomo_figures.ipynb").read_text())
    cell = next("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code" and "write_claims(" in "".join(c["source"]))
    assert "confirmed" not in cell and "greater(" not in cell   # no verdict computed in the notebook
    runs = ends(**{"fomo-ft": (30, 20), "fomo-ema-merge": (27, 30), "fomo-lora4": (20, 35), "fomo-o-sim": (29, 21)})
    spread = fm.subset_spread(subset_of({"fomo-ft": [20, 21, 22]}))
    ns = {"report": True, "fm": fm, "runs": runs, "study": {"reference": "fomo-ft", "studies": {}}, "orders": ORDERS,
          "mm_tiny": {}, "bench": None, "claims_frame": claims_frame, "write_claims": write_claims, "Path": Path,
          "reports_dir": str(tmp_path), "display": lambda *a, **k: None, "spread": spread,
          "study_power_table": None}   # (the power cell, earlier in the notebook)
    exec(cell, ns)
    out = json.loads((tmp_path / "fomo_figures_claims.json").read_text())
    merging = next(c for c in out["claims"] if c["claim"].startswith("Model merging gives the best"))
    assert "seed spread of this study's subset (fomo-ft at seeds 0, 1, 2)" in merging["evidence"]


@pytest.mark.parametrize("seeds", [[0, 1, 2], [0]])
def test_notebook_setup_cell_measures_the_spread_or_falls_back(tmp_path, monkeypatch, seeds):
    """The notebook's setup cell on fake runs: the subset's spread from seed 0 (the study's run) and the
    spread seeds' directories; without them, no spread and the missing runs named (no crash)."""
    import json
    from pathlib import Path

    from vlcp.utils import write_json

    root = Path(__file__).parents[1]
    nb = json.loads((root / "notebooks" / "fomo_figures.ipynb").read_text())
    cell = next("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code" and "fm.subset_spread(" in "".join(c["source"]))
    for e, gm in (("fomo-ft", 20), ("fomo-ema-merge", 25)):
        write_json(tmp_path / "methods" / e / "seed0" / "results.json", run([(10, 40), gm_point(gm)]))
        for s in seeds[1:]:
            write_json(tmp_path / f"spread-seed{s}" / e / f"seed{s}" / "results.json", run([(10, 40), gm_point(gm + s)]))
    monkeypatch.chdir(root)
    ns = {"params_file": str(root / "params.yaml"), "runs_dir": str(tmp_path), "run_live": False}
    exec(cell, ns)
    assert ns["report"] and list(ns["runs"]) == ["fomo-ft", "fomo-ema-merge"]
    if len(seeds) > 1:
        assert "fomo-ft, fomo-ema-merge at seeds 0, 1, 2" in ns["spread"]["source"] and ns["noise"]["dof"]["GM"] == 4
        assert fm.teach_runs(ns["runs"], ns["subset"], ["fomo-ft"])["fomo-ft"][1]["trajectory"][-1]["GM"] == 21
    else:
        assert ns["spread"] is None and "fomo-ema-merge seed 2" in ns["subset_missing"] and "seed" not in ns["noise"]


# ------------------------------------------------------------------ the seed subset's spread (issue 31)
def subset_of(gms: dict[str, list[float]]) -> dict[str, dict[int, dict]]:
    """{experiment: {seed: a run ending at A_KA = A_ZS = GM}} from per-seed endpoint GMs."""
    return {e: {s: run([(10, 40), gm_point(g)]) for s, g in enumerate(v)} for e, v in gms.items()}


def test_subset_spread_pools_the_seed_std_of_every_metric_the_ledger_compares():
    sub = subset_of({"fomo-ft": [20, 22, 24], "fomo-ema-merge": [30, 31]})
    spread = fm.subset_spread(sub)
    assert set(spread["metrics"]) == {"A_KA", "A_ZS", "GM", fm.AREA, fm.early_key()}
    gm = spread["metrics"]["GM"]
    pooled = math.sqrt((2 * 2.0 ** 2 + 1 * np.std([30, 31], ddof=1) ** 2) / 3)     # weights: seeds − 1
    assert gm["dof"] == 3 and gm["pooled_std"] == pytest.approx(pooled) and gm["difference_spread"] == pytest.approx(math.sqrt(2) * pooled)
    assert "fomo-ft at seeds 0, 1, 2; fomo-ema-merge at seeds 0, 1" in spread["source"]
    t = fm.spread_frame(spread)
    assert t.loc["GM", "seed std fomo-ft"] == pytest.approx(2.0) and t.loc["GM", "dof"] == 3


def test_load_subset_finds_seed0_in_the_study_and_the_others_in_spread_dirs(tmp_path):
    from vlcp.utils import write_json

    write_json(tmp_path / "methods" / "fomo-ft" / "seed0" / "results.json", run([(10, 40), (20, 20)]))
    for s in (1, 2):
        write_json(tmp_path / f"spread-seed{s}" / "fomo-ft" / f"seed{s}" / "results.json", run([(10, 40), (20 + s, 20)]))
    write_json(tmp_path / "methods" / "fomo-ema-merge" / "seed0" / "results.json", run([(10, 40), (25, 30)]))
    found, missing = fm.load_subset(tmp_path, ["fomo-ft", "fomo-ema-merge"], [0, 1, 2])
    assert sorted(found["fomo-ft"]) == [0, 1, 2] and fm.endpoint(found["fomo-ft"][2])["A_KA"] == 22
    assert missing == ["fomo-ema-merge seed 1", "fomo-ema-merge seed 2"]
    spread = fm.subset_spread(found)            # the one-seed experiment is left out, and not named
    assert spread["metrics"]["A_KA"]["dof"] == 2 and "fomo-ema-merge" not in spread["source"]


def test_missing_subset_keeps_test_set_noise_only():
    assert fm.subset_spread({}) is None
    assert fm.subset_spread(subset_of({"fomo-ft": [20], "fomo-ema-merge": [30]})) is None   # one seed each: no spread
    assert fm.with_spread(SD, None) == SD
    sd = fm.comparison_sd(SD, "GM")
    assert sd.sd == 1.0 and sd.dof is None and sd.source == fm.TEST_ONLY


def test_comparison_sd_joins_test_noise_and_seed_spread_per_comparison():
    spread = {"metrics": {"A_ZS": {"difference_spread": 2.0, "dof": 4}}, "source": "seed spread of X at seeds 0, 1, 2"}
    noise = fm.with_spread({"A_ZS": 1.0, "GM": 0.5}, spread)
    one = fm.comparison_sd(noise, "A_ZS")
    assert one.sd == pytest.approx(math.sqrt(1 + 4)) and one.dof == 4
    assert one.source.startswith("test-set noise + seed spread of X at seeds 0, 1, 2")
    assert fm.comparison_sd(noise, "A_ZS", evals=4, runs=2).sd == pytest.approx(math.sqrt(2 + 4))   # two forgettings
    assert fm.comparison_sd(noise, "A_ZS", evals=4, runs=4).sd == pytest.approx(math.sqrt(2 + 8))   # two gains
    assert fm.comparison_sd(noise, "A_ZS", runs=1, test=0.5).sd == pytest.approx(math.sqrt(0.25 + 2))  # a run vs its θ0
    gm = fm.comparison_sd(noise, "GM")           # a metric the subset has no spread of: test noise, said so
    assert gm.sd == 0.5 and gm.dof is None and "no spread of GM" in gm.source


def test_a_large_seed_spread_turns_a_confirmed_gap_inconclusive():
    from scipy import stats

    runs = ends(**{"fomo-ema-merge": gm_point(23), "fomo-ft": gm_point(20)})
    assert fm.merging_best_claim(runs, SD).verdict == "confirmed"            # 3 points, test sd 1
    spread = fm.subset_spread(subset_of({"fomo-ft": [18, 20, 22], "fomo-ema-merge": [21, 23, 25]}))   # pooled 2, dof 4
    c = fm.merging_best_claim(runs, fm.with_spread(SD, spread))
    assert c.verdict == "inconclusive", c
    sd = math.sqrt(1 + 2 * 4)                                                  # √(test² + (√2 · 2)²)
    assert c.high - c.effect == pytest.approx(stats.t.ppf(0.975, 4) * sd)
    assert "test-set noise + seed spread" in c.evidence and "at seeds 0, 1, 2" in c.evidence and "4 dof" in c.evidence
    assert fm.TEST_ONLY not in c.evidence


def test_seed_spread_widens_equivalence_and_the_pool_claims_tukey_range():
    spread = fm.subset_spread(subset_of({"fomo-ft": [19.9, 20.0, 20.1], "fomo-ema-merge": [19.9, 20.0, 20.1]}))  # pooled 0.1
    tight = {**SD, "GM": 0.05}
    si = ends(**{"fomo-ft": gm_point(20.0), "fomo-si": gm_point(20.0)})
    assert fm.si_claim(si, tight).verdict == "confirmed"
    c = fm.si_claim(si, fm.with_spread(tight, spread))                # sd √(0.05² + 0.02) ≈ 0.15 on 4 dof: ±0.32 < 0.46
    assert c.verdict == "confirmed" and "Student's t, 4 dof" in c.evidence and "at best" in c.evidence
    wide = fm.subset_spread(subset_of({"fomo-ft": [19, 20, 21], "fomo-ema-merge": [19, 20, 21]}))   # pooled 1
    assert fm.si_claim(si, fm.with_spread(tight, wide)).verdict == "inconclusive"
    pools = ends(**{e: (20, z) for e, z in zip(("fomo-ft", *fm.POOLS), (30, 30.2, 29.9, 36))})
    assert fm.pool_claim(pools, SD).verdict == "confirmed"
    c = fm.pool_claim(pools, fm.with_spread(SD, fm.subset_spread(subset_of({"fomo-ft": [16, 20, 24]}))))
    assert c.verdict == "inconclusive" and "Tukey-adjusted for 4 pools" in c.evidence and "2 dof" in c.evidence


def test_tukey_q_grows_as_the_dof_shrink():
    assert fm.tukey_q(0.95, 4, 4) > fm.tukey_q(0.95, 4, 30) > fm.tukey_q(0.95, 4) == pytest.approx(3.63, abs=0.01)


def test_early_retention_and_trajectory_area_use_their_own_seed_spread():
    big = {"a": {"role": "adaptation", "n": 10**6}, "r": {"role": "retention", "n": 10**6}}   # test noise ≈ 0
    traj = [(10, 40)] + [(20, 42)] * 5 + [(30, 10)] * 3
    runs = {"fomo-ema-merge": run(traj, datasets=big), "fomo-zs-merge": run(traj, datasets=big)}
    assert fm.merge_early_retention_claim(runs).verdict == "confirmed"
    spread = {"metrics": {fm.early_key(): {"difference_spread": 2 * math.sqrt(2), "dof": 4}}, "source": "seed spread of S"}
    c = fm.merge_early_retention_claim(runs, fm.with_spread({}, spread))   # one trained run vs θ0: seed sd 2
    assert c.verdict == "inconclusive" and "seed spread of S" in c.evidence
    from scipy import stats
    assert c.high - c.effect == pytest.approx(stats.t.ppf(0.975, 4) * 2, rel=1e-3)
    orders = {"random": "fomo-ft", "time": "fomo-o-time"}
    area = {"fomo-ft": run([(10, 40)] + [(30, 30)] * 3, datasets=big), "fomo-o-time": run([(10, 40)] + [(27, 27)] * 3, datasets=big)}
    noise = fm.ledger_noise(area["fomo-ft"], fm.subset_spread(subset_of({"fomo-ft": [25, 30, 35]})))
    c = fm.best_of_claim("random", area, "fomo-ft", ["fomo-o-time"], fm.AREA, noise, "§7.1", value=lambda e: fm.trajectory_area(area[e]))
    assert c.verdict == "inconclusive" and "seed spread" in c.evidence           # area 30 vs 27, its seed std 5


def test_ledger_threads_the_spread_into_every_single_seed_claim():
    big = {"a": {"role": "adaptation", "n": 10**5}, "r": {"role": "retention", "n": 10**5}}
    runs = {e: run([(10, 40), p], datasets=big) for e, p in
            {"fomo-ft": (30, 20), "fomo-ema-merge": (27, 30), "fomo-lora4": (20, 35), "fomo-o-sim": (29, 21)}.items()}
    study = {"reference": "fomo-ft", "studies": {"methods": ["fomo-ft", "fomo-ema-merge", "fomo-lora4"]}}
    old = fm.ledger(runs, study, ORDERS, {"full-ft": 1.0})
    assert all(c.evidence == o.evidence for c, o in zip(fm.ledger(runs, study, ORDERS, {"full-ft": 1.0}, spread=None), old))
    spread = fm.subset_spread(subset_of({"fomo-ft": [15, 20, 25], "fomo-ema-merge": [15, 20, 25]}))   # seed std 5
    new = {c.claim.split(" (")[0]: c for c in fm.ledger(runs, study, ORDERS, {"full-ft": 1.0}, spread=spread)}
    assert new["Model merging gives the best accumulation–retention trade-off"].verdict == "inconclusive"
    assert new["PEFT methods accumulate less and forget less than full fine-tuning"].verdict == "inconclusive"
    measured = [c for c in new.values() if not c.evidence.startswith(("not run", "not measured")) and "tensor accounting" not in c.evidence]
    assert measured and all("at seeds 0, 1, 2" in c.evidence and fm.TEST_ONLY not in c.evidence for c in measured)


def test_teach_runs_pass_every_seed_of_the_subset():
    runs = ends(**{"fomo-ft": (30, 20), "fomo-ema-merge": (27, 30)})
    sub = subset_of({"fomo-ft": [20, 21, 22]})
    got = fm.teach_runs(runs, sub, ["fomo-ft", "fomo-ema-merge", "fomo-zs-merge"])
    assert [len(v) for v in got.values()] == [3, 1] and got["fomo-ft"][2] is sub["fomo-ft"][2]
    assert got["fomo-ema-merge"][0] is runs["fomo-ema-merge"]


def test_noise_table_shows_both_parts():
    spread = fm.subset_spread(subset_of({"fomo-ft": [18, 20, 22]}))
    t = fm.noise_table(fm.with_spread({"A_KA": 1.0, "GM": 1.0}, spread))
    assert list(t.index) == ["A_KA", "GM"] and t.loc["GM", "sd of a difference"] == pytest.approx(math.sqrt(1 + 8))
    assert t.loc["GM", "dof"] == 2 and t.loc["A_KA", "seed spread"] == pytest.approx(2 * math.sqrt(2))
    assert np.isnan(fm.noise_table(SD).loc["GM", "seed spread"])


def test_steps_by_stream_length_cuts_the_same_total_compute_into_t_tasks():
    def run(mafs, task_mafs=0.0):
        return {"budget": {"mafs": mafs, "task_mafs": task_mafs, "full_ft_mafs": 100.0},
                "config": {"fomo": {"steps_per_task": 10, "compute_scale": 1.0, "budget": "mafs"}}, "tasks": [["c"]] * 20}
    t = fm.steps_by_stream_length({"ft": run(100.0), "lora": run(75.0), "ewc": run(110.0, 50.0)})
    assert t.loc["ft"].tolist() == [10, 4, 2, 1]            # 200 steps of full FT over T = 20 / 50 / 100 / 200 tasks
    assert t.loc["lora"].tolist() == [13, 5, 2, 1]          # floor(T's full-FT steps × 100 / 75)
    assert t.loc["ewc"].tolist() == [8, 3, 1, 1]            # the per-task Fisher (50) paid from each task's budget
    assert list(t.columns) == ["T=20", "T=50", "T=100", "T=200"]
