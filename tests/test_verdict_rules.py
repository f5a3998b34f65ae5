"""The engine's verdict rules (vlcp/report/stats.py, ledger.py) by their operating characteristics,
simulated at fixed seeds, and issue 74's defects 1-7, 9 and 10 each pinned as a difference from the
old rules (tests/legacy_claims.py), which the tests call to show the old behaviour."""
import math

import numpy as np
import pytest

import legacy_claims as old   # the rules of 51cbcae, to show each defect on them
from vlcp.report import ledger as L
from vlcp.report import power as pw
from vlcp.report import stats as st
from vlcp.report.stats import Noise

R = 4000                                    # replicates per simulated design
KNOWN = L.Scale(1.0, 1.0, "fixed")          # a resolved scale: the scaled effect is the paper's effect


def seeds(row) -> dict:
    return dict(enumerate(row))


def rate(rows, verdict: str) -> float:
    return sum(r.verdict == verdict for r in rows) / len(rows)


def rows_of(a, b, paper_effect=1.0, scale=KNOWN, floors=None, depth=2, extra=()) -> list:
    """`L.greater` per replicate: a, b of shape (R, n) (or per-replicate dicts), plus fixed `extra`
    comparisons beside each."""
    out = []
    for i in range(len(a)):
        c = L.Comparison("a − b", seeds(a[i]), seeds(b[i]), paper_effect, scale,
                         None if floors is None else Noise(floors[i], FLOOR_DOF))
        out.append(L.greater("sim", [c, *extra], depth=depth))
    return out


FLOOR_DOF = 4
STRONG = [L.Comparison(f"strong {i}", seeds([10.0, 10.5, 9.5]), seeds([0.0, 0.0, 0.0]), 1.0, KNOWN) for i in (1, 2)]


def block(rng, n_rep, experiments, n, sd_of, shift=0.0):
    """Runs of `experiments` at `n` seeds: experiment + seed (a large shared effect) + residual with
    sd `sd_of` per experiment; experiment 0 shifted by `shift`."""
    y = rng.normal(size=(n_rep, experiments, n)) * np.asarray(sd_of)[None, :, None] + 5 * rng.normal(size=(n_rep, 1, n))
    y[:, 0] += shift
    return y


# ---- operating characteristics ------------------------------------------------------------------

@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("design", ["paired", "block", "single run with a floor"])
def test_false_confirm_at_no_effect_is_at_most_3_percent(design, k):
    """At no effect, least favourably for k = 3 (the other two comparisons far above 0)."""
    rng = np.random.default_rng(10 + k)
    extra = STRONG if k == 3 else ()
    if design == "paired":
        rows = rows_of(rng.normal(size=(R, 3)).tolist(), np.zeros((R, 3)).tolist(), extra=extra)
    elif design == "block":
        y = block(rng, R, 5, 3, np.ones(5)).tolist()
        rows = rows_of([r[0] for r in y], [r[1] for r in y], extra=extra)
    else:   # one run each, the floor estimated elsewhere on FLOOR_DOF dof; single runs are the depth
        floors = np.sqrt(rng.chisquare(FLOOR_DOF, R) / FLOOR_DOF)
        rows = rows_of(rng.normal(size=(R, 1)).tolist(), np.zeros((R, 1)).tolist(), floors=floors, depth=1,
                       extra=extra)
    assert rate(rows, "confirmed") <= 0.03


@pytest.mark.parametrize("design,n", [("paired", 3), ("paired", 5), ("block of 5", 3), ("single run", 1)])
def test_at_the_printed_mde_the_power_is_80_percent(design, n):
    rng = np.random.default_rng(n)
    sd = 1.3                                  # σ_d: the sd of one single-run difference
    if design == "single run":
        m = st.mde(sd, 1, FLOOR_DOF)
        floors = sd * np.sqrt(rng.chisquare(FLOOR_DOF, R) / FLOOR_DOF)
        rows = rows_of((m + sd * rng.normal(size=(R, 1))).tolist(), np.zeros((R, 1)).tolist(), paper_effect=m,
                       floors=floors, depth=1)
    elif design == "block of 5":
        m = st.mde(sd, n, n - 1)
        y = block(rng, R, 5, n, np.full(5, sd / math.sqrt(2)), shift=m).tolist()
        rows = rows_of([r[0] for r in y], [r[1] for r in y], paper_effect=m)
    else:
        m = st.mde(sd, n, n - 1)
        rows = rows_of((m + sd * rng.normal(size=(R, n))).tolist(), np.zeros((R, n)).tolist(), paper_effect=m)
    assert rate(rows, "confirmed") == pytest.approx(0.80, abs=0.03)
    assert rows[0].mde == pytest.approx(st.mde(rows[0].sigma_d, n, FLOOR_DOF if design == "single run" else n - 1))


def test_at_the_mde_for_three_comparisons_all_three_hold_80_percent_of_the_time():
    rng = np.random.default_rng(3)
    m, zeros = st.mde(1.0, 3, 2, k=3), seeds([0.0] * 3)
    d = (m + rng.normal(size=(R, 3, 3))).tolist()
    rows = [L.greater("sim", [L.Comparison(f"c{j}", seeds(d[i][j]), zeros, m, KNOWN) for j in range(3)])
            for i in range(R)]
    assert rate(rows, "confirmed") == pytest.approx(0.80, abs=0.03)


def test_a_row_at_its_scaled_effect_is_rarely_refuted():
    rng = np.random.default_rng(4)
    rows = rows_of((2.0 + rng.normal(size=(R, 3))).tolist(), np.zeros((R, 3)).tolist(), paper_effect=2.0)
    assert rate(rows, "refuted") <= 0.03


# ---- defect 2: a pair noisier than the pool -----------------------------------------------------

def test_a_pair_three_times_noisier_than_the_pool_keeps_false_confirm_at_most_3_percent():
    """Five experiments at three seeds; the pair's difference 3 × noisier than the others'. The old
    seeds-as-blocks noise (F test, else the larger sd on the pool's dof) confirms it far more often;
    so does the guard "the pool only when the pair's own sd ≤ the pool's" (vectorised, 100 000
    replicates), which is why a pair reads its own paired t."""
    rng = np.random.default_rng(2)
    sd_of = np.ones(5)
    sd_of[0] = math.sqrt(2 * 3.0 ** 2 - 1)    # sd(e0 − e1) = 3 × sd(e_i − e_j) of the others
    y = block(rng, R, 5, 3, sd_of)
    new = rows_of(y[:, 0].tolist(), y[:, 1].tolist())
    assert rate(new, "confirmed") <= 0.03
    confirmed = 0
    for r in y[:1000]:
        blk = old.blocked_noise({e: seeds(r[e]) for e in range(5)})
        confirmed += old.effect(r[0], r[1], block=blk).low > 0
    assert confirmed / 1000 > 0.045
    y = block(rng, 100_000, 5, 3, sd_of)
    d = y[:, 0] - y[:, 1]
    own = d.std(1, ddof=1)
    resid = y - y.mean(2, keepdims=True) - y.mean(1, keepdims=True) + y.mean((1, 2), keepdims=True)
    pool = np.sqrt(2 * (resid ** 2).sum((1, 2)) / 8)
    use = own <= pool
    low = d.mean(1) - np.where(use, st.quantile(0.95, 8) * pool, st.quantile(0.95, 2) * own) / math.sqrt(3)
    assert (low > 0).mean() > 0.03


# ---- defect 3: the spine's "ER forgets less" ----------------------------------------------------

def forgetting_runs(rng, n_rep, n, tasks=9):
    """Max-based forgetting of runs that learn each task and forget nothing: per-cell evaluation
    noise and a seed × task effect shared by the methods at a seed (as overview.ipynb reads them)."""
    def runs():
        m = 3 * rng.normal(size=(n_rep, 1, 1, tasks)) + 8 * np.tril(np.ones((tasks, tasks))) + shared \
            + rng.normal(size=(n_rep, n, tasks, tasks))
        return (m[..., :-1, :-1].max(-2) - m[..., -1, :-1]).mean(-1)
    shared = rng.normal(size=(n_rep, n, 1, tasks))
    return runs(), runs(), runs()   # SeqF, ER, JointT


@pytest.mark.parametrize("n", [2, 3, 5])
def test_er_forgets_less_is_rarely_refuted_when_neither_forgets(n):
    """H is measured on the same runs: SeqF's forgetting against JointT's (a run that does not forget
    has a max-based forgetting of its noise alone), and must exceed 2 σ_d of that pair. The old
    fallback (H = SeqF's forgetting, checked against nothing) refutes often, and so would SeqF's
    forgetting alone checked against its own seed sd: its noise floor is not noise around 0."""
    rng = np.random.default_rng(30 + n)
    seqf, er, jointt = (x.tolist() for x in forgetting_runs(rng, R, n))
    def refuted(lower):
        rows = [L.greater("ER forgets less", [L.Comparison("SeqF − ER", seeds(seqf[i]), seeds(er[i]), 0.5,
                                                           L.Scale.measured(seeds(seqf[i]), lower(i), 1.0))])
                for i in range(R)]
        return rate(rows, "refuted")
    assert refuted(lambda i: seeds(jointt[i])) <= 0.03
    if n >= 3:
        assert refuted(lambda i: None) > 0.05
        was = sum(old.power_verdict(e.low, e.high, 0.5 * np.mean(seqf[i]), 0.0) == "refuted"
                  for i in range(1000) for e in [old.effect(seqf[i], er[i])])
        assert was / 1000 > 0.08


# ---- defect 10: no zero and no one-dof noise decides -------------------------------------------

def test_no_zero_sd_and_no_one_dof_sd_decides_a_row():
    a, b = [5.1, 6.3], [4.0, 5.2]                     # equal gaps at two seeds: sd 0 (to rounding)
    was = old.powered("a > b", [(a, b)], 0.5, paper="p")
    assert was.verdict == "confirmed" and was.high - was.low < 1e-9
    assert pw.study_power("Rm", a, b, None, headroom_from="x").headroom_over_noise > 1e6
    row = L.greater("a > b", [L.Comparison("a − b", seeds(a), seeds(b), 0.5, KNOWN)])
    assert row.verdict == "underpowered" and row.needs.startswith("≥ 3 seeds") and row.mde is None
    three = L.greater("a > b", [L.Comparison("a − b", seeds([5.1, 6.3, 7.2]), seeds([4.0, 5.2, 6.1]), 0.5, KNOWN)])
    assert three.verdict == "underpowered" and "σ_d is 0" in three.needs
    assert st.ratio(1.1, Noise(0.0, 1)) is None and st.ratio(1.1, Noise(0.3, 1)) is None
    assert L.Scale.measured(seeds(a), seeds(b), 1.0).headroom is None
    rng = np.random.default_rng(5)                    # two seeds never decide, however large the effect
    rows = rows_of((3.0 + rng.normal(size=(500, 2))).tolist(), np.zeros((500, 2)).tolist())
    assert rate(rows, "confirmed") == rate(rows, "refuted") == 0.0


# ---- defects 1, 4-7, 9 as differences from the old rules ------------------------------------------

def test_defect_1_a_calibrated_headroom_must_resolve_and_is_never_a_known_zero():
    ucir, er = [23.0, 23.1, 22.9, 23.0], [20.0] * 4                # UCIR clearly better than ER
    was = old.powered_equivalence("only slightly better", ucir, er, old.Scale(-0.4, 16.3)(1.6), paper="p")
    assert was.verdict == "refuted"                                 # a margin of 0 refutes any difference
    scale = L.Scale.of(-0.4, Noise(0.5, 4), 16.3, "calibrated")
    assert scale.headroom is None and "within 2 σ_d" in scale.how
    row = L.equivalent("only slightly better", [L.Comparison("UCIR − ER", seeds(ucir), seeds(er), 1.6, scale)])
    assert row.verdict == "not expressible here" and row.scaled_effect is None   # H ≤ 0: no share of it to carry
    assert "a benchmark with a headroom for it" in row.needs
    a, b = [1.0, 1.3, 0.9], [1.0, 0.8, 0.4]                         # +0.33 [-0.38, +1.05]
    was = old.powered("a > b", [(a, b)], old.Scale(3.0, 10.0)(5.0), paper="p")   # H 3.0, never checked
    assert was.verdict == "refuted"
    scale = L.Scale.of(3.0, Noise(2.0, 2), 10.0, "calibrated")      # H/σ_d 1.5: not resolved
    row = L.greater("a > b", [L.Comparison("a − b", seeds(a), seeds(b), 5.0, scale)])
    assert row.verdict == "underpowered"
    below = L.greater("a > b", [L.Comparison("a − b", seeds([0.0, 0.1, -0.1]), seeds([2.0, 2.0, 2.1]), 5.0, scale)])
    up = L.greater("a > b", [L.Comparison("a − b", seeds([2.0, 2.1, 1.9]), seeds([0.0, 0.1, 0.0]), 5.0, scale)])
    assert (below.verdict, up.verdict) == ("refuted", "confirmed")  # an unknown scale: by the sign alone


def test_defect_4_the_single_run_floor_widens_only_the_single_run_comparisons():
    at, one = ([1.1, 1.0, 0.9], [1.0, 1.0, 1.0]), ([5.0], [0.0])     # at depth: 0.0 ± 0.36 (Bonferroni), target 3
    was = old.powered_at_depth("r", [at, one], [3.0, 3.0], old.Scale(1.0, 1.0), "p", sd=5.0)
    assert old.powered_at_depth("r", [at], [3.0], old.Scale(1.0, 1.0), "p").verdict == "refuted"
    assert was.verdict == "underpowered"                             # the floor sd 5 widened the 3-seed one too
    row = L.greater("r", [L.Comparison("at depth", seeds(at[0]), seeds(at[1]), 3.0, KNOWN),
                          L.Comparison("one seed", seeds(one[0]), seeds(one[1]), 3.0, KNOWN, Noise(5.0))])
    mine = row.comparisons[0]
    assert row.verdict == "refuted" and mine["sigma_d"] == pytest.approx(0.1) and mine["dof"] == 2


def test_defect_5_a_one_seed_comparison_never_flips_confirmed_and_refuted():
    at, one = ([2.0, 2.1, 1.9], [1.0, 1.0, 1.0]), ([5.0], [0.0])     # +1.0 [+0.75, +1.25]: clears 0, below 3
    sc = old.Scale(1.0, 1.0)
    assert old.powered_at_depth("r", [at], [3.0], sc, "p").verdict == "confirmed"
    assert old.powered_at_depth("r", [at, one], [3.0, 3.0], sc, "p", sd=0.05).verdict == "refuted"
    depth = L.Comparison("at depth", seeds(at[0]), seeds(at[1]), 3.0, KNOWN)
    assert L.greater("r", [depth]).verdict == "confirmed"
    for floor in (0.05, 1.0, 50.0):
        row = L.greater("r", [depth, L.Comparison("one seed", seeds(one[0]), seeds(one[1]), 3.0, KNOWN, Noise(floor))])
        assert row.verdict in ("underpowered", "inconclusive") and "exploratory" in row.notes[1]


def test_defect_6_an_exploratory_row_reads_underpowered_when_its_mde_exceeds_the_effect():
    was = old.powered("x", [([5.0], [0.0])], 1.0, paper="p", sd=1.0, exploratory=True)
    assert (was.verdict, was.mde > was.scaled_effect) == ("inconclusive", True)
    row = L.greater("x", [L.Comparison("one seed", seeds([5.0]), seeds([0.0]), 1.0, KNOWN, Noise(1.0))])
    assert row.verdict == "underpowered" and row.mde == pytest.approx(st.mde(1.0, 1, None))
    big = L.greater("x", [L.Comparison("one seed", seeds([5.0]), seeds([0.0]), 4.0, KNOWN, Noise(1.0))])
    assert big.verdict == "inconclusive" and big.seeds_to_decide >= 2  # would decide, but below depth


def test_defect_7_the_equivalence_mde_counts_its_comparisons():
    z = np.array([-1.0, 1.0, -0.5, 0.5])
    a, b = list(2.1 + z / z.std(ddof=1)), [0.0] * 4                  # 90 % interval 2.1 ± 1.18, se 0.5
    was = [old.powered_equivalence("e", a, b, 2.1, paper="p", comparisons=k) for k in (1, 3)]
    assert was[0].mde == was[1].mde < 2.1 and old.all_equivalent("all", [was[1]] * 3).verdict == "inconclusive"
    one = L.equivalent("e", [L.Comparison("e", seeds(a), seeds(b), 2.1, KNOWN)])
    three = L.equivalent("e", [L.Comparison(f"e{i}", seeds(a), seeds(b), 2.1, KNOWN) for i in range(3)])
    assert one.verdict == "inconclusive" and three.verdict == "underpowered" and three.mde > 2.1 > one.mde
    assert three.mde == pytest.approx(st.equivalence_mde(1.0, 4, 3, k=3))


def test_defect_9_a_row_prints_the_deciding_comparisons_effect_beside_its_mde():
    a_small, a_big, zero = [0.1, 0.3, 0.5], [-1.0, 1.0, 3.0], [0.0] * 3   # sd 0.2 and 2.0 at three seeds
    was = old.powered("r", [(a_small, zero), (a_big, zero)], [1.0, 8.0], paper="p")
    assert was.verdict == "inconclusive" and was.mde > was.scaled_effect   # min(effect) beside max(MDE)
    row = L.greater("r", [L.Comparison("small", seeds(a_small), seeds(zero), 1.0, KNOWN),
                          L.Comparison("big", seeds(a_big), seeds(zero), 8.0, KNOWN)])
    assert row.verdict == "inconclusive" and row.mde <= row.scaled_effect == 1.0
    assert row.mde == pytest.approx(st.mde(0.2, 3, 2, k=2))
    # seeds to decide read the dof the design has at that many seeds (a block of 5: 4 (n − 1))
    blk = old.powered("r", [([-0.1, 0.1, 0.3], zero)], 0.3, paper="p", block=old.Noise(0.2, "pool", 8))
    assert blk.verdict == "underpowered" and blk.mde == pytest.approx(old.mde(0.2, 3, dof=8, paired=False))
    n = st.seeds_to_decide(0.3, lambda n: Noise(0.2, 4 * (n - 1)))
    assert st.mde(0.2, n, 4 * (n - 1)) <= 0.3 < st.mde(0.2, n - 1, 4 * (n - 2))
    assert blk.seeds_to_decide > n                 # the old row's seeds: a pair's n − 1 dof, not its block's
