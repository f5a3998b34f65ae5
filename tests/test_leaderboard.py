"""The leaderboard's ranking rules: Holm's step-down by hand, the paired test against scipy's, and
the rules' error rates by simulation at fixed seeds (seed effects shared by every method, as a
benchmark draw is)."""
import numpy as np
import pytest
from scipy import stats as sps

from vlcp.report import leaderboard as lb


def draw(rng, means, seeds=5, seed_sd=5.0, run_sd=1.0):
    """{method: {seed: score}}: each seed shifts every method alike (the benchmark draw), plus each
    run's own noise."""
    shift = rng.normal(0, seed_sd, seeds)
    return {f"m{i}": {s: mu + shift[s] + rng.normal(0, run_sd) for s in range(seeds)} for i, mu in enumerate(means)}


def test_holm_steps_down_by_hand():
    assert lb.holm({"a": 0.01, "b": 0.04, "c": 0.03}) == {"a"}            # 0.03 > 0.05 / 2 stops it
    assert lb.holm({"a": 0.01, "b": 0.02, "c": 0.04}) == {"a", "b", "c"}  # ≤ 0.05/3, 0.05/2, 0.05
    assert lb.holm({"a": 0.02, "b": None}) == {"a"}                      # None counts in m = 2: 0.02 ≤ 0.025
    assert lb.holm({"a": 0.03, "b": None}) == set()


def test_the_paired_test_is_scipys():
    rng = np.random.default_rng(0)
    a, b = rng.normal(1, 1, 6), rng.normal(0, 1, 6)
    ref = sps.ttest_rel(a, b)
    assert lb.paired_p(dict(enumerate(a)), dict(enumerate(b))) == pytest.approx(ref.pvalue)
    assert lb.paired_p(dict(enumerate(a)), dict(enumerate(b)), "greater") == pytest.approx(
        sps.ttest_rel(a, b, alternative="greater").pvalue)


def test_no_noise_estimate_of_zero_or_from_one_dof_decides():
    same = {"a": {0: 2.0, 1: 3.0, 2: 4.0}, "b": {0: 1.0, 1: 2.0, 2: 3.0}}   # a − b is exactly 1 at every seed
    assert lb.paired_p(same["a"], same["b"]) is None
    assert lb.rank_intervals(same) == {"a": (1, 2), "b": (1, 2)}
    two = {"a": {0: 9.0, 1: 9.5}, "b": {0: 1.0, 1: 1.2}}                    # two seeds: one dof
    assert lb.paired_p(two["a"], two["b"]) is None and lb.tied_with_best(two)[1] == ["a", "b"]


def test_at_no_effect_the_family_wise_error_is_at_most_five_percent():
    rng = np.random.default_rng(76)
    sims, split, excluded = 600, 0, 0
    for _ in range(sims):
        s = draw(rng, [0.0] * 8)
        split += any(r != (1, 8) for r in lb.rank_intervals(s).values())
        excluded += len(lb.tied_with_best(s)[1]) < 8
    assert split / sims <= 0.05 + 0.02 and excluded / sims <= 0.05 + 0.02


def test_true_orders_are_found_and_never_reversed():
    rng = np.random.default_rng(77)
    means = [0.0, 0.0, 4.0, 8.0]       # 2.8 σ_d apart (σ_d = √2 × the run sd)
    sims, reversed_, found, best_kept = 400, 0, 0, 0
    for _ in range(sims):
        s = draw(rng, means)
        r = lb.rank_intervals(s)
        reversed_ += r["m0"][1] < r["m3"][0] or r["m2"][1] < r["m3"][0] or r["m0"][1] < r["m1"][0] or r["m1"][1] < r["m0"][0]   # a false order
        found += r["m3"] == (1, 1)
        best_kept += "m3" in lb.tied_with_best(s)[1]
    assert reversed_ / sims <= 0.05 and found / sims >= 0.8 and best_kept / sims >= 0.95


def test_a_shared_benchmark_draw_does_not_widen_paired_comparisons():
    quiet, loud = draw(np.random.default_rng(5), [0, 3], seed_sd=0.0), draw(np.random.default_rng(5), [0, 3], seed_sd=50.0)
    vq, vl = lb.against(quiet, "m0")["m1"], lb.against(loud, "m0")["m1"]
    assert vq.high - vq.low == pytest.approx(vl.high - vl.low)
    wide = lb.standings(loud).set_index("method")
    assert (wide["high"] - wide["low"]).min() > 10 * (vl.high - vl.low)    # a method's own mean carries the draw


def test_the_table_ranks_best_first_with_its_group_and_the_baseline_column():
    s = draw(np.random.default_rng(3), [0.0, 0.2, 8.0])
    t = lb.table(s, "m0")
    assert list(t["method"])[0] == "m2" and t.loc[0, "rank"] == "1" and bool(t.loc[0, "tied with best"])
    assert set(t.loc[~t["tied with best"], "method"]) == {"m0", "m1"}
    assert t.set_index("method").loc["m0", "vs m0"] == "—"


def test_the_method_catalogue_names_every_registered_method_and_why_one_does_not_run():
    import yaml
    from vlcp.registry import METHODS
    from vlcp.report.paper import studies_root

    cat = yaml.safe_load((studies_root() / "leaderboard" / "methods.yaml").read_text())
    one, two, why = set(cat["track1"]), set(cat["track2"]), cat["not_on_track1"]
    assert len(cat["track1"]) == len(one) and len(cat["track2"]) == len(two)
    assert one | set(why) == set(METHODS) and not one & set(why), "each method on track 1 or saying why not"
    assert two <= set(METHODS) and all(isinstance(w, str) and w for w in why.values())
