"""The claims ledger's verdict functions (vlcp/report/claims.py): each returns every verdict it can
return, on data made for it; equivalence needs the interval inside the margin, not just no difference."""
import math

import numpy as np
import pytest
from scipy import stats

from vlcp.report.claims import (VERDICTS, Claim, claim_from, combine, effect, equivalent_verdict,
                                greater_verdict, not_testable, target_verdict)


def test_paired_effect_is_the_t_interval_of_the_per_seed_differences():
    a, b = [10.0, 12.0, 11.0], [9.0, 10.0, 10.5]
    e = effect(a, b)
    d = np.subtract(a, b)
    half = 4.302652729911275 * d.std(ddof=1) / math.sqrt(3)          # t(0.975, 2)
    assert e.n == 3 and "paired" in e.how
    assert e.diff == pytest.approx(d.mean()) and e.low == pytest.approx(d.mean() - half)
    assert e.high == pytest.approx(d.mean() + half)


def test_one_run_each_needs_a_measured_spread():
    assert effect([3.0], [1.0]).low == -math.inf                       # no spread: nothing can be confirmed
    e = effect([3.0], [1.0], sd=0.5, sd_source="seed subset")
    assert e.low == pytest.approx(2 - 1.959964 * 0.5, abs=1e-5) and "seed subset" in e.how


def test_a_measured_floor_widens_a_too_tight_paired_interval():
    tight = effect([5.0, 5.0, 5.0], [4.0, 4.0, 4.0])
    assert tight.low == tight.high == 1.0
    floored = effect([5.0, 5.0, 5.0], [4.0, 4.0, 4.0], sd=1.0)
    assert floored.low < 0 < 1 < floored.high


@pytest.mark.parametrize("a,b,verdict", [
    ([5.0, 5.2, 4.9], [1.0, 1.1, 0.9], "confirmed"),
    ([1.0, 1.1, 0.9], [5.0, 5.2, 4.9], "not confirmed"),
    ([1.0, 3.0, 0.5], [1.0, 1.0, 1.0], "inconclusive"),
])
def test_greater_returns_each_verdict(a, b, verdict):
    assert greater_verdict(effect(a, b)) == verdict


@pytest.mark.parametrize("a,b,verdict", [
    ([1.00, 1.05, 0.95], [1.02, 1.00, 0.98], "confirmed"),      # interval well inside ±0.5
    ([3.0, 3.1, 2.9], [1.0, 1.0, 1.0], "not confirmed"),         # interval wholly beyond the margin
    ([1.0, 1.6, 0.6], [1.0, 1.0, 1.0], "inconclusive"),          # within the noise, not inside the margin
])
def test_equivalence_returns_each_verdict(a, b, verdict):
    got, e = equivalent_verdict(a, b, margin=0.5)
    assert got == verdict, e


def test_no_difference_within_the_noise_is_not_equivalence():
    """The defect the ledgers had: a gap inside a wide noise was 'confirmed' equivalent."""
    got, e = equivalent_verdict([1.0], [1.2], margin=0.5, sd=1.0)
    assert got == "inconclusive" and e.low < -0.5 and e.high > 0.5
    with pytest.raises(ValueError, match="margin"):
        equivalent_verdict([1.0], [1.0], margin=0.0)


def test_equivalence_under_a_true_gap_of_two_standard_errors_is_rarely_confirmed():
    rng = np.random.default_rng(0)
    sd, margin, n = 1.0, 1.0, 3
    confirmed = 0
    for _ in range(400):
        a = rng.normal(2 * sd / math.sqrt(n), sd, n)   # true gap: two standard errors of the mean difference
        b = np.zeros(n)
        confirmed += equivalent_verdict(a, b, margin=margin, sd=sd)[0] == "confirmed"
    assert confirmed / 400 < 0.05


def test_combine_and_not_testable():
    assert combine(["confirmed", "confirmed"]) == "confirmed"
    assert combine(["confirmed", "not confirmed", "inconclusive"]) == "not confirmed"
    assert combine(["confirmed", "not testable"]) == "inconclusive"
    assert combine(["not testable"]) == "not testable"
    c = not_testable("CTP costs 1.18x SeqF", "our tiny ALBEF's extra forwards alone cost more")
    assert c.verdict == "not testable" and set(VERDICTS) == {"confirmed", "refuted", "underpowered", "inconclusive",
                                                                   "not confirmed", "not testable"}
    with pytest.raises(ValueError, match="verdict"):
        Claim("x", "probably", "")


@pytest.mark.parametrize("median,worst,at_least,verdict", [
    (1.02, 1.04, False, "confirmed"),       # a cost ratio: every repeat within 1.05
    (1.02, 1.08, False, "inconclusive"),    # the median is, the slowest repeat is not
    (1.07, 1.09, False, "not confirmed"),
    (1.7, 1.65, True, "confirmed"),         # a speed-up ratio ≥ 1.6 (DDP): every repeat reaches it
    (1.62, 1.5, True, "inconclusive"),
    (1.55, 1.48, True, "not confirmed"),    # the DDP measurement of 2026-11 (1.55×, range 1.48–1.58)
])
def test_target_returns_each_verdict_in_both_directions(median, worst, at_least, verdict):
    goal = 1.6 if at_least else 1.05
    assert target_verdict(median, worst, goal, at_least=at_least) == verdict


def test_claim_from_carries_the_interval():
    e = effect([5.0, 5.2, 4.9], [1.0, 1.1, 0.9])
    c = claim_from("a > b", greater_verdict(e), e, "Rm")
    assert c.verdict == "confirmed" and c.effect == pytest.approx(e.diff) and c.low == e.low and c.seeds == 3
    assert "effect +" in c.evidence


def test_index_counts_every_verdict_and_shows_the_interval(tmp_path):
    from vlcp.report.claims import write_claims
    from vlcp.report.index import write_index

    e = effect([5.0, 5.2, 4.9], [1.0, 1.1, 0.9])
    from vlcp.report.power import StudyPower

    power = StudyPower("Rm", headroom=6.0, sigma_d=0.5, tasks_teaching=6, tasks=9, seeds=3)
    write_claims(tmp_path / "a_claims.json", "Paper A", [claim_from("a > b", "confirmed", e, source="§5.2"),
                                                         not_testable("1.18x", "FLOPs", "Table 1")], power=power)
    write_claims(tmp_path / "b_claims.json", "Paper B", [Claim("c", "not confirmed", "x 1 vs 2")])
    (tmp_path / "a.html").write_text("<html></html>")
    page = write_index(tmp_path).read_text()
    assert ("<tr><td>Paper A</td><td>1</td><td>0</td><td>0</td><td>0</td><td>0</td><td>1</td><td>2</td>"
            "<td>12.0</td><td>6/9</td><td>3</td></tr>") in page
    assert ("<tr><td>Paper B</td><td>0</td><td>0</td><td>0</td><td>0</td><td>1</td><td>0</td><td>1</td>"
            "<td></td><td></td><td></td></tr>") in page
    assert f"{e.diff:+.2f} [{e.low:+.2f}, {e.high:+.2f}]" in page and "§5.2" in page and "not testable" in page
    assert "href='a.html'" in page and "class=\"sortable\"" in page


def test_seed_spread_pools_by_degrees_of_freedom_and_skips_single_seeds():
    from vlcp.report.claims import seed_spread
    sp = seed_spread({"AR": {"a": [1.0, 3.0], "b": [0.0, 2.0, 4.0], "c": [5.0]}, "F": {"a": [1.0]}}, "a, b, c")
    m = sp["metrics"]["AR"]
    # variances 2 (1 dof) and 4 (2 dof): pooled = sqrt((1*2 + 2*4) / 3)
    assert m["dof"] == 3 and m["pooled_std"] == pytest.approx(math.sqrt(10 / 3))
    assert m["difference_spread"] == pytest.approx(math.sqrt(2) * math.sqrt(10 / 3))
    assert set(m["std_per_experiment"]) == {"a", "b"} and "F" not in sp["metrics"] and "a, b, c" in sp["source"]


def test_block_spread_pools_the_residual_of_experiment_plus_seed_and_drops_the_shared_seed_effect():
    from vlcp.report.claims import block_spread, seed_spread
    y = {"a": [11.0, 0.0, 5.0], "b": [13.0, 6.0, 9.0]}   # two experiments at three seeds
    sp = block_spread(y)
    resid = np.array(y["a"]) - np.array(y["b"])           # with two experiments: half the paired difference's deviations
    assert sp["dof"] == 2 and sp["experiments"] == 2 and sp["seeds"] == 3
    assert sp["difference_spread"] == pytest.approx(resid.std(ddof=1))   # √2 σ = the sd of the paired differences
    # the same as a least-squares fit with experiment and seed dummies (an independent reference)
    rng = np.random.default_rng(0)
    vals = {e: list(rng.normal(size=4) + 10 * np.arange(4) + k) for k, e in enumerate("abcde")}   # a big shared seed effect
    x = np.array([[float(i == k) for k in range(5)] + [float(j == s) for s in range(1, 4)] for i in range(5) for j in range(4)])
    target = np.concatenate(list(vals.values()))
    rss = ((target - x @ np.linalg.lstsq(x, target, rcond=None)[0]) ** 2).sum()
    got = block_spread(vals)
    assert got["dof"] == 12 and got["residual_std"] == pytest.approx(math.sqrt(rss / 12))
    # seed_spread counts the shared seed effect (10 a seed) as noise; the blocks do not
    assert seed_spread({"m": vals}, "a-e")["metrics"]["m"]["pooled_std"] > 5 * got["residual_std"]
    with pytest.raises(ValueError, match="a: 3, b: 2"):
        block_spread({"a": [1.0, 2.0, 3.0], "b": [1.0, 2.0]})
    with pytest.raises(ValueError, match="≥ 2 experiments"):
        block_spread({"a": [1.0, 2.0]})


def test_blocked_noise_takes_the_largest_block_and_needs_three_experiments():
    from vlcp.report.claims import blocked_noise, block_spread
    vals = {"a": {0: 1.0, 1: 2.0, 2: 4.0}, "b": {0: 2.0, 1: 2.5, 2: 5.5}, "c": {0: 0.0, 1: 1.0, 2: 1.5},
            "d": {0: 3.0, 1: 3.5}, "e": {0: 9.0}}
    got = blocked_noise(vals, "t1")
    # candidate blocks: seeds (0, 1, 2) with a, b, c: 2 × 2 = 4 dof; seeds (0, 1) with a-d: 3 × 1 = 3 dof
    ref = block_spread({e: [vals[e][s] for s in (0, 1, 2)] for e in "abc"})
    assert got.dof == 4 and got.sd == pytest.approx(ref["difference_spread"])
    assert "t1: 3 experiments × seeds 0, 1, 2" in got.source
    assert blocked_noise({"a": {0: 1.0, 1: 2.0}, "b": {0: 1.5, 1: 2.0}}) is None      # a pair: nothing to pool
    assert blocked_noise({"a": {0: 1.0}, "b": {0: 1.5}, "c": {0: 2.0}}) is None      # one seed: no block


def test_effect_with_a_block_reads_the_pools_dof_unless_the_pair_is_noisier_than_the_pool():
    from vlcp.report.claims import Noise, pooled_fits
    a, b = [3.0, 5.0, 4.0], [1.0, 2.0, 2.5]          # differences 2, 3, 1.5: own sd 0.764 on 2 dof
    own = float(np.std(np.subtract(a, b), ddof=1))
    plain = effect(a, b)
    # a block whose sd is larger than the pair's: that sd, on the block's 28 dof (t 2.048 against 4.303)
    blk = Noise(1.0, "pool", 28)
    e = effect(a, b, block=blk)
    assert e.sd == pytest.approx(1.0) and e.dof == 28 and "seeds as blocks" in e.how
    assert e.high - e.diff == pytest.approx(stats.t.ppf(0.975, 28) * 1.0 / math.sqrt(3))
    assert e.high - e.low < plain.high - plain.low
    # a block whose sd is smaller, within the F test: the pair's own sd, still on the block's dof
    small = Noise(0.6, "pool", 28)
    assert pooled_fits(own, 2, small)
    e = effect(a, b, block=small)
    assert e.sd == pytest.approx(own) and e.dof == 28
    # a pool far below the pair's own spread (F test rejects): the pair's own paired t, as without a block
    tiny = Noise(0.2, "pool", 28)
    assert (own / 0.2) ** 2 > stats.f.ppf(0.95, 2, 28) and not pooled_fits(own, 2, tiny)
    e = effect(a, b, block=tiny)
    assert (e.low, e.high, e.dof, e.paired) == (plain.low, plain.high, 2, True) and "its own spread" in e.how
    # one run each: the block plays no part
    assert effect([1.0], [0.0], sd=1.0, block=blk) == effect([1.0], [0.0], sd=1.0)
    # the MDE of a blocked comparison: the block's dof (Student's t), far below the pair's own at 2 dof
    from vlcp.report import power as pw
    assert effect(a, b, block=blk).mde() == pytest.approx(pw.mde(1.0, 3, dof=28, paired=False))
    assert effect(a, b, block=blk).mde() < pw.mde(1.0, 3)


def test_powered_passes_the_block_to_its_paired_comparisons():
    from vlcp.report.claims import Noise, powered
    a, b = [3.0, 5.0, 4.0], [1.0, 2.0, 2.5]
    without = powered("a > b", [(a, b)], 4.0, paper="p")
    with_block = powered("a > b", [(a, b)], 4.0, paper="p", block=Noise(1.0, "pool", 28))
    assert with_block.mde < without.mde and with_block.low > without.low
    assert "seeds as blocks" in with_block.evidence


def test_effect_uses_students_t_when_the_sd_has_few_degrees_of_freedom():
    wide = effect([1.0], [0.0], sd=1.0, sd_dof=4)
    narrow = effect([1.0], [0.0], sd=1.0)
    assert wide.high - wide.low == pytest.approx(2 * 2.776, abs=1e-3)    # t(0.975, 4)
    assert narrow.high - narrow.low == pytest.approx(2 * 1.960, abs=1e-3)


def test_equivalence_passes_the_sds_degrees_of_freedom_on():
    # |diff| 0.5, sd 0.5, margin 1.5: the 90 % normal interval ±0.82 fits, Student's t on 2 dof (±1.46) does not
    assert equivalent_verdict([0.5], [0.0], 1.5, sd=0.5)[0] == "confirmed"
    assert equivalent_verdict([0.5], [0.0], 1.5, sd=0.5, sd_dof=2)[0] == "inconclusive"


def test_one_run_against_a_mean_of_three_uses_the_variance_of_that_difference():
    # sd of a single-run difference 1 (σ = 1/√2): mean of 3 minus one run has sd √((1/3 + 1) / 2)
    e = effect([1.0, 2.0, 3.0], [0.0], sd=1.0)
    assert (e.high - e.low) / 2 == pytest.approx(1.95996 * math.sqrt((1 / 3 + 1) / 2), rel=1e-4)


def test_ledger_style_colours_each_verdict_and_hides_the_index():
    from vlcp.report.claims import Claim, claims_frame, ledger_style

    html = ledger_style(claims_frame([Claim("a", "confirmed", "e"), Claim("b", "refuted", "e"),
                                      Claim("c", "underpowered", "e")])).to_html()
    assert "color:#1a7f37" in html.replace(" ", "") and "color:#cf222e" in html.replace(" ", "")
    assert "color:#6e7781" in html.replace(" ", "") and 'class="row_heading' not in html


def test_judge_shows_the_comparison_that_refuted_the_row():
    from vlcp.report.claims import Effect, judge

    wide = Effect(1.0, -3.0, 5.0, 3, "paired", 2.0, 2, True)          # cannot refute its +0.5
    tight = Effect(0.2, 0.1, 0.3, 3, "paired", 0.05, 2, True)         # excludes its +2.0
    c = judge("c", [wide, tight], [wide, tight], [0.5, 2.0], paper="p", labels=["a", "b"])
    assert c.verdict == "refuted" and c.effect == 0.2 and c.low == 0.1
    mixed = judge("c", [wide, tight], [wide, tight], [0.5, 2.0], paper="p", labels=["a", "b"], exploratory=[True, False])
    assert mixed.verdict == "refuted" and "refuted by b, at the study's depth" in mixed.evidence
    below = judge("c", [wide, tight], [wide, tight], [0.5, 2.0], paper="p", labels=["a", "b"], exploratory=[False, True])
    assert below.verdict in ("inconclusive", "underpowered")          # the refuting comparison is exploratory
