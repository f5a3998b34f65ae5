"""FoMo-in-Flux report functions on hand-made results (no runs needed)."""
import math

import matplotlib
import numpy as np
import pandas as pd
import pytest

from vlcp.report import fomo as fm
from vlcp.report import ledger as lg
from vlcp.report import stats as st
from vlcp.report.results import MEASURES as GENERIC_MEASURES
from vlcp.report.study import load_study

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


# ------------------------------------------------------------------ the claims ledger: rows of studies/fomo/claims.yaml
STUDY = load_study("fomo")
ROWS = {r.id: r for r in STUDY.claims.rows}
MEAS = {**GENERIC_MEASURES, **fm.MEASURES}
SD = {"A_KA": 1.0, "A_ZS": 1.0, "GM": 1.0}    # the test-set sd of one difference, given directly
FLOOR_NAMES = ("A_KA", "A_ZS", "GM", "trajectory_area", "early gain", "A_KA change", "A_ZS change", "GM change",
               "forgetting, two runs", "GM, gain of gains")
FLOORS = {n: st.Noise(1.0, None, "given") for n in FLOOR_NAMES}
# our headroom = the paper's: every scaled effect is then the paper's own (or its stand-in)
SCALES = {m: lg.Scale(1.0, 1.0, "ours = the paper's") for m in ("A_KA", "A_ZS", "GM")}
Z5 = np.array([-1.26, -0.63, 0.0, 0.63, 1.26]) / np.std([-1.26, -0.63, 0.0, 0.63, 1.26], ddof=1)   # sd 1, mean 0
TXT = None


def paper_text():
    from vlcp.report.paper import paper_table

    return paper_table("fomo_text").set_index("setting")


def judge(claim_id: str, runs: dict, floors: dict | None = None) -> lg.Row:
    """One row of the claims file judged on `runs` ({experiment: {seed: results}}) at SCALES."""
    spec = ROWS[claim_id]
    ctx = lg.Context(MEAS, SCALES, STUDY.claims.depth, FLOORS if floors is None else floors)
    return {**lg.KINDS, **fm.KINDS}[spec.kind](spec, runs, ctx)


def effect_of(claim_id: str, i: int = 0) -> float:
    return ROWS[claim_id].comparisons[i].effect


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
GM_STAND_IN = math.sqrt(55.2 * 65.6) - math.sqrt(53.8 * 64.3)


def test_the_papers_numbers_in_the_claims_file_come_from_its_text():
    """The numbers the CSVs hold only through a square root, written out in claims.yaml, derived again."""
    from vlcp.report.paper import paper_data

    txt, pd_ = paper_text(), paper_data("fomo")
    (ka1, zs1), (ka2, zs2) = pd_["similar_endpoints"].values()
    b16 = txt.loc["ViT-B/16 full fine-tuning (change over the stream)"]
    nob = txt.loc["no buffer (.5/.5/0) vs reference"]
    ka, zs = (ka1 + ka2) / 2, pd_["random_endpoint_zs"]                 # the paper's default endpoint
    gm1, gm2 = math.sqrt(ka1 * zs1), math.sqrt(ka2 * zs2)
    assert effect_of("merge-vs-ft") == pytest.approx(gm1 - gm2, rel=1e-12) == pytest.approx(GM_STAND_IN)
    assert STUDY.claims.scales["GM"].paper_headroom == pytest.approx(
        math.sqrt(ka * zs) - math.sqrt((ka - b16.delta_A_KA) * (zs - b16.delta_A_ZS)), rel=1e-12)
    mix = {c.label: c.effect for c in ROWS["mixtures"].comparisons}
    assert mix["fomo-ft vs nobuffer"] == pytest.approx(
        math.sqrt(ka * zs) - math.sqrt((ka + nob.delta_A_KA) * (zs + nob.delta_A_ZS)), rel=1e-12)
    assert effect_of("si") == pytest.approx(abs(gm1 - gm2) / ((gm1 + gm2) / 2), rel=1e-12)
    assert effect_of("ar-rsqrt", 1) == pytest.approx(abs(ka1 - ka2) / ((ka1 + ka2) / 2), rel=1e-12)
    # the rest are cell references: the stand-ins, the headrooms, §6.2's model sizes
    assert effect_of("learning-rate") == pytest.approx(1.4) and effect_of("merge-early-retention") == pytest.approx(1.3)
    assert STUDY.claims.scales["A_KA"].paper_headroom == 9.0 and STUDY.claims.scales["A_ZS"].paper_headroom == 3.2
    assert effect_of("model-size", 1) == pytest.approx(0.8 + 3.2)       # forgetting B/16 3.2 vs L/14 −0.8
    assert ROWS["pool"].options["effect"] == pd_["pool_gain_zs"]


@pytest.mark.parametrize("verdict", VERDICTS4)
@pytest.mark.parametrize("claim_id,better,worse", [
    ("merge-vs-ft", "fomo-ema-merge", "fomo-ft"),
    ("merging-best", "fomo-ema-merge", "fomo-ft"),
])
def test_one_comparison_gm_rows_read_each_verdict_at_depth(claim_id, better, worse, verdict):
    r = judge(claim_id, gm_pair(better, worse, diffs(verdict, GM_STAND_IN)))
    assert r.verdict == verdict, r
    assert r.scaled_effect == pytest.approx(GM_STAND_IN) and r.comparisons[0]["how"] == "paired by seed, n=5"
    assert (r.seeds_to_decide is None) == (verdict in ("confirmed", "refuted"))


def test_merging_best_chooses_each_groups_best_on_the_runs():
    runs = deep(**{"fomo-ema-merge": [gm_point(25)] * 5, "fomo-zs-merge": [gm_point(27)] * 5,
                   "fomo-ft": [gm_point(20)] * 5, "fomo-locked-image": [gm_point(26 + 0.1 * z) for z in Z5]})
    r = judge("merging-best", runs)
    assert r.comparisons[0]["label"] == "best fomo-zs-merge vs best other fomo-locked-image"
    assert judge("merging-best", deep(**{"fomo-ft": [gm_point(20)]})).verdict == "not testable"


def test_a_single_seed_row_is_exploratory_and_never_confirmed():
    small = {**FLOORS, "GM": st.Noise(0.1, None, "given")}
    r = judge("merge-vs-ft", deep(**{"fomo-ft": [gm_point(20)], "fomo-ema-merge": [gm_point(30)]}), small)
    assert r.verdict == "inconclusive" and any("exploratory" in n for n in r.notes) and r.low > 0   # its interval alone clears it
    r = judge("merge-vs-ft", deep(**{"fomo-ft": [gm_point(20)], "fomo-ema-merge": [gm_point(20.5)]}),
              {**FLOORS, "GM": st.Noise(3.0, None, "given")})
    assert r.verdict == "underpowered" and r.mde > r.scaled_effect
    r = judge("merge-vs-ft", deep(**{"fomo-ft": [gm_point(20)], "fomo-ema-merge": [gm_point(10)]}), small)
    assert r.verdict == "inconclusive"                                                    # exploratory: never refutes


@pytest.mark.parametrize("verdict", ["confirmed", "refuted", "underpowered"])
@pytest.mark.parametrize("claim_id,rival,dirs", [
    ("ewc", "fomo-ewc", (1, -1)),             # FT's A_KA above, EWC's A_ZS above
    ("stream-length", "fomo-t50", (1, 1)),     # T = 20 above in both
])
def test_two_metric_rows_against_full_ft_read_each_verdict(claim_id, rival, dirs, verdict):
    dka, dzs = diffs(verdict, 1.4), diffs(verdict, 1.3)
    if verdict == "confirmed":    # both comparisons, each at 95 %
        dka, dzs = dka * 2, dzs * 2
    other = [(30 - dirs[0] * a, 20 - dirs[1] * z) for a, z in zip(dka, dzs)]
    r = judge(claim_id, deep(**{"fomo-ft": [(30, 20)] * 5, rival: other}))
    assert r.verdict == verdict, r
    assert len(r.comparisons) == 2 and "all must hold" in r.notes[0]


def test_peft_needs_every_peft_method_each_way():
    peft = ("fomo-lora4", "fomo-lora64", "fomo-dora", "fomo-vera", "fomo-bitfit", "fomo-lnfit")
    runs = deep(**{"fomo-ft": [(30, 20)] * 5, **{e: [(30 - 5 + 0.05 * z, 20 + 5 + 0.05 * z) for z in Z5] for e in peft}})
    r = judge("peft", runs)
    assert r.verdict == "confirmed" and len(r.comparisons) == 12
    del runs["fomo-dora"]
    assert judge("peft", runs).verdict == "not testable" and "fomo-dora" in judge("peft", runs).notes[0]


@pytest.mark.parametrize("verdict", VERDICTS4)
def test_si_equivalence_each_verdict(verdict):
    # margin 2.3 % of full FT's GM 20 = 0.46
    d = {"confirmed": 0.02 * Z5, "refuted": 2 + 0.02 * Z5, "underpowered": 2 * Z5, "inconclusive": 0.4 + 0.25 * Z5}[verdict]
    r = judge("si", gm_pair("fomo-si", "fomo-ft", d))
    assert r.verdict == verdict, r
    assert r.scaled_effect == pytest.approx(0.457, abs=0.001) and r.kind == "equivalent within a share"


@pytest.mark.parametrize("verdict", VERDICTS4)
def test_orderings_similar_each_verdict(verdict):
    d = {"confirmed": 0.02 * Z5, "refuted": 2 + 0.02 * Z5, "underpowered": 2 * Z5, "inconclusive": 0.4 + 0.1 * Z5}[verdict]
    runs = gm_pair("fomo-o-sim", "fomo-ft", d, **{e: [gm_point(20 + 0.001 * z) for z in Z5] for e in ("fomo-o-easy", "fomo-o-freq")},
                   **{"fomo-o-time": [gm_point(5)] * 5})
    r = judge("orderings-similar", runs)
    assert r.verdict == verdict, r
    assert "fomo-o-time" not in str(r.comparisons)         # dataset-level orderings are left out
    if verdict != "confirmed":
        assert r.comparisons[2]["label"] == "fomo-o-sim" and r.effect == pytest.approx(r.comparisons[2]["effect"])


@pytest.mark.parametrize("verdict", ["confirmed", "refuted", "underpowered"])
def test_ar_rsqrt_each_verdict(verdict):
    m = effect_of("ar-rsqrt", 1) * 30                           # the non-inferiority margin: 0.77
    zs = diffs(verdict, 1.3) * (2 if verdict == "confirmed" else 1)
    ka = {"confirmed": 0.05 * Z5, "refuted": -m - 0.5 + 0.05 * Z5, "underpowered": 5 * Z5}[verdict]   # refuted: well below
    r = judge("ar-rsqrt", deep(**{"fomo-ft": [(30, 20)] * 5, "fomo-ar-rsqrt": [(30 + a, 20 + z) for a, z in zip(ka, zs)]}))
    assert r.verdict == verdict, r
    ni = r.comparisons[1]
    assert ni["label"] == f"A_KA + margin vs cosine's (margin {m:.2f})" and ni["scaled_effect"] == pytest.approx(m)


@pytest.mark.parametrize("verdict", ["confirmed", "refuted", "underpowered"])
def test_early_retention_is_against_theta0_each_verdict(verdict):
    d = diffs(verdict, 1.3) * (2 if verdict == "confirmed" else 1)
    pts = lambda x: [(10, 40)] + [(20, 40 + x)] * 5 + [(30, 10)] * 15   # noqa: E731
    runs = {e: {i: run(pts(x)) for i, x in enumerate(d)} for e in ("fomo-ema-merge", "fomo-zs-merge")}
    runs["fomo-ft"] = {i: run([(10, 40)] + [(30, 5)] * 20) for i in range(5)}    # full FT far below: it must not matter
    r = judge("merge-early-retention", runs)
    assert r.verdict == verdict, r
    assert r.scaled_effect == pytest.approx(1.3) and r.effect == pytest.approx(np.mean(d) if verdict != "confirmed" else r.effect)


def test_rows_whose_runs_are_missing_are_not_testable_and_name_them():
    r = judge("merge-early-retention", deep(**{"fomo-ft": [(20, 30)]}))
    assert r.verdict == "not testable" and "no runs of fomo-ema-merge, fomo-zs-merge" in r.notes[0]
    assert judge("learning-rate", deep(**{"fomo-ft": [(20, 30)]})).notes[0].startswith("no runs of fomo-lr1e-4")
    assert judge("merge-vs-ft", gm_pair("fomo-ema-merge", "fomo-ft", [1.0]), floors={}).verdict == "not testable"   # no floor


def test_mixtures_carry_the_papers_no_buffer_numbers():
    mixes = ("fomo-mix-pretrain", "fomo-mix-ibrahim")
    d5, up = diffs("confirmed", 9.174), diffs("confirmed", GM_STAND_IN)
    runs = deep(**{"fomo-ft": [gm_point(40)] * 5, "fomo-mix-iidify": [gm_point(40 + 2 * x) for x in up],
                   "fomo-mix-nobuffer": [gm_point(40 - x) for x in d5], **{e: [gm_point(40 + x) for x in up] for e in mixes}})
    r = judge("mixtures", runs)
    assert r.verdict == "confirmed" and len(r.comparisons) == 8
    nob = next(c for c in r.comparisons if c["label"] == "fomo-ft vs nobuffer")
    assert nob["scaled_effect"] == pytest.approx(9.174, abs=1e-3)
    runs["fomo-mix-nobuffer"] = {s: run([(10, 40), gm_point(40.5 + z)]) for s, z in enumerate(Z5)}   # no-buffer above the reference
    assert judge("mixtures", runs).verdict == "refuted"


@pytest.mark.parametrize("verdict", ["confirmed", "refuted"])
def test_model_size_each_verdict(verdict):
    s_small, s_large = 1.3, 4.0          # default − large: §6.2's B/16 3.2 vs L/14 −0.8
    k = 2 if verdict == "confirmed" else -1
    runs = deep(**{"fomo-ft": [(20, 35)] * 5,                 # default forgets 5
                   "fomo-ft-s": [(20, 35 - k * s_small + 0.05 * z) for z in Z5],
                   "fomo-ft-l": [(20, 35 + k * s_large + 0.05 * z) for z in Z5]})
    r = judge("model-size", runs)
    assert r.verdict == verdict, r
    assert [c["paper_effect"] for c in r.comparisons] == [pytest.approx(1.3), pytest.approx(4.0)]


POOLS = ("fomo-ft", "fomo-pool-onestyle", "fomo-pool-half", "fomo-pool-noisy")


@pytest.mark.parametrize("zs,sd,verdict", [
    ((30, 30.2, 29.9, 36), 0.3, "inconclusive"),      # one pool 6 points up: its interval clears 0, but one run each
    ((30, 31, 29.5, 32), 3.0, "underpowered"),
])
def test_pool_row_is_single_run_and_exploratory_on_one_seed(zs, sd, verdict):
    r = judge("pool", deep(**{e: [(20, z)] for e, z in zip(POOLS, zs)}), {"A_ZS": st.Noise(sd, None, "given")})
    assert r.verdict == verdict, r
    assert "Tukey-adjusted for 4 pools" in r.comparisons[0]["how"] and r.scaled_effect == pytest.approx(2.4)
    assert r.comparisons[0]["label"] == ("fomo-pool-noisy − fomo-pool-half")


def test_pool_row_decides_over_seeds_and_rarely_reads_a_change_under_pure_noise():
    """At three seeds per pool (the pools' means, one value per run) the Tukey-adjusted gap keeps its
    5 % false alarms; the floor's sd is of one difference of two single runs."""
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(300):
        zs = 30 + rng.normal(0, 1 / math.sqrt(2), (4, 3))   # one run's A_ZS has sd = (sd of a difference) / √2
        r = judge("pool", deep(**{e: [(20, z) for z in row] for e, row in zip(POOLS, zs)}), {"A_ZS": st.Noise(1.0, None, "given")})
        hits += r.low > 0
    assert hits / 300 < 0.06
    big = deep(**{e: [(20, 30 + 5 * (e == "fomo-pool-half") + 0.01 * s) for s in range(3)] for e in POOLS})
    assert judge("pool", big, {"A_ZS": st.Noise(0.2, None, "given")}).verdict == "confirmed"


def test_compute_scaling_is_a_difference_of_gains():
    one = {"fomo-ft-c025": gm_point(18), "fomo-ft-c6": gm_point(19), "fomo-ema-c025": gm_point(18), "fomo-ema-c6": gm_point(30)}
    r = judge("compute-scaling", deep(**{e: [p] for e, p in one.items()}),
              {"GM, gain of gains": fm.comparison_sd(None, "GM", 1.0, evals=4, runs=4)})
    assert r.effect == pytest.approx(11.0) and r.sigma_d == pytest.approx(math.sqrt(2))   # four evaluations: √(4/2) × 1
    assert r.verdict == "underpowered" and r.low > 0      # one run each: its interval clears 0, its MDE 3.96 > the effect
    four = ("fomo-ft-c025", "fomo-ft-c6", "fomo-ema-c025", "fomo-ema-c6")
    deep3 = deep(**{e: [gm_point(g + 0.1 * s) for s in range(3)] for e, g in zip(four, (18, 19, 18, 30))})
    deep3["fomo-ema-c6"] = {s: run([(10, 40), gm_point(30 + z)]) for s, z in enumerate((0.0, 0.2, -0.1))}
    r = judge("compute-scaling", deep3)                        # paired over the three seeds all four have
    assert r.verdict == "confirmed" and r.comparisons[0]["how"] == "paired by seed, n=3"


TABLE4 = {"locked-image": 0.26, "LNFit": 0.66, "BitFit": 0.66, "LoRA, r=4": 0.87, "full-ft": 1.0, "EWC": 1.01, "SI": 1.0}


def memory_runs(mult: dict) -> dict:
    names = ROWS["memory-order-tiny"].options["experiments"]
    return {names[k]: {0: run([(10, 40), (20, 20)], mult=v)} for k, v in mult.items()}


def test_memory_order_is_exact_confirmed_or_refuted():
    assert judge("memory-order-tiny", memory_runs(TABLE4)).verdict == "confirmed"       # ties allowed at full FT ≤ SI
    r = judge("memory-order-tiny", memory_runs({**TABLE4, "locked-image": 0.78}))    # our tiny model: locked-image above LNFit
    assert r.verdict == "refuted" and "2 links of the order broken" in r.notes[1] and r.effect == pytest.approx(-0.12)
    for broken in ({"BitFit": 0.9}, {"SI": 0.99}, {"LoRA, r=4": 1.0}):               # BitFit above LoRA, SI below FT, LoRA not below
        assert judge("memory-order-tiny", memory_runs({**TABLE4, **broken})).verdict == "refuted"
    r = judge("memory-order-tiny", memory_runs({k: v for k, v in TABLE4.items() if k != "SI"}))
    assert r.verdict == "not testable" and "SI" in r.notes[0]


def test_memory_order_at_the_papers_scale_reads_the_benchmark_file():
    from vlcp.report import project_root
    from vlcp.utils import read_json

    bench = read_json(project_root() / ROWS["memory-order-paper-scale"].options["from"])
    r = judge("memory-order-paper-scale", {})
    want = "confirmed" if fm.multipliers(ROWS["memory-order-paper-scale"], {})[0]["locked-image"] < 0.5 else "refuted"
    assert r.verdict == want and bench["model"] in r.notes[0]


def test_floors_join_test_set_noise_and_the_seed_spread_by_comparison_sds_rule():
    ref = run([(10, 40), (30, 20)])
    sub = {"fomo-ft": {s: run([(10, 40), (30 + s, 20 + s)]) for s in range(3)}}
    spread = fm.subset_spread(sub)
    got, test = fm.floors(ref, spread), fm.noise_sd(ref)
    assert set(got) == set(FLOOR_NAMES)
    assert got["GM"] == fm.comparison_sd(spread, "GM", test["GM"]) and got["GM"].dof == 2
    assert got["GM, gain of gains"].sd == pytest.approx(fm.comparison_sd(spread, "GM", test["GM"], evals=4, runs=4).sd)
    assert got["early gain"].sd == pytest.approx(math.sqrt(fm.noise_sd(ref, ref["zero_shot"])["A_ZS"] ** 2
                                                           + spread["metrics"][fm.EARLY]["difference_spread"] ** 2 / 2))
    plain = fm.floors(ref, None)
    assert plain["A_KA"].dof is None and plain["A_KA"].source == fm.TEST_ONLY


def write_runs(root, points: dict, seeds=(0,)):
    """Runs of the study's layout under `root`: seed 0 in methods/, the others in spread-seed<S>/."""
    from vlcp.utils import write_json

    for e, p in points.items():
        for s in seeds:
            where = root / "methods" if s == 0 else root / f"spread-seed{s}"
            write_json(where / e / f"seed{s}" / "results.json", run([(10, 40), (p[0] + 0.3 * s * (e == "fomo-ft"), p[1] + s)],
                                                                   datasets=BIG))


BIG = {"a": {"role": "adaptation", "n": 10**5}, "r": {"role": "retention", "n": 10**5}}


def test_the_hook_pairs_the_subsets_seeds_and_keeps_the_rest_exploratory(tmp_path):
    from vlcp.config import load_params
    from vlcp.report.ledger import study_ledger

    params = load_params("params.yaml")
    write_runs(tmp_path, {"fomo-ft": (30, 20), "fomo-ema-merge": (27, 30)}, seeds=(0, 1, 2, 3, 4))
    write_runs(tmp_path, {"fomo-lora4": (20, 35), "fomo-locked-image": (25, 25)})
    rows = {r.claim_id: r for r in study_ledger(STUDY, params, tmp_path)}
    assert list(rows) == [r.id for r in STUDY.claims.rows]
    main = rows["merge-vs-ft"]
    assert main.seeds == 5 and main.comparisons[0]["how"] == "paired by seed, n=5"
    assert rows["peft"].verdict == "not testable" and rows["si"].verdict == "not testable"
    mb = rows["merging-best"]
    assert mb.seeds == 1 and "fomo-ft, fomo-ema-merge at seeds 0, 1, 2, 3, 4" in mb.comparisons[0]["how"]
    assert all(r.verdict in ("underpowered", "inconclusive", "not testable") for k, r in rows.items() if k != "merge-vs-ft"
               and not k.startswith("memory-order"))


def test_ledger_runs_join_the_subsets_seeds_and_the_long_profiles(tmp_path):
    from vlcp.utils import write_json

    block = {"seed": 0, "studies": {"methods": ["fomo-ft", "fomo-lora4"]}, "spread": {"experiments": ["fomo-ft"], "seeds": [1]},
             "long": {"runs": str(tmp_path / "long"), "seeds": [1, 2], "studies": {"table5": ["fomo-isolated"]}}}
    write_runs(tmp_path / "runs", {"fomo-ft": (30, 20)}, seeds=(0, 1))
    write_runs(tmp_path / "runs", {"fomo-lora4": (20, 30)})
    for s in (1, 2):
        write_json(tmp_path / "long" / f"seed{s}" / "fomo-lora4" / f"seed{s}" / "results.json", run([(10, 40), (20, 30)]))
    write_json(tmp_path / "long" / "table5" / "fomo-isolated" / "seed0" / "results.json", run([(10, 40), (20, 30)]))
    plain = fm.ledger_runs(tmp_path / "runs", block)
    assert {e: sorted(v) for e, v in plain.items()} == {"fomo-ft": [0, 1], "fomo-lora4": [0]}
    long = fm.ledger_runs(tmp_path / "runs", block, long=True)
    assert {e: sorted(v) for e, v in long.items()} == {"fomo-ft": [0, 1], "fomo-lora4": [0, 1, 2], "fomo-isolated": [0]}


def test_notebook_claims_cell_calls_the_studys_ledger_hook(tmp_path):
    """The notebook's claims cell, run in plain Python on fake runs: it writes the hook's rows (the ones
    tests/test_pins.py pins), and computes no verdict of its own."""
    import json
    from pathlib import Path

    from vlcp.config import load_params
    from vlcp.report.ledger import ledger_frame, ledger_json, ledger_style, provenance
    from vlcp.utils import write_json

    nb = json.loads((Path(__file__).parents[1] / "notebooks" / "fomo_figures.ipynb").read_text())
    cell = next("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code" and "ledger_json(" in "".join(c["source"]))
    assert "fm.ledger(fomo_study, params, runs_dir, long)" in cell
    assert not any(f in cell for f in ("confirmed", "greater(", "evaluate(", "write_claims"))
    write_runs(tmp_path / "runs", {"fomo-ft": (30, 20), "fomo-ema-merge": (27, 30)}, seeds=(0, 1, 2))
    ns = {"report": True, "fm": fm, "fomo_study": STUDY, "params": load_params("params.yaml"), "runs_dir": tmp_path / "runs",
          "long": False, "stale": None, "ledger_frame": ledger_frame, "ledger_json": ledger_json, "ledger_style": ledger_style,
          "write_json": write_json, "Path": Path, "reports_dir": str(tmp_path), "display": lambda *a, **k: None,
          "Markdown": str, "study_power_table": None, "provenance": provenance}
    exec(cell, ns)
    out = json.loads((tmp_path / "fomo_figures_claims.json").read_text())
    assert [c["claim_id"] for c in out["claims"]] == [r.id for r in STUDY.claims.rows]
    assert out["claims"][0]["seeds"] == 3


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
        assert "fomo-ft, fomo-ema-merge at seeds 0, 1, 2" in ns["spread"]["source"] and ns["nt"].loc["GM", "dof"] == 4
        assert fm.table_runs(ns["runs"], ns["subset"], {"fomo-ft": "fomo-ft"})["fomo-ft"][1]["trajectory"][-1]["GM"] == 21
    else:
        assert ns["spread"] is None and "fomo-ema-merge seed 2" in ns["subset_missing"] and ns["nt"]["seed spread"].isna().all()


# ------------------------------------------------------------------ the seed subset's spread (issue 31)
def subset_of(gms: dict[str, list[float]]) -> dict[str, dict[int, dict]]:
    """{experiment: {seed: a run ending at A_KA = A_ZS = GM}} from per-seed endpoint GMs."""
    return {e: {s: run([(10, 40), gm_point(g)]) for s, g in enumerate(v)} for e, v in gms.items()}


def test_subset_spread_pools_the_seed_std_of_every_metric_the_ledger_compares():
    sub = subset_of({"fomo-ft": [20, 22, 24], "fomo-ema-merge": [30, 31]})
    spread = fm.subset_spread(sub)
    assert set(spread["metrics"]) == {"A_KA", "A_ZS", "GM", fm.AREA, fm.EARLY}
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
    sd = fm.comparison_sd(None, "GM", 1.0)
    assert sd.sd == 1.0 and sd.dof is None and sd.source == fm.TEST_ONLY


def test_comparison_sd_joins_test_noise_and_seed_spread_per_comparison():
    spread = {"metrics": {"A_ZS": {"difference_spread": 2.0, "dof": 4}}, "source": "seed spread of X at seeds 0, 1, 2"}
    one = fm.comparison_sd(spread, "A_ZS", 1.0)
    assert one.sd == pytest.approx(math.sqrt(1 + 4)) and one.dof == 4
    assert one.source.startswith("test-set noise + seed spread of X at seeds 0, 1, 2")
    assert fm.comparison_sd(spread, "A_ZS", 1.0, evals=4, runs=2).sd == pytest.approx(math.sqrt(2 + 4))   # two forgettings
    assert fm.comparison_sd(spread, "A_ZS", 1.0, evals=4, runs=4).sd == pytest.approx(math.sqrt(2 + 8))   # two gains
    assert fm.comparison_sd(spread, "A_ZS", 0.5, runs=1).sd == pytest.approx(math.sqrt(0.25 + 2))  # a run vs its θ0
    gm = fm.comparison_sd(spread, "GM", 0.5)     # a metric the subset has no spread of: test noise, said so
    assert gm.sd == 0.5 and gm.dof is None and "no spread of GM" in gm.source


def test_tukey_q_grows_as_the_dof_shrink():
    assert fm.tukey_q(0.95, 4, 4) > fm.tukey_q(0.95, 4, 30) > fm.tukey_q(0.95, 4) == pytest.approx(3.63, abs=0.01)


def test_table_runs_pass_every_seed_of_the_subset():
    runs = ends(**{"fomo-ft": (30, 20), "fomo-ema-merge": (27, 30)})
    sub = subset_of({"fomo-ft": [20, 21, 22]})
    got = fm.table_runs(runs, sub, {e: e for e in ["fomo-ft", "fomo-ema-merge", "fomo-zs-merge"]})
    assert [len(v) for v in got.values()] == [3, 1] and got["fomo-ft"][2] is sub["fomo-ft"][2]
    assert got["fomo-ema-merge"][0] is runs["fomo-ema-merge"]


def test_noise_table_shows_both_parts():
    ref, spread = run([(10, 40), (30, 20)]), fm.subset_spread(subset_of({"fomo-ft": [18, 20, 22]}))
    t, test = fm.noise_table(ref, spread), fm.noise_sd(ref)
    assert list(t.index) == ["A_KA", "A_ZS", "GM", fm.AREA] and t.loc[fm.AREA, "test-set sd"] == test["GM"]
    assert t.loc["GM", "sd of a difference"] == pytest.approx(math.sqrt(test["GM"] ** 2 + 8))
    assert t.loc["GM", "dof"] == 2 and t.loc["A_KA", "seed spread"] == pytest.approx(2 * math.sqrt(2))
    assert np.isnan(fm.noise_table(ref, None).loc["GM", "seed spread"])


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

    from vlcp.report.paper import paper_table
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
