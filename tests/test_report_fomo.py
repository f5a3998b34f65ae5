"""FoMo-in-Flux report functions on hand-made results (no runs needed)."""
import math

import matplotlib
import numpy as np
import pandas as pd
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
            "train": [{"seconds": 1.5, "samples": 128 * steps}] * (len(rows) - 1)}


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
    assert b.loc["lt", "total steps"] == 30 and b.loc["lt", "total samples"] == 128 * 30   # one task


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


def test_isolated_table_reads_each_dataset_after_its_own_task():
    # two tasks, one dataset each; every dataset is scored after every task, only the task's own counts
    r = {"experiment": "fomo-isolated", "config": {"method": {"name": "isolated"}},
         "tasks": [["b+++x", "b+++y"], ["a+++z"]], "steps_per_task": [20, 12],
         "datasets": {"a": {"role": "adaptation", "n": 30}, "b": {"role": "adaptation", "n": 40}},
         "zero_shot": {"datasets": {"a": 10.0, "b": 5.0}},
         "trajectory": [{"datasets": {"a": 11.0, "b": 25.0}}, {"datasets": {"a": 40.0, "b": 6.0}}]}
    t = fm.isolated_table(r)
    assert list(t.index) == ["b", "a"]
    assert t.loc["b"].tolist() == [5.0, 25.0, 20.0, 20, 40]
    assert t.loc["a"].tolist() == [10.0, 40.0, 30.0, 12, 30]
    with pytest.raises(ValueError, match="spans 2 datasets"):
        fm.isolated_table({**r, "tasks": [["a+++z", "b+++x"], ["a+++y"]]})
    with pytest.raises(ValueError, match="not 'isolated'"):
        fm.isolated_table({**r, "config": {"method": {"name": "seqf"}}})


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


# ------------------------------------------------------------------ the claims ledger, judged for power (issue 48)
SD = {"A_KA": 1.0, "A_ZS": 1.0, "GM": 1.0}    # the sd of one difference, given directly
# our headroom = the paper's: every scaled effect is then the paper's own (or its stand-in)
SCALES = fm.study_scales({"power": {"headroom": {m: fm.paper_headroom(m) for m in fm.POWER_METRICS}}}, [])
Z5 = np.array([-1.26, -0.63, 0.0, 0.63, 1.26]) / np.std([-1.26, -0.63, 0.0, 0.63, 1.26], ddof=1)   # sd 1, mean 0


def diffs(verdict: str, s: float) -> np.ndarray:
    """Five paired per-seed differences that read `verdict` against a scaled effect `s` (one comparison)."""
    return {"confirmed": 3 * s + 0.05 * s * Z5, "refuted": -s + 0.05 * s * Z5,
            "underpowered": 0.3 * s + 1.5 * s * Z5, "inconclusive": 0.5 * s + 0.45 * s * Z5}[verdict]


def ends(**gm_or_points):
    """{experiment: a run ending at (A_KA, A_ZS)} from θ0 (10, 40)."""
    return {e: run([(10, 40), p]) for e, p in gm_or_points.items()}


def gm_point(gm):
    return (gm, gm)   # A_KA = A_ZS = GM


def deep(**points):
    """{experiment: {seed: a run ending at the seed's point}} from per-seed (A_KA, A_ZS) lists (θ0 (10, 40))."""
    return {e: {s: run([(10, 40), p]) for s, p in enumerate(ps)} for e, ps in points.items()}


def gm_pair(better: str, worse: str, d, base: float = 20.0, **more) -> dict:
    """`better` ends d[s] GM above `worse` at every seed s."""
    return deep(**{worse: [gm_point(base)] * len(d), better: [gm_point(base + x) for x in d]}, **more)


VERDICTS4 = ["confirmed", "refuted", "underpowered", "inconclusive"]


def test_the_papers_headroom_and_stand_ins_come_from_its_text():
    from vlcp.report.refs import paper_table

    txt = paper_table("fomo_text").set_index("setting")
    b16, l14 = txt.loc["ViT-B/16 full fine-tuning (change over the stream)"], txt.loc["ViT-L/14 full fine-tuning (change over the stream)"]
    assert fm.PAPER_FT_CHANGE == {"ViT-B/16": (b16.delta_A_KA, b16.delta_A_ZS), "ViT-L/14": (l14.delta_A_KA, l14.delta_A_ZS)}
    nob = txt.loc["no buffer (.5/.5/0) vs reference"]
    assert fm.PAPER_NOBUFFER == (nob.delta_A_KA, nob.delta_A_ZS)
    assert fm.paper_headroom("A_KA") == 9.0 and fm.paper_headroom("A_ZS") == 3.2
    # GM: the endpoint (54.5: the two orderings' A_KA midpoint, 64.4) against θ0 = endpoint − (9.0, −3.2)
    assert fm.paper_headroom("GM") == pytest.approx(math.sqrt(54.5 * 64.4) - math.sqrt(45.5 * 67.6))
    assert fm.stand_in("GM")[0] == pytest.approx(math.sqrt(55.2 * 65.6) - math.sqrt(53.8 * 64.3))
    assert fm.stand_in("A_KA")[0] == pytest.approx(1.4) and "lower bound" in fm.stand_in("A_ZS")[1]
    assert fm.nobuffer_gm_effect() == pytest.approx(math.sqrt(54.5 * 64.4) - math.sqrt(40.5 * 61.9))
    with pytest.raises(ValueError, match="R@1"):
        fm.paper_headroom("R@1")


def test_study_scales_are_fixed_in_params_or_measured_on_full_ft():
    from vlcp.errors import VlcpError

    fixed = fm.study_scales({"power": {"headroom": {"A_KA": 1.8, "A_ZS": 0.9, "GM": -0.4}, "calibrated": "today"}}, [])
    assert fixed["A_KA"](9.0) == pytest.approx(1.8) and fixed["A_ZS"](1.6) == pytest.approx(0.45)
    assert fixed["GM"](5.0) == 0.0 and fixed[fm.AREA] is fixed["GM"] and fixed[fm.early_key()] is fixed["A_ZS"]
    assert "calibrated today" in fixed["A_KA"].cite()
    ft = [run([(10, 40), (16, 37)]), run([(10, 40), (18, 35)])]     # A_KA +7, A_ZS −4 on average
    got = fm.study_scales({}, ft)
    assert got["A_KA"].headroom == pytest.approx(7.0) and got["A_ZS"].headroom == pytest.approx(4.0)
    assert "measured on this ledger's own full-FT runs" in got["GM"].how
    with pytest.raises(VlcpError, match="report.fomo.power.headroom"):
        fm.study_scales({"power": {"headroom": 3.0}}, [])
    cfg = {"name": "fomo-ft", "train": {"steps": 10}}
    cal = {"headroom": {"A_KA": 1.8, "A_ZS": 0.9, "GM": -0.4}, "calibrated": "today"}
    ft_cfg = [dict(r, config=cfg) for r in ft]
    assert fm.study_scales({"reference": "fomo-ft", "power": cal | {"calibrated_on": {"fomo-ft": "0" * 12}}},
                           ft_cfg)["A_KA"].headroom == pytest.approx(7.0)          # another configuration: its own
    from vlcp.report.claims import calibration_fingerprint
    kept = fm.study_scales({"reference": "fomo-ft", "power": cal | {"calibrated_on": {"fomo-ft": calibration_fingerprint(cfg)}}},
                           ft_cfg)
    assert kept["A_KA"].headroom == pytest.approx(1.8)
    blind = fm.study_scales({"reference": "fomo-ft", "power": cal | {"calibrated_on": {"fomo-ft": "0" * 12}}}, ft_cfg,
                            "its own runs do not resolve it")
    assert blind["A_KA"].headroom == 0.0 and "it measures 7.00, but its own runs do not resolve it" in blind["A_KA"].how
    assert blind[fm.AREA] is blind["GM"]
    # the power table's pair is joint − θ0: full FT's change must resolve itself on its seed sd
    loose = [run([(10, 40), (12, 37)]), run([(10, 40), (22, 35)])]     # A_KA +7 ± 7.07; A_ZS −4 ± 1.41
    murky = fm.study_scales({}, loose)
    assert murky["A_KA"].headroom == 0.0 and murky["A_ZS"].headroom == pytest.approx(4.0)
    assert "full FT's change on A_KA does not resolve its headroom (H/σ_d 1.0 ≤ 2: H 7.00, σ_d 7.07, seed sd, 2 seeds)" \
        in murky["A_KA"].how
    assert fm.study_scales({}, ft[:1])["A_KA"].headroom == 0.0   # one run: no σ_d to check it against


def test_by_seed_keeps_the_subsets_seeds_and_the_study_run_otherwise():
    runs = ends(**{"fomo-ft": (30, 20), "fomo-lora4": (20, 30)})
    sub = {"fomo-ft": {0: runs["fomo-ft"], 1: run([(10, 40), (31, 20)])}, "fomo-lora4": {0: runs["fomo-lora4"]}}
    d = fm.by_seed(runs, sub, seed=0)
    assert sorted(d["fomo-ft"]) == [0, 1] and d["fomo-lora4"] == {0: runs["fomo-lora4"]}
    assert fm.by_seed(runs, None)["fomo-ft"] == {0: runs["fomo-ft"]}


@pytest.mark.parametrize("verdict", VERDICTS4)
@pytest.mark.parametrize("claim,better,worse,extra", [
    (lambda d: fm.merge_vs_ft_claim(d, SD, SCALES), "fomo-ema-merge", "fomo-ft", {}),
    (lambda d: fm.merging_best_claim(d, SD, SCALES), "fomo-ema-merge", "fomo-ft", {}),
    (lambda d: fm.locked_towers_claim(d, SD, SCALES), "fomo-ft", "fomo-locked-image", {}),
    (lambda d: fm.best_of_claim("τ", d, "fomo-tau001", ["fomo-tau001", "fomo-tau01", "fomo-tau05"], "GM", SD, SCALES, "§6.4"),
     "fomo-tau001", "fomo-tau01", {}),
    (lambda d: fm.best_of_claim("random", d, "fomo-ft", ["fomo-o-time"], fm.AREA, {**SD, fm.AREA: 1.0}, SCALES, "§7.1",
                                value=fm.trajectory_area),
     "fomo-ft", "fomo-o-time", {}),
])
def test_one_comparison_gm_claims_read_each_verdict_at_depth(claim, better, worse, extra, verdict):
    s = fm.stand_in("GM")[0]
    c = claim(gm_pair(better, worse, diffs(verdict, s), **extra))
    assert c.verdict == verdict, c
    assert c.scaled_effect == pytest.approx(s) and "paired by seed, n=5" in c.evidence and "§7.1" in c.paper_effect
    assert (c.seeds_to_decide is None) == (verdict in ("confirmed", "refuted"))


def test_a_single_seed_row_is_exploratory_and_never_decided():
    c = fm.merge_vs_ft_claim(deep(**{"fomo-ft": [gm_point(20)], "fomo-ema-merge": [gm_point(30)]}), SD, SCALES)
    assert c.verdict == "inconclusive" and "exploratory" in c.evidence and "would read confirmed" in c.evidence
    assert c.seeds_to_decide is not None and fm.TEST_ONLY in c.evidence
    c = fm.merge_vs_ft_claim(deep(**{"fomo-ft": [gm_point(20)], "fomo-ema-merge": [gm_point(20.5)]}), {"GM": 3.0}, SCALES)
    assert c.verdict == "underpowered" and c.mde > c.scaled_effect


def test_locked_towers_say_when_the_locked_tower_ends_above():
    d = gm_pair("fomo-ft", "fomo-locked-image", diffs("refuted", fm.stand_in("GM")[0]))
    for r in d["fomo-locked-image"].values():
        r["steps_per_task"] = [16]
    c = fm.locked_towers_claim(d, SD, SCALES)
    assert c.verdict == "refuted" and "Finding 4" in c.source
    assert "1.3× full FT's steps per task (paper 9.1×)" in c.evidence and "ends 1.4 GM above full FT" in c.evidence


@pytest.mark.parametrize("verdict", ["confirmed", "refuted", "underpowered"])
@pytest.mark.parametrize("claim,rival,dirs", [
    (lambda d: fm.peft_claim(d, SD, SCALES), "fomo-lora4", (1, -1)),      # FT's A_KA above, the PEFT's A_ZS above
    (lambda d: fm.ewc_claim(d, SD, SCALES), "fomo-ewc", (1, -1)),
    (lambda d: fm.stream_length_claim(d, SD, SCALES), "fomo-t50", (1, 1)),   # T = 20 above in both
])
def test_two_metric_claims_against_full_ft_read_each_verdict(claim, rival, dirs, verdict):
    dka, dzs = diffs(verdict, fm.stand_in("A_KA")[0]), diffs(verdict, fm.stand_in("A_ZS")[0])
    if verdict == "confirmed":    # both comparisons, each at 95 %
        dka, dzs = dka * 2, dzs * 2
    ft = [(30, 20)] * 5
    other = [(30 - dirs[0] * a, 20 - dirs[1] * z) for a, z in zip(dka, dzs)]
    c = claim(deep(**{"fomo-ft": ft, rival: other}))
    assert c.verdict == verdict, c
    assert c.comparisons == 2 and "2 comparisons, all must hold" in c.evidence


@pytest.mark.parametrize("verdict", VERDICTS4)
def test_si_equivalence_each_verdict(verdict):
    # margin 2.3 % of full FT's GM 20 = 0.46
    d = {"confirmed": 0.02 * Z5, "refuted": 2 + 0.02 * Z5, "underpowered": 2 * Z5, "inconclusive": 0.4 + 0.25 * Z5}[verdict]
    c = fm.si_claim(gm_pair("fomo-si", "fomo-ft", d), SD)
    assert c.verdict == verdict, c
    assert "margin ±0.46" in c.evidence and "§7.1" in c.evidence and c.scaled_effect == pytest.approx(0.46, abs=0.01)


@pytest.mark.parametrize("verdict", VERDICTS4)
def test_orderings_similar_each_verdict(verdict):
    d = {"confirmed": 0.02 * Z5, "refuted": 2 + 0.02 * Z5, "underpowered": 2 * Z5, "inconclusive": 0.4 + 0.25 * Z5}[verdict]
    runs = gm_pair("fomo-o-sim", "fomo-ft", d, **{"fomo-o-easy": [gm_point(20.01)] * 5, "fomo-o-time": [gm_point(5)] * 5})
    c = fm.orderings_similar_claim(runs, SD, ORDERS)
    assert c.verdict == verdict and c.claim.startswith("Endpoints are similar across orderings")
    assert "fomo-o-time" not in c.evidence and "margin ±0.46" in c.evidence
    if verdict != "confirmed":
        assert c.evidence.startswith("fomo-o-sim")     # the ordering that decides the row


def test_single_seed_equivalence_is_exploratory():
    one = fm.by_seed(ends(**{"fomo-ft": gm_point(20.0), "fomo-si": gm_point(20.0)}), None)
    c = fm.si_claim(one, {**SD, "GM": 0.05})
    assert c.verdict == "inconclusive" and "would read confirmed" in c.evidence
    assert fm.si_claim(one, SD).verdict == "underpowered"


ORDERS = {"random": "fomo-ft", "easy-to-hard": "fomo-o-easy", "frequency": "fomo-o-freq", "similarity": "fomo-o-sim",
          "time": "fomo-o-time", "dataset": "fomo-o-dataset"}


@pytest.mark.parametrize("verdict", ["confirmed", "refuted", "underpowered"])
def test_ar_rsqrt_each_verdict(verdict):
    m = fm.similar_fraction("A_KA") * 30                         # the non-inferiority margin: 0.78
    zs = diffs(verdict, fm.stand_in("A_ZS")[0]) * (2 if verdict == "confirmed" else 1)
    ka = {"confirmed": 0.05 * Z5, "refuted": -m - 0.5 + 0.05 * Z5, "underpowered": 5 * Z5}[verdict]   # refuted: well below
    c = fm.ar_rsqrt_claim(deep(**{"fomo-ft": [(30, 20)] * 5, "fomo-ar-rsqrt": [(30 + a, 20 + z) for a, z in zip(ka, zs)]}), SD, SCALES)
    assert c.verdict == verdict, c
    assert "non-inferiority" in c.evidence and "nearly the same" in c.paper_effect


@pytest.mark.parametrize("verdict", ["confirmed", "refuted", "underpowered"])
def test_early_retention_is_against_theta0_each_verdict(verdict):
    s = fm.stand_in("A_ZS")[0]
    d = diffs(verdict, s) * (2 if verdict == "confirmed" else 1)
    pts = lambda x: [(10, 40)] + [(20, 40 + x)] * 5 + [(30, 10)] * 15   # noqa: E731
    runs = {e: {i: run(pts(x)) for i, x in enumerate(d)} for e in ("fomo-ema-merge", "fomo-zs-merge")}
    runs["fomo-ft"] = {i: run([(10, 40)] + [(30, 5)] * 20) for i in range(5)}    # full FT far below: it must not matter
    c = fm.merge_early_retention_claim(runs, SD, SCALES)
    assert c.verdict == verdict, c
    assert "vs θ0 40.0" in c.evidence and c.scaled_effect == pytest.approx(s)


def test_not_run_claims_are_inconclusive_and_name_the_runs():
    c = fm.merge_early_retention_claim(deep(**{"fomo-ft": [(20, 30)]}), SD, SCALES)
    assert c.verdict == "inconclusive" and "not run: fomo-ema-merge, fomo-zs-merge" in c.evidence
    assert fm.best_of_claim("lr", deep(**{"fomo-ft": [(20, 30)]}), "fomo-ft", ["fomo-lr1e-4"], "A_KA", SD, SCALES, "").evidence \
        == "not run: fomo-lr1e-4"


def test_mixtures_carry_the_papers_no_buffer_numbers():
    d5, up = diffs("confirmed", fm.nobuffer_gm_effect()), diffs("confirmed", fm.stand_in("GM")[0])
    runs = deep(**{"fomo-ft": [gm_point(40)] * 5, "fomo-mix-iidify": [gm_point(40 + x) for x in up],
                   "fomo-mix-nobuffer": [gm_point(40 - x) for x in d5]})
    c = fm.mixtures_claim(runs, SD, SCALES, ["fomo-ft", "fomo-mix-iidify", "fomo-mix-nobuffer"])
    # iidify above the reference and no-buffer; the reference and iidify above no-buffer
    assert c.verdict == "confirmed" and c.comparisons == 4 and "-14.0 A_KA" in c.paper_effect
    assert "fomo-ft vs nobuffer" in c.evidence and "(scaled paper effect +9.17)" in c.evidence
    runs["fomo-mix-nobuffer"] = {s: run([(10, 40), gm_point(40.5 + z)]) for s, z in enumerate(Z5)}   # no-buffer above the reference
    assert fm.mixtures_claim(runs, SD, SCALES, ["fomo-ft", "fomo-mix-iidify", "fomo-mix-nobuffer"]).verdict == "refuted"


@pytest.mark.parametrize("verdict", ["confirmed", "refuted"])
def test_model_size_each_verdict(verdict):
    s_small, s_large = fm.stand_in("A_ZS")[0], 4.0          # default − large: §6.2's B/16 3.2 vs L/14 −0.8
    k = 2 if verdict == "confirmed" else -1
    runs = deep(**{"fomo-ft": [(20, 35)] * 5,                 # default forgets 5
                   "fomo-ft-s": [(20, 35 - k * s_small + 0.05 * z) for z in Z5],
                   "fomo-ft-l": [(20, 35 + k * s_large + 0.05 * z) for z in Z5]})
    c = fm.model_size_claim(runs, SD, SCALES)
    assert c.verdict == verdict, c
    assert "L/14 -0.8" in c.paper_effect and "forgetting B/16 3.2" in c.paper_effect


@pytest.mark.parametrize("zs,sd,reads", [
    ((30, 30.2, 29.9, 36), 1.0, "would read confirmed"),          # one pool 6 points up: beyond Tukey's 3.63 × 0.71
    ((30, 30.05, 29.98, 30.02), 0.05, "would read refuted"),     # every gap well inside the paper's 2.4
    ((30, 31, 29.5, 32), 3.0, "underpowered"),
])
def test_pool_claim_is_single_run_and_exploratory(zs, sd, reads):
    runs = ends(**{e: (20, z) for e, z in zip(("fomo-ft", *fm.POOLS), zs)})
    c = fm.pool_claim(fm.by_seed(runs, None), {**SD, "A_ZS": sd}, SCALES)
    assert (c.verdict == "underpowered") if reads == "underpowered" else (c.verdict == "inconclusive" and reads in c.evidence), c
    assert "Tukey-adjusted for 4 pools" in c.evidence and c.scaled_effect == pytest.approx(2.4)


def test_pool_claim_rarely_reads_a_change_under_pure_test_noise():
    """The old check (range > 2 × the sd of a difference) confirmed about 19 % of pure-noise cases."""
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(400):
        zs = 30 + rng.normal(0, 1 / math.sqrt(2), 4)   # one run's A_ZS has sd = (sd of a difference) / √2
        c = fm.pool_claim(fm.by_seed(ends(**{e: (20, z) for e, z in zip(("fomo-ft", *fm.POOLS), zs)}), None), SD, SCALES)
        hits += "would read confirmed" in c.evidence
    assert hits / 400 < 0.08


def test_compute_scaling_is_a_difference_of_gains():
    runs = fm.by_seed(ends(**{"fomo-ft-c025": gm_point(18), "fomo-ft-c6": gm_point(19), "fomo-ema-c025": gm_point(18),
                             "fomo-ema-c6": gm_point(30)}), None)
    c = fm.compute_scaling_claim(runs, SD, SCALES)
    assert c.effect == pytest.approx(11.0) and c.sigma_d == pytest.approx(math.sqrt(2))   # four evaluations: √(4/2) × 1
    assert c.verdict == "inconclusive" and "would read confirmed" in c.evidence
    four = ("fomo-ft-c025", "fomo-ft-c6", "fomo-ema-c025", "fomo-ema-c6")
    deep3 = deep(**{e: [gm_point(g + 0.1 * s) for s in range(3)] for e, g in zip(four, (18, 19, 18, 30))})
    deep3["fomo-ema-c6"] = {s: run([(10, 40), gm_point(30 + z)]) for s, z in enumerate((0.0, 0.2, -0.1))}
    c = fm.compute_scaling_claim(deep3, SD, SCALES)                # paired over the three seeds all four have
    assert c.verdict == "confirmed" and "paired by seed, n=3" in c.evidence and "over 3 seeds" in c.evidence


def test_memory_order_claim_is_exact_confirmed_or_refuted():
    paper = {"locked-image": 0.26, "LNFit": 0.66, "BitFit": 0.66, "LoRA, r=4": 0.87, "full-ft": 1.0, "EWC": 1.01, "SI": 1.0}
    assert fm.memory_order_claim(paper, "paper").verdict == "confirmed"          # ties allowed at full FT ≤ SI
    c = fm.memory_order_claim({**paper, "locked-image": 0.78}, "tiny")
    assert c.verdict == "refuted" and "2 links of the order broken" in c.evidence
    c = fm.memory_order_claim({k: v for k, v in paper.items() if k != "SI"}, "tiny")
    assert c.verdict == "inconclusive" and "not measured: SI" in c.evidence


def test_ledger_pairs_the_subsets_seeds_and_keeps_the_rest_exploratory():
    big = {"a": {"role": "adaptation", "n": 10**5}, "r": {"role": "retention", "n": 10**5}}
    runs = {e: run([(10, 40), p], datasets=big) for e, p in
            {"fomo-ft": (30, 20), "fomo-ema-merge": (27, 30), "fomo-lora4": (20, 35), "fomo-o-sim": (29, 21)}.items()}
    study = {"reference": "fomo-ft", "seed": 0, "studies": {"methods": ["fomo-ft", "fomo-ema-merge", "fomo-lora4"]},
             "power": {"headroom": {"A_KA": 9.0, "A_ZS": 3.2, "GM": 3.0}}}
    subset = {"fomo-ft": {0: runs["fomo-ft"], **{s: run([(10, 40), (30 + s / 10, 20)], datasets=big) for s in (1, 2)}},
              "fomo-ema-merge": {0: runs["fomo-ema-merge"], **{s: run([(10, 40), (27 + s / 5, 30)], datasets=big) for s in (1, 2)}}}
    spread = fm.subset_spread(subset)
    claims = fm.ledger(runs, study, ORDERS, {"full-ft": 1.0}, spread=spread, subset=subset)
    by = {c.claim.split(" (")[0]: c for c in claims}
    main = by["Main claim: EMA-Merge ends above full fine-tuning"]
    assert main.verdict == "confirmed" and main.seeds == 3 and "paired by seed, n=3" in main.evidence
    assert "× our H 3.00 / the paper's 3.78" in main.paper_effect
    peft = by["PEFT methods accumulate less and forget less than full fine-tuning"]
    assert peft.verdict == "inconclusive" and "exploratory" in peft.evidence and "at seeds 0, 1, 2" in peft.evidence
    assert by["Tuning both towers beats locking the image or the text tower"].evidence.startswith("not run")
    assert all(c.source.startswith("FoMo-in-Flux") for c in claims)
    measured = [c for c in claims if not c.evidence.startswith(("not run", "not measured"))]
    assert measured and all(c.low is not None and c.high is not None for c in measured)
    assert all(c.verdict in ("underpowered", "inconclusive") for c in measured
               if "exploratory" in c.evidence or c.seeds == 1 and "tensor accounting" not in c.evidence)
    without = fm.ledger(runs, study, ORDERS, {"full-ft": 1.0})   # no subset: every row single-run
    assert all(c.verdict in ("underpowered", "inconclusive") for c in without if "tensor accounting" not in c.evidence)


def test_ledger_reads_seeds_as_blocks_when_three_experiments_share_the_subsets_seeds():
    big = {"a": {"role": "adaptation", "n": 10**5}, "r": {"role": "retention", "n": 10**5}}
    runs = {e: run([(10, 40), p], datasets=big) for e, p in
            {"fomo-ft": (30, 20), "fomo-ema-merge": (27, 30), "fomo-zs-merge": (26, 29)}.items()}
    study = {"reference": "fomo-ft", "seed": 0, "studies": {"methods": list(runs)},
             "power": {"headroom": {"A_KA": 9.0, "A_ZS": 3.2, "GM": 3.0}}}
    jitter = {"fomo-ft": (0.1, -0.2), "fomo-ema-merge": (0.3, 0.1), "fomo-zs-merge": (-0.2, 0.4)}
    subset = {e: {0: runs[e], **{s: run([(10, 40), (p[0] + jitter[e][s - 1], p[1] + s)], datasets=big) for s in (1, 2)}}
              for e, p in {"fomo-ft": (30, 20), "fomo-ema-merge": (27, 30), "fomo-zs-merge": (26, 29)}.items()}
    blocks = fm.seed_blocks(subset)
    assert blocks["GM"] is not None and blocks["GM"].dof == 4 and set(blocks) == set(fm.ledger_metrics())
    claims = fm.ledger(runs, study, ORDERS, {"full-ft": 1.0}, spread=fm.subset_spread(subset), subset=subset)
    main = next(c for c in claims if c.claim.startswith("Main claim"))
    assert main.seeds == 3 and "seeds as blocks" in main.evidence and "on 4 dof" in main.evidence
    # two experiments at the seeds: nothing to pool, each pair reads its own spread
    assert fm.seed_blocks({e: subset[e] for e in ("fomo-ft", "fomo-ema-merge")})["GM"] is None



def test_notebook_claims_cell_runs_on_fake_results(tmp_path):
    """The notebook's claims cell, run in plain Python on fake runs: it only calls `fm.ledger`."""
    import json
    from pathlib import Path

    from vlcp.report.claims import claims_frame, ledger_style, write_claims

    nb = json.loads((Path(__file__).parents[1] / "notebooks" / "fomo_figures.ipynb").read_text())
    cell = next("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code" and "write_claims(" in "".join(c["source"]))
    assert "confirmed" not in cell and "greater(" not in cell   # no verdict computed in the notebook
    runs = ends(**{"fomo-ft": (30, 20), "fomo-ema-merge": (27, 30), "fomo-lora4": (20, 35), "fomo-o-sim": (29, 21)})
    spread = fm.subset_spread(subset_of({"fomo-ft": [20, 21, 22]}))
    ns = {"report": True, "fm": fm, "runs": runs, "study": {"reference": "fomo-ft", "studies": {}}, "orders": ORDERS,
          "mm_tiny": {}, "bench": None, "claims_frame": claims_frame, "ledger_style": ledger_style, "write_claims": write_claims, "Path": Path,
          "reports_dir": str(tmp_path), "display": lambda *a, **k: None, "spread": spread, "subset": {},
          "study_power_table": None, "unresolved": None}   # (the power cell, earlier in the notebook)
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
    ns = {"params_file": str(root / "params.yaml"), "runs_dir": str(tmp_path), "run_live": False, "long": False}
    exec(cell, ns)
    assert ns["report"] and list(ns["runs"]) == ["fomo-ft", "fomo-ema-merge"]
    if len(seeds) > 1:
        assert "fomo-ft, fomo-ema-merge at seeds 0, 1, 2" in ns["spread"]["source"] and ns["noise"]["dof"]["GM"] == 4
        assert fm.seed_runs(ns["runs"], ns["subset"], ["fomo-ft"])["fomo-ft"][1]["trajectory"][-1]["GM"] == 21
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


def test_tukey_q_grows_as_the_dof_shrink():
    assert fm.tukey_q(0.95, 4, 4) > fm.tukey_q(0.95, 4, 30) > fm.tukey_q(0.95, 4) == pytest.approx(3.63, abs=0.01)


def test_seed_runs_pass_every_seed_of_the_subset():
    runs = ends(**{"fomo-ft": (30, 20), "fomo-ema-merge": (27, 30)})
    sub = subset_of({"fomo-ft": [20, 21, 22]})
    got = fm.seed_runs(runs, sub, ["fomo-ft", "fomo-ema-merge", "fomo-zs-merge"])
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


@pytest.mark.parametrize("long", [False, True])
def test_table_cells_show_one_seed_or_mean_and_std_and_keep_their_arithmetic_numeric(long):
    """The mixtures and compute-scaling cells on fake runs: by default the study's one run (numbers, as
    before); in the long profile every seed, each cell "mean ± std", while the "vs reference" columns
    and the plot read the numeric means."""
    import json
    from pathlib import Path

    import matplotlib.pyplot as plt

    from vlcp.report.refs import paper_table
    from vlcp.report.results import mean_frame, shown_frame

    nb = json.loads((Path(__file__).parents[1] / "notebooks" / "fomo_figures.ipynb").read_text())
    cells = {c.get("id"): "".join(c["source"]) for c in nb["cells"]}
    mixes = {"fomo-ft": (30, 20), "fomo-mix-nobuffer": (28, 18), "fomo-mix-iidify": (31, 22), "fomo-ema-merge": (27, 30)}
    runs = ends(**mixes)
    subset = {e: {0: runs[e], 1: run([(10, 40), (p[0] + 2, p[1])]), 2: run([(10, 40), (p[0] + 4, p[1])])}
              for e, p in mixes.items()}
    shown = []
    ns = {"report": True, "fm": fm, "runs": runs, "tsub": subset if long else {}, "zs": runs["fomo-ft"]["zero_shot"],
          "joint": None, "study": {"reference": "fomo-ft"}, "plt": plt, "pd": pd, "mean_frame": mean_frame,
          "shown_frame": shown_frame, "display": shown.append, "Markdown": str, "txt": paper_table("fomo_text")}
    exec(cells["8b6f9be2"], ns)
    mt = next(t for t in shown if isinstance(t, pd.DataFrame) and "A_KA vs reference" in t.columns)
    assert mt.loc["IIDify 0/.1/.9", "A_KA vs reference"] == pytest.approx(1.0)     # (31 + 2) − (30 + 2): of the means
    assert mt.loc["reference .33/.34/.33", "A_KA"] == ("32.0 ± 2.0" if long else 30.0)
    exec(cells["0f21ed50"], ns)
    assert ns["cs_"].loc[("ft", 1), "A_KA"] == pytest.approx(32.0 if long else 30.0)     # numeric: the plot's means
    plt.close("all")
