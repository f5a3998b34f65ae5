"""The CLL-CLIP report (vlcp.report.cllclip) on hand-made results: the per-language sampling noise
of AR and F, the seed spread, its tables, and its ledger (vlcp/report/studies/cllclip/claims.yaml
judged by the report engine): each kind of row fed data for the verdicts it can return."""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vlcp.report import cllclip as cl
from vlcp.report.refs import paper_table

LANGS = ["en", "de", "fr"]


def matrix(final, before=None):
    """Lower-triangular a[i][j] (None before language j is learned); `before[j]` = R@1 on j right
    after learning it (default: the final value, no forgetting)."""
    before = before or final
    rows = [[before[j] if j <= i else None for j in range(len(final))] for i in range(len(final) - 1)]
    return rows + [list(final)]


def run(final, before=None, coverage=(1.0, 1.0, 1.0), loss=1.0):
    m = matrix(final, before)
    cell = {"TR@1": m, "IR@1": m}
    zero = {"TR@1": [10.0] * len(LANGS), "IR@1": [10.0] * len(LANGS)}
    return {"languages": LANGS, "coverage": {"test": dict(zip(LANGS, coverage))}, "stream": "language",
            "tasks": list(LANGS), "task_languages": [[lang] for lang in LANGS],
            "zero_shot": {"in_domain": zero, "out_domain": zero},
            "matrix": {"in_domain": cell, "out_domain": cell}, "convergence": {"loss": loss, "fisher_trace": loss}}


SUBSET_SEEDS = [0, 1, 2]


def subset(spread_ar=5.0, spread_loss=0.01):
    """The seed subset at seeds 0, 1, 2: each experiment's AR (every cell) at mean ± `spread_ar`
    (seed std `spread_ar`), F 20 at every seed, loss and Fisher trace at 1 ± `spread_loss`."""
    return {e: [run([v + k * spread_ar] * 3, before=[v + k * spread_ar + 20] * 2 + [v + k * spread_ar], loss=1 + k * spread_loss)
                for k in (0, 1, -1)] for e, v in (("cll-clip", 50.0), ("cll-clip-teir", 60.0))}


def test_test_counts_follow_each_languages_coverage():
    r = run([50, 50, 50], coverage=(1.0, 0.5, 0.25))
    assert list(cl.test_counts(r, 400)) == [400, 200, 100]
    r["coverage"]["test"].pop("fr")
    with pytest.raises(ValueError, match=r"coverage.test has no entry for languages \['fr'\]"):
        cl.test_counts(r, 400)


def test_ar_se_uses_the_per_language_counts_not_the_total():
    a = np.array([[50.0, 50.0]])
    # each language 50 % over its own count: se = 100·√(Σ .25/n_j) / 2
    assert cl.ar_se(a, np.array([100.0, 25.0])) == pytest.approx(100 * np.sqrt(0.25 / 100 + 0.25 / 25) / 2)
    assert cl.ar_se(a, np.array([100.0, 25.0])) > cl.ar_se(a, np.array([125.0, 125.0]))   # total-count SE is smaller


def test_f_se_adds_both_ends_of_each_forgetting_term():
    a = np.array([[50.0, np.nan], [20.0, 50.0]])       # F = 30 on language 0 only
    assert cl.forgetting(a) == pytest.approx(30.0)
    assert cl.f_se(a, np.array([100.0, 100.0])) == pytest.approx(100 * np.sqrt((0.25 + 0.16) / 100))
    assert cl.f_se(a[:1], np.array([100.0, 100.0])) is None


def test_engineering_targets_table_is_shared():
    t = cl.engineering_targets([{"target": "TEIR costs at most 1.05× CLL-CLIP's training time", "ratio": 1.02,
                                 "slowest": 1.08, "goal": 1.05, "source": "bench"}])
    assert t.loc["TEIR costs at most 1.05× CLL-CLIP's training time", "result"] == "met by the median only"


# -- the seed spread of the subset (report.cllclip.spread) joining the single-seed verdicts' noise --

def test_seed_spread_pools_every_cell_and_fig3_over_the_subset():
    sp = cl.seed_spread(subset(spread_ar=5.0, spread_loss=0.01), SUBSET_SEEDS)
    assert sp["where"] == "cll-clip, cll-clip-teir at seeds 0, 1, 2"
    assert set(sp["metrics"]) == {cl.spread_key(m, s, d) for s, d in cl.CELLS for m in ("AR", "F")} | set(cl.CONVERGENCE)
    ar = sp["metrics"]["AR in I2T"]
    assert ar["std_per_experiment"] == {"cll-clip": pytest.approx(5.0), "cll-clip-teir": pytest.approx(5.0)}
    assert ar["pooled_std"] == pytest.approx(5.0) and ar["dof"] == 4 and ar["difference_spread"] == pytest.approx(5 * np.sqrt(2))
    assert sp["metrics"]["F out T2I"]["pooled_std"] == pytest.approx(0.0)
    assert sp["metrics"]["loss"]["pooled_std"] == pytest.approx(0.01)
    assert set(cl.spread_frame(sp).columns) == {"seed std cll-clip", "seed std cll-clip-teir", "pooled std", "dof",
                                               "difference spread"}
    assert cl.seed_spread({}, SUBSET_SEEDS) is None                          # no subset: no spread
    assert cl.seed_spread({"cll-clip": [run([50.0] * 3)]}, [0]) is None       # one seed: no spread


def _write(root, exp, seed, r):
    f = Path(root) / exp / f"seed{seed}" / "results.json"
    f.parent.mkdir(parents=True)
    f.write_text(json.dumps(r))


def test_load_subset_finds_the_main_and_spread_seeds_and_names_the_missing(tmp_path):
    runs = subset()
    for e, rs in runs.items():
        for s, r in zip(SUBSET_SEEDS, rs):
            if (e, s) != ("cll-clip-teir", 2):
                _write(tmp_path / ("stream-seed0" if s == 0 else f"spread-seed{s}"), e, s, r)
    got, missing = cl.load_subset(tmp_path, ["cll-clip", "cll-clip-teir"], SUBSET_SEEDS)
    assert list(got) == ["cll-clip"] and got["cll-clip"] == runs["cll-clip"] and missing == ["cll-clip-teir seed 2"]
    note = cl.spread_note(None, missing, ["cll-clip", "cll-clip-teir"], SUBSET_SEEDS)
    assert "missing: cll-clip-teir seed 2" in note and "test-set noise only" in note
    _write(tmp_path / "spread-seed2", "cll-clip-teir", 2, runs["cll-clip-teir"][2])
    got, missing = cl.load_subset(tmp_path, ["cll-clip", "cll-clip-teir"], SUBSET_SEEDS)
    assert not missing and cl.seed_spread(got, SUBSET_SEEDS)["metrics"]["AR in T2I"]["dof"] == 4
    assert "at seeds 0, 1, 2" in cl.spread_note(cl.seed_spread(got, SUBSET_SEEDS), missing, list(got), SUBSET_SEEDS)


def _cell(cell_id):
    nb = json.loads((Path(__file__).parents[1] / "notebooks" / "cllclip_teir.ipynb").read_text())
    return "".join(next(c for c in nb["cells"] if c.get("id") == cell_id)["source"])


@pytest.mark.parametrize("with_spread", [True, False])
def test_teach_cell_passes_every_subset_seed_to_task_gains(with_spread):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = {"cll36-clip": run([50.0] * 3), "cll36-clip-teir": run([55.0] * 3)}
    sub = subset()
    shown = []
    ns = {"report": True, "runs": runs, "first": runs["cll36-clip"], "n_test": 200, "study": {"needs_teaching": ["x"]},
          "subset": sub if with_spread else {}, "subset_missing": [] if with_spread else ["cll-clip seed 1"],
          "spread": cl.seed_spread(sub, SUBSET_SEEDS) if with_spread else None, "spread_exps": list(sub),
          "spread_seeds": SUBSET_SEEDS, "languages": LANGS, "cl": cl, "plt": plt, "Markdown": str,
          "display": lambda x, *a, **k: shown.append(x)}
    try:
        exec(_cell("7dc734f0"), ns)
    finally:
        plt.close("all")
    assert all((g["n_seeds"] == 1).all() for g in ns["gains"].values())      # the whole stream: one seed
    if with_spread:
        assert list(ns["sub_gains"]) == ["cll-clip (3 seeds)", "cll-clip-teir (3 seeds)"]
        assert all((g["n_seeds"] == 3).all() and g["noise_source"].str.startswith("seed std").all()
                   for g in ns["sub_gains"].values())
    else:
        assert "sub_gains" not in ns and any("No seed spread" in str(x) for x in shown)


def test_table_cells_show_mean_and_std_over_the_long_profiles_seeds(tmp_path):
    """The long profile (`seeded_runs`: every row at seeds 0-2): Table 2, Table 3 and Fig. 3 read
    mean ± std over the seeds, Table 2's Δ paired by seed; the bar chart draws the means."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = ["clip", "er"]
    abl_exps = ["cll-clip", "cll-abl-init", "cll-abl-grad", "cll-abl-decay", "cll-abl-graddecay", "cll-clip-teir", "cll-abl-oracle"]

    def at_seeds(v, teir=False):   # AR v + k at seed k; with TEIR also + 2k, so its paired Δ moves 2 points a seed
        return [{**run([v + k * (3 if teir else 1)] * 3, loss=1.0 + k / 100), "needs_task_id": False,
                 "steps_per_task": [6] * 3, "vocab_sizes": [100, 120, 140]} for k in range(3)]
    seeded_runs = {f"cll36-{m}{t}": at_seeds(50.0 if not t else 52.0, bool(t)) for m in methods for t in ("", "-teir")}
    seeded_runs |= {"cll36-joint": at_seeds(60.0)} | {e: at_seeds(40.0 + i) for i, e in enumerate(abl_exps)}
    from vlcp.report.results import mean_std

    ns = {"report": True, "cl": cl, "pd": pd, "np": np, "plt": plt, "paper_table": paper_table, "methods": methods, "mean_std": mean_std,
          "display": lambda *a, **k: None, "Markdown": str, "seeded_runs": seeded_runs, "shown": seeded_runs,
          "runs": {e: rs[0] for e, rs in seeded_runs.items()}, "shown_seeds": "mean ± std over seeds 0, 1, 2"}
    ns["first"], ns["langs36"] = ns["runs"]["cll36-clip"], LANGS
    for cell in ("0140f6bb", "a924d4eb", "1318c88e", "f640b602"):
        exec(_cell(cell), ns)
        plt.close("all")
    t2 = ns["t2"]
    assert t2.loc[("clip", "plain"), ("in", "T2I", "AR")] == "51.0 ± 1.0"
    assert t2.loc[("clip", "Δ (TEIR − plain)"), ("in", "T2I", "AR")] == "4.0 ± 2.0"     # 2, 4, 6: paired by seed
    assert ns["t3"].loc["(2) init", ("in", "I2T", "AR")] == "42.0 ± 1.0"
    assert cl.convergence_over({"(1)": seeded_runs["cll-clip"]}).loc["(1)", "loss"] == "1.01 ± 0.01"
