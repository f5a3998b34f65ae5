"""CLL-CLIP's tables from our runs of the language stream (pure functions of results dicts;
the notebook `cllclip_teir` lays them out beside the paper's numbers).

a[i][j] = Recall@1 on language j after task i (columns in stream order, None before language j
is learned). AR = mean over the learned languages of the final row; F = mean over j < T of
max_{k < T} a[k][j] − a[T][j] (max-based, as the paper and CLFM's gather.py). I2T = TR@1, T2I =
IR@1. "in" = unseen items in the training styles (MSCOCO36's role), "out" = the same items in
the held-out style (XM3600's role).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from vlcp.report import claims
from vlcp.report.claims import (Claim, Effect, Scale, calibration_mismatch, calibration_source, claim_from, combine, effect, greater_verdict,
                                judge, measured_scale, Noise, not_testable, unresolved_pair)
from vlcp.report import power as pw
from vlcp.report.paper import paper_table
from vlcp.report.claims import engineering_targets  # noqa: F401  (the studies' shared engineering-targets table)
from vlcp.report.claims import spread_frame  # noqa: F401  (the notebook's seed-spread table)
from vlcp.report import results

SETS = {"in": "in_domain", "out": "out_domain"}
DIRECTIONS = {"I2T": "TR@1", "T2I": "IR@1"}


def accuracy_matrix(r: dict, eval_set: str = "in_domain", metric: str = "IR@1") -> np.ndarray:
    """float [tasks, languages], NaN where a language was not yet learned."""
    rows = r["matrix"][eval_set][metric]
    return np.array([[np.nan if v is None else v for v in row] for row in rows], float)


def ar(a: np.ndarray) -> float:
    return float(np.nanmean(a[-1]))


def forgetting(a: np.ndarray) -> float | None:
    """Max-based forgetting of the final model over the languages learned before the last task
    (None for one task: joint training)."""
    if len(a) < 2:
        return None
    earlier = a[:-1]
    cols = [j for j in range(a.shape[1]) if not np.isnan(earlier[:, j]).all()]
    return float(np.mean([np.nanmax(earlier[:, j]) - a[-1, j] for j in cols]))


def ar_curve(a: np.ndarray) -> np.ndarray:
    """AR_i after every task i (the per-task curve)."""
    return np.array([np.nanmean(row) for row in a])


def summary(r: dict, eval_set_suffix: str = "") -> dict[tuple[str, str, str], float | None]:
    """{(in|out, I2T|T2I, AR|F): value} of one run."""
    out = {}
    for s, name in SETS.items():
        key = name + eval_set_suffix
        if key not in r["matrix"]:
            continue
        for d, metric in DIRECTIONS.items():
            a = accuracy_matrix(r, key, metric)
            out[(s, d, "AR")] = ar(a)
            out[(s, d, "F")] = forgetting(a)
    return out


def as_runs(rs: dict | list[dict]) -> list[dict]:
    """One run or a list of runs at several seeds, as a list."""
    return rs if isinstance(rs, list) else [rs]


def cell_value(values: list[float | None]) -> float | str | None:
    """A table cell from its runs' values: one run's value as it is; several runs' as "mean ± std"
    (`results.over_seeds`); None where a run has none (F of joint training)."""
    if any(v is None for v in values):
        return None
    return float(values[0]) if len(values) == 1 else results.over_seeds(values)


def cells(summaries: list[dict]) -> dict[tuple[str, str, str], float | str | None]:
    """Each (set, direction, AR|F) cell of several runs' `summary` dicts as one `cell_value`."""
    return {c: cell_value([p.get(c) for p in summaries]) for c in summaries[0]}


def summary_over(rs: dict | list[dict], eval_set_suffix: str = "") -> dict[tuple[str, str, str], float | str | None]:
    """`summary` of one run, or each cell's mean ± std over a list of runs at several seeds (the
    long profile's tables)."""
    return cells([summary(r, eval_set_suffix) for r in as_runs(rs)])


def cell_mean_sd(rs: dict | list[dict], cell: tuple[str, str, str]) -> tuple[float, float]:
    """(mean, sample std; 0 for one run) of one (set, direction, AR|F) cell over the runs (a figure's
    bar and its error bar)."""
    return results.mean_std([summary(r)[cell] for r in as_runs(rs)])


def rounded(df: pd.DataFrame) -> pd.DataFrame:
    """A table of single-run values as floats to one decimal; a table of "mean ± std" strings as it is."""
    try:
        return df.astype(float).round(1)
    except (TypeError, ValueError):
        return df


def table(runs: dict[str, dict], suffix: str = "") -> pd.DataFrame:
    """Rows = experiments, columns = (set, direction, AR|F)."""
    df = pd.DataFrame({exp: summary(r, suffix) for exp, r in runs.items()}).T
    df.columns = pd.MultiIndex.from_tuples(df.columns)
    return df


def table2(runs: dict[str, dict | list[dict]], methods: list[str], prefix: str = "cll") -> pd.DataFrame:
    """The paper's Table 2 layout: per method (experiments `<prefix>-<method>[-teir]`; † where it
    needs the language at inference) rows plain / with TEIR / Δ (TEIR − plain), then joint
    (`<prefix>-joint`). Columns = (set, direction, AR|F). An experiment given as a list of runs at
    the same seeds shows each cell as mean ± std over them (`summary_over`), its Δ paired by seed."""
    rows = {}
    for m in methods:
        plain_runs, teir_runs = as_runs(runs[f"{prefix}-{m}"]), as_runs(runs[f"{prefix}-{m}-teir"])
        if len(plain_runs) != len(teir_runs):
            raise ValueError(f"table2: {prefix}-{m} has {len(plain_runs)} runs and its -teir {len(teir_runs)}; "
                             "the same seeds expected on both")
        name = m + (" †" if plain_runs[0]["needs_task_id"] else "")
        plain, teir = [summary(r) for r in plain_runs], [summary(r) for r in teir_runs]
        rows[(name, "plain")], rows[(name, "with TEIR")] = cells(plain), cells(teir)
        rows[(name, "Δ (TEIR − plain)")] = {c: cell_value([None if p.get(c) is None or t.get(c) is None else t[c] - p[c]
                                                           for p, t in zip(plain, teir)]) for c in plain[0]}
    rows[("joint", "")] = summary_over(runs[f"{prefix}-joint"])
    df = pd.DataFrame(rows).T
    df.columns = pd.MultiIndex.from_tuples(df.columns)
    return df


def convergence_frame(runs: dict[str, dict]) -> pd.DataFrame:
    return pd.DataFrame({exp: r["convergence"] for exp, r in runs.items() if "convergence" in r}).T[["loss", "fisher_trace"]]


def convergence_over(runs: dict[str, list[dict]]) -> pd.DataFrame:
    """Fig. 3's measurements (`CONVERGENCE`) over each setting's runs, to three significant digits (a
    loss differs in its second decimal): one run's value, or "mean ± std" over several seeds."""
    def cell(values):
        m, sd = results.mean_std(values)
        return f"{m:.3g}" if len(values) == 1 else f"{m:.3g} ± {sd:.2g}"
    return pd.DataFrame({exp: {k: cell([r["convergence"][k] for r in rs]) for k in CONVERGENCE}
                         for exp, rs in runs.items() if all("convergence" in r for r in rs)}).T


def train_seconds(r: dict) -> float:
    return float(sum(t["seconds"] for t in r["train"]))


# ----------------------------------------------------------------------------------------------
# the claims ledger: every verdict from vlcp.report.claims. One seed: the sd of a difference is the
# test-set sampling noise of the metric, per language (binomial over its test captions), plus, where
# the seed subset (report.cllclip.spread) ran, the seed spread measured on it (`seed_spread`).

CELLS = [(s, d) for s in SETS for d in DIRECTIONS]   # (in|out, I2T|T2I): the paper's four columns per metric
NOISE_SOURCE = "test-set noise only (binomial over each language's test captions); seed spread not measured"
CONVERGENCE = ("loss", "fisher_trace")   # Fig. 3's measurements, in the seed spread under these keys


def spread_key(metric: str, s: str, d: str) -> str:
    """The seed spread's key of `metric` (AR, F) on set `s` (in|out), direction `d` (I2T|T2I)."""
    return f"{metric} {s} {d}"


def load_subset(runs_dir, experiments: list[str], seeds: list[int]) -> tuple[dict[str, list[dict]], list[str]]:
    """The seed subset's runs ({experiment: [results per seed, in `seeds` order]}) and the runs
    missing from `runs_dir` ("<experiment> seed <S>"); an experiment with a missing seed is left out."""
    found, missing = results.load_subset(runs_dir, experiments, seeds)
    return results.complete(found, seeds), missing


def seed_spread(subset: dict[str, list[dict]], seeds: list[int]) -> dict | None:
    """The study's seed spread (`claims.seed_spread`) over the subset's runs ({experiment: [results
    per seed]}, at `seeds`): AR and F on every cell (keys `spread_key`) and Fig. 3's `CONVERGENCE`
    measurements; with "where" (the runs and seeds, for the evidence). None when no metric has
    two seeds (no subset run, or one seed)."""
    values: dict[str, dict[str, list[float]]] = {}
    for e, rs in subset.items():
        for r in rs:
            for (s, d, m), v in summary(r).items():
                if v is not None:
                    values.setdefault(spread_key(m, s, d), {}).setdefault(e, []).append(v)
            for k in CONVERGENCE:
                if k in r.get("convergence", {}):
                    values.setdefault(k, {}).setdefault(e, []).append(r["convergence"][k])
    where = claims.runs_where({e: seeds for e in subset})
    spread = claims.seed_spread(values, where)
    return {**spread, "where": where} if spread["metrics"] else None


def spread_note(spread: dict | None, missing: list[str], experiments: list[str], seeds: list[int]) -> str:
    """One markdown line: the seed spread in use (its runs, seeds and where they are), or why there
    is none (missing runs, no subset, one seed) and that the verdicts then use test-set noise only."""
    if spread is not None:
        return (f"**Seed spread** of {spread['where']} (seed {seeds[0]}: the study's main runs; the others: "
                "`spread-seed<S>/`), per metric below; it joins the test-set noise of every single-seed verdict.")
    why = (f"its runs are missing: {', '.join(missing)}" if missing else
           "report.cllclip.spread names no experiments" if not experiments else
           f"one seed only ({', '.join(map(str, seeds))})" if len(seeds) < 2 else "no metric measured at two seeds")
    return f"**No seed spread** ({why}): the single-seed verdicts use test-set noise only ({NOISE_SOURCE})."


def noise_source(spread: dict | None) -> str:
    """What the single-seed verdicts' noise is: test-set noise only (`NOISE_SOURCE`) without a
    seed spread, else test-set noise + the subset's seed spread."""
    if spread is None:
        return NOISE_SOURCE
    return (f"test-set noise (binomial over each language's test captions) + seed spread of {spread['where']} "
            "(√2 × pooled seed std, Student's t on its dof)")


def test_counts(r: dict, n_test: int) -> np.ndarray:
    """Test captions per language, in the run's stream order: `n_test` test emoji × the share
    of them the language names (the run's test coverage)."""
    cov = r["coverage"]["test"]
    missing = [lang for lang in r["languages"] if lang not in cov]
    if missing:
        raise ValueError(f"results coverage.test has no entry for languages {missing}")
    return np.array([max(1, round(n_test * cov[lang])) for lang in r["languages"]], float)


def ar_se(a: np.ndarray, counts: np.ndarray) -> float:
    """Binomial standard error (points) of AR = the mean of the final row's R@1 over the learned
    languages, language j's R@1 a proportion over its `counts[j]` test captions."""
    p, n = a[-1] / 100, counts[: a.shape[1]]
    keep = ~np.isnan(p)
    return float(100 * np.sqrt(np.sum(p[keep] * (1 - p[keep]) / n[keep])) / keep.sum())


def f_se(a: np.ndarray, counts: np.ndarray) -> float | None:
    """Binomial standard error (points) of F: each term max_k a[k][j] − a[T][j] is a difference of
    two proportions over language j's captions (variances added; the max's selection bias
    ignored), averaged over the languages learned before the last task. None for one task."""
    if len(a) < 2:
        return None
    earlier, n = a[:-1] / 100, counts[: a.shape[1]]
    cols = [j for j in range(a.shape[1]) if not np.isnan(earlier[:, j]).all()]
    var = [(np.nanmax(earlier[:, j]) * (1 - np.nanmax(earlier[:, j])) + a[-1, j] / 100 * (1 - a[-1, j] / 100)) / n[j]
           for j in cols]
    return float(100 * np.sqrt(np.sum(var)) / len(cols))


def value_se(r: dict, n_test: int, s: str, d: str, metric: str) -> tuple[float, float]:
    """(AR or F, its test-set standard error) of one run on set `s`, direction `d`."""
    a = accuracy_matrix(r, SETS[s], DIRECTIONS[d])
    counts = test_counts(r, n_test)
    if metric == "AR":
        return ar(a), ar_se(a, counts)
    if metric == "F":
        return forgetting(a), f_se(a, counts)
    raise ValueError(f"metric must be 'AR' or 'F', got {metric!r}")


def better(ra: dict | list[dict], rb: dict | list[dict], n_test: int, s: str, d: str, metric: str,
           spread: dict | None = None, level: float = 0.95) -> Effect:
    """How much run a beats run b: AR_a − AR_b, or F_b − F_a (less forgetting is better), with
    the sd of one difference = √(se_a² + se_b²) from the per-language test counts; with a seed
    `spread` (`seed_spread`, measured on a fixed test set, so without the test-sampling part)
    √(se_a² + se_b² + difference_spread²) and Student's t on the spread's dof. `ra`, `rb` may be
    lists of runs at the same seeds (≥ 2 each): then paired by seed (both scored on the same test
    items, so no test-sampling term: the seeds measure their own spread); lists of different lengths
    are an error (never silently their first runs). `level`: the interval's."""
    sign = 1 if metric == "AR" else -1
    if _seeded(ra, rb):
        if len(ra) != len(rb):
            raise ValueError(f"better: runs at the same seeds expected on both sides, got {len(ra)} and {len(rb)}")
        va = [sign * value_se(r, n_test, s, d, metric)[0] for r in ra]
        vb = [sign * value_se(r, n_test, s, d, metric)[0] for r in rb]
        return effect(va, vb, paired=True, level=level)
    ra, rb = (r[0] if isinstance(r, list) else r for r in (ra, rb))
    (va, sa), (vb, sb) = value_se(ra, n_test, s, d, metric), value_se(rb, n_test, s, d, metric)
    sd, source, dof = float(np.hypot(sa, sb)), f"test-set noise of {metric}", None
    m = None if spread is None else spread["metrics"].get(spread_key(metric, s, d))
    if m is not None:
        sd, dof = float(np.hypot(sd, m["difference_spread"])), m["dof"]
        source += f" + seed spread of {spread['where']}"
    elif spread is not None:
        source += f" only (the seed spread has no {spread_key(metric, s, d)})"
    return effect([sign * va], [sign * vb], sd=sd, sd_source=source, sd_dof=dof, level=level)


def _weakest(effects) -> Effect:
    return min(effects, key=lambda e: (e.low, e.diff))


def improves(claim: str, pairs: list[tuple[str, dict, dict]], n_test: int, metrics=("AR", "F"), source: str = "",
             cells=CELLS, spread: dict | None = None, paper: dict[str, tuple[dict, dict]] | None = None,
             scales: dict[tuple[str, str, str], Scale] | None = None,
             stand_in: tuple[dict[tuple[str, str, str], float], str] | None = None) -> Claim:
    """"a beats b" for every (label, a, b) in `pairs`, every metric (AR higher, F lower) and every
    (set, direction) cell. With the paper's rows (`paper`: {label: (row a, row b)}, `paper_row`'s
    dicts), or for a figure without numbers a `stand_in` (`stand_in`'s gains and their citation,
    the same for every pair), and our `scales` ({(set, direction, metric): Scale},
    `study_scales`): every check at once by `claims.judge` against the paper's effect in that cell
    carried to our headroom (an intersection-union test; a side with one run makes it
    exploratory). Else greater_verdict each, combined. The effect shown is the weakest check.
    `spread`: the seed spread joining the test-set noise of single runs (`better`)."""
    if scales and (paper is not None or stand_in is not None):
        if paper is not None:
            gains = {label: {k: (pa[k] - pb[k]) * (1 if k[2] == "AR" else -1) for k in pa if k in pb}
                     for label, (pa, pb) in paper.items()}
            cite = "; ".join(f"{label}: " + ", ".join(f"{s} {d} {m} {gains[label][(s, d, m)]:+.1f}" for m in metrics
                                                        for s, d in cells) for label, *_ in pairs)
        else:
            gains, cite = {label: stand_in[0] for label, *_ in pairs}, stand_in[1]
        return _powered_improves(claim, pairs, n_test, metrics, source, cells, spread, gains, cite, scales)
    verdicts, effects, ev = [], [], []
    for label, a, b in pairs:
        parts = []
        for m in metrics:
            es = [better(a, b, n_test, s, d, m, spread) for s, d in cells]
            verdicts += [greater_verdict(e) for e in es]
            effects += es
            parts.append(("AR gain " if m == "AR" else "F reduction ") + "/".join(f"{e.diff:+.1f}" for e in es))
        ev.append(f"{label}: " + ", ".join(parts))
    n_ok, n_no = verdicts.count("confirmed"), verdicts.count("not confirmed")
    head = (f"{n_ok}/{len(verdicts)} checks confirmed, {n_no} not; per cell " + "/".join(f"{s} {d}" for s, d in cells)
            + f" ({noise_source(spread)})")
    return claim_from(claim, combine(verdicts), _weakest(effects), head + " — " + "; ".join(ev), source)


# ----------------------------------------------------------------------------------------------
# power (issue 48): the paper's effects carried to our headroom by one rule (`claims.Scale`), per
# cell and metric: an effect's share of the paper's headroom (AR: Table 2's joint − plain CLL-CLIP;
# F: plain CLL-CLIP's F, the distance to a model that forgets nothing) times ours (the same on
# the 12-language stream, cll-joint and cll-clip, fixed on calibration seeds: report.cllclip.power)

def paper_row(row: str, teir: bool | None = None) -> dict[tuple[str, str, str], float]:
    """One row of the paper as {(in|out, I2T|T2I, AR|F): value}: Table 2's `row` (a method; `teir`
    picks the with/without row; "joint" has no F) or Table 3's (`teir` None: "(1) CLL-CLIP" ...)."""
    if teir is None:
        t = paper_table("cllclip_table3")
        hit = t[t["row"].astype(str) == row]
    else:
        t = paper_table("cllclip_table2")
        hit = t[(t["method"] == row) & ((t["teir"].astype(str) == ("yes" if teir else "no")) | (row == "joint"))]
    if hit.empty:
        raise ValueError(f"paper_row: no row {row!r}" + (f" (TEIR {'on' if teir else 'off'})" if teir is not None else ""))
    r = hit.iloc[0]
    return {(s, d, m): float(r[f"{s}_{d}_{m}"]) for s, d in CELLS for m in ("AR", "F")
            if f"{s}_{d}_{m}" in r and r[f"{s}_{d}_{m}"] == r[f"{s}_{d}_{m}"]}


def paper_headroom(s: str, d: str, metric: str) -> float:
    """The paper's headroom in a cell: AR joint − plain CLL-CLIP (Table 2), F plain CLL-CLIP's."""
    plain = paper_row("clip", teir=False)[(s, d, metric)]
    return paper_row("joint", teir=False)[(s, d, "AR")] - plain if metric == "AR" else plain


def measured_headroom(joint: list[dict], plain: list[dict], s: str, d: str, metric: str) -> float:
    """Ours in a cell, from runs of cll-joint and plain CLL-CLIP (means over seeds)."""
    v = lambda rs, m: float(np.mean([summary(r)[(s, d, m)] for r in rs]))  # noqa: E731
    return v(joint, "AR") - v(plain, "AR") if metric == "AR" else v(plain, "F")


def study_scales(study: dict, runs: dict[str, list[dict]], main: dict[str, dict] | None = None,
                 unresolved: str | None = None, spread: dict | None = None) -> dict[tuple[str, str, str], Scale]:
    """The ledger's `Scale` per (set, direction, metric): our headroom from
    `report.cllclip.power.headroom` ({"AR in I2T": value, ...}, `spread_key`'s names, fixed on
    calibration seeds before the ledger's runs, where its `calibrated_on` matches these runs:
    `claims.calibration_mismatch`), else measured on this ledger's own cll-joint and cll-clip runs
    (the 12-language stream the calibration ran), or where cll-joint has not run, cll36-joint and
    cll36-clip (the scale says which, and why; carried to 0 where `unresolved`,
    `claims.unresolved_headroom` of the power table, says these runs do not resolve their headroom,
    or where the cell itself does not on `spread`'s noise, `cell_noise`: `claims.unresolved_pair`,
    the power table's pair being the 36-language in-domain T2I AR);
    {} when none (the claims keep the older verdicts).
    `runs`: {experiment: [results per seed]} (the seed subset); `main`: {experiment: result}, the
    main seed's runs, read for an experiment `runs` lacks (cll-joint)."""
    runs = {e: [r] for e, r in (main or {}).items()} | runs
    cfg = study.get("power") or {}
    fixed = cfg.get("headroom") or {}
    if not isinstance(fixed, dict):
        raise ValueError(f"report.cllclip.power.headroom: expected {{'AR in I2T': value, ...}}, got {fixed!r}")
    out = {}
    stale = calibration_mismatch(cfg, runs, "report.cllclip.power")
    pairs = [(j, c) for j, c in (("cll-joint", "cll-clip"), ("cll36-joint", "cll36-clip")) if runs.get(j) and runs.get(c)]
    why = stale or "report.cllclip.power sets none"
    for s, d in CELLS:
        for m in ("AR", "F"):
            key = spread_key(m, s, d)
            if key in fixed and not stale:
                out[(s, d, m)] = Scale(float(fixed[key]), paper_headroom(s, d, m), calibration_source(cfg, "report.cllclip.power"))
            elif pairs:
                j, c = pairs[0]
                h = measured_headroom(runs[j], runs[c], s, d, m)
                pair = f"{c}'s {key}" if m == "F" else f"{j} − {c} on {key}"
                out[(s, d, m)] = measured_scale(h, paper_headroom(s, d, m), f"measured on this ledger's own {j} and {c} runs: {why}",
                                                unresolved or unresolved_pair(h, cell_noise(spread, s, d, m), pair))
    return out


def cell_noise(spread: dict | None, s: str, d: str, metric: str) -> Noise | None:
    """The noise of one run of `measured_headroom`'s pair in a cell, from the seed subset's spread
    (`seed_spread`; None where it has not measured the cell): AR, a difference of two single runs,
    √2 × the pooled seed std; F, one run's forgetting, the pooled seed std."""
    m = ((spread or {}).get("metrics") or {}).get(spread_key(metric, s, d))
    if not m:
        return None
    sd = m["difference_spread"] if metric == "AR" else m["pooled_std"]
    return Noise(float(sd), f"seed subset's {'√2 × ' if metric == 'AR' else ''}pooled seed std, {m['dof']} dof", int(m["dof"]))


def _powered_improves(claim, pairs, n_test, metrics, source, cells, spread, gains, cite, scales) -> Claim:
    """`improves` judged for power: `gains` {label: {(set, direction, metric): the paper's gain}}."""
    checks = [(label, a, b, m, s, d) for label, a, b in pairs for m in metrics for s, d in cells]
    missing = [(s, d, m) for *_, m, s, d in checks if (s, d, m) not in scales]
    if missing:
        raise ValueError(f"claim {claim!r}: no scale for {sorted(set(missing))}")
    k = len(checks)
    effects = [better(a, b, n_test, s, d, m, spread) for _, a, b, m, s, d in checks]
    adjusted = effects if k == 1 else [better(a, b, n_test, s, d, m, spread, level=pw.bonferroni_level(k))
                                       for _, a, b, m, s, d in checks]
    targets = [scales[(s, d, m)](gains[label][(s, d, m)]) for label, _, _, m, s, d in checks]
    single = any(not _seeded(a, b) for _, a, b, *_ in checks)
    return judge(claim, effects, adjusted, targets, paper=f"{source}: {cite}; scaled {_scaled_how(scales, metrics, cells)}",
                 evidence=f"AR higher, F lower per cell ({noise_source(spread) if single else 'paired by seed'})",
                 source=source, labels=[f"{label} {s} {d} {m}" for label, _, _, m, s, d in checks] if k > 1 else None,
                 exploratory=[not _seeded(a, b) for _, a, b, *_ in checks])


def _seeded(a, b) -> bool:
    """Both sides are runs at ≥ 2 seeds (`better` pairs them by seed)."""
    return isinstance(a, list) and isinstance(b, list) and min(len(a), len(b)) >= 2


def _scaled_how(scales: dict, metrics, cells) -> str:
    return "; ".join(f"{s} {d} {m} × our H {sc.headroom:.2f} / the paper's {sc.paper_headroom:.2f}"
                     for (s, d, m), sc in scales.items() if m in metrics and (s, d) in cells) + \
        f" ({next(iter(scales.values())).how})"


# Table 3's comparisons that the paper's text credits with an effect on each metric (§Ablations:
# (1, 2) "improves AR and F by large margins"; (3, 4) "mitigate the catastrophic forgetting";
# (5) against (3, 4) "superiority"; (6) against (5) "improve the model's learning capacity";
# (7) against (6) "a boost in performance")
CREDITED = {"AR": (("(2)", "(1) CLL-CLIP"), ("(5)", "(3)"), ("(5)", "(4)"), ("(6) = (1) + TEIR", "(5)"),
                   ("(7)", "(6) = (1) + TEIR")),
            "F": (("(2)", "(1) CLL-CLIP"), ("(3)", "(1) CLL-CLIP"), ("(4)", "(1) CLL-CLIP"), ("(5)", "(3)"),
                  ("(5)", "(4)"))}


def stand_in(metrics=("AR", "F")) -> tuple[dict[tuple[str, str, str], float], str]:
    """The paper's effect for a figure that gives no numbers (Fig. 4): per cell and metric the
    smallest gain among the Table 3 comparisons its text credits with an effect on that metric
    (`CREDITED`), a lower bound on any effect the paper reports. ({(set, direction, metric): gain},
    the citation)."""
    rows = {r: paper_row(r) for pairs in CREDITED.values() for pair in pairs for r in pair}
    gains, cite = {}, []
    for m in metrics:
        for s, d in CELLS:
            sign = 1 if m == "AR" else -1
            (a, b), g = min((((a, b), sign * (rows[a][(s, d, m)] - rows[b][(s, d, m)])) for a, b in CREDITED[m]),
                            key=lambda kv: kv[1])
            gains[(s, d, m)] = g
            cite.append(f"{s} {d} {m} {g:+.1f} ({a} vs {b})")
    return gains, "stand-in, no numbers in the figure: the smallest gain Table 3's text credits, " + ", ".join(cite)


def f_margin(table3: pd.DataFrame, rows=("(3)", "(4)"), reference: str = "(1) CLL-CLIP") -> tuple[float, str]:
    """The smallest change in F the paper's Table 3 credits as an effect on forgetting ("imposing
    constraints on gradients or L2 weight decay ... effectively mitigate[s] the catastrophic
    forgetting"): the smallest relative F reduction of `rows` from `reference` over the four
    cells (12.5 %: (3) on in-domain I2T and out-of-domain T2I)."""
    t = table3.set_index("row")
    cols = [f"{s}_{d}_F" for s, d in CELLS]
    rel = {(r, c): (t.loc[reference, c] - t.loc[r, c]) / t.loc[reference, c] for r in rows for c in cols}
    (r, c), v = min(rel.items(), key=lambda kv: kv[1])
    return float(v), f"the smallest F reduction Table 3 credits to a regulariser, {r} vs (1) on {c}: {v:.1%} of (1)'s F"


def improves_without_forgetting_more(a, b, reference: dict, n_test: int, margin_rel: float, margin_how: str,
                                     cells=CELLS, spread: dict | None = None,
                                     paper: tuple[dict, dict] | None = None,
                                     scales: dict[tuple[str, str, str], Scale] | None = None) -> Claim:
    """Table 3 (6) vs (5): "setting (6) can still improve the model's learning capacity without
    sacrificing memory stability": AR_a > AR_b and, non-inferiority, F_a not above F_b by
    `margin_rel` × the plain model's (`reference`, row (1)) F or more. Not testable where the plain
    model does not forget (no scale for the margin). `spread`: as `better`'s.

    With the paper's rows (`paper`: ((6), (5)), `paper_row`'s) and our `scales`, all eight checks at
    once by `claims.judge`: AR's gain against the paper's carried to our headroom, and F's reduction
    shifted by the margin (non-inferiority: confirmed when F_b − F_a + margin clears 0) against the
    margin plus the paper's F reduction carried to ours, so it is refuted only when (6) clearly
    forgets more than the paper's (6) does. Else greater_verdict each, combined."""
    claim, source = "(6) = (5) + init improves AR without sacrificing F", "Table 3 (6) vs (5)"
    ref = reference[0] if isinstance(reference, list) else reference
    margins = {}
    for s, d in cells:
        f_ref = value_se(ref, n_test, s, d, "F")[0]
        if f_ref is None or f_ref <= 0:
            return not_testable(claim, f"plain CLL-CLIP does not forget on {s} {d} (F {f_ref}): no scale for the margin",
                                source)
        margins[(s, d)] = margin_rel * f_ref
    if paper is not None and scales:
        return _powered_non_inferior(claim, source, a, b, n_test, cells, spread, paper, scales, margins, margin_how)
    verdicts, effects, ev = [], [], []
    for s, d in cells:
        margin = margins[(s, d)]
        e_ar, e_f = better(a, b, n_test, s, d, "AR", spread), better(a, b, n_test, s, d, "F", spread)
        verdicts += [greater_verdict(e_ar), greater_verdict(e_f, min_gap=-margin)]
        effects.append(e_ar)
        ev.append(f"{s} {d}: AR gain {e_ar.diff:+.1f}, F reduction {e_f} (margin −{margin:.1f})")
    return claim_from(claim, combine(verdicts), _weakest(effects),
                      f"margin: {margin_how}; {noise_source(spread)}; " + "; ".join(ev), source)


def _powered_non_inferior(claim, source, a, b, n_test, cells, spread, paper, scales, margins, margin_how) -> Claim:
    pa, pb = paper
    checks = [(m, s, d) for m in ("AR", "F") for s, d in cells]
    k = len(checks)
    shift = lambda m, s, d: margins[(s, d)] if m == "F" else 0.0  # noqa: E731
    effects = [better(a, b, n_test, s, d, m, spread).shifted(shift(m, s, d)) for m, s, d in checks]
    adjusted = [better(a, b, n_test, s, d, m, spread, level=pw.bonferroni_level(k)).shifted(shift(m, s, d))
                for m, s, d in checks]
    gain = lambda m, s, d: (pa[(s, d, m)] - pb[(s, d, m)]) * (1 if m == "AR" else -1)  # noqa: E731
    targets = [scales[(s, d, m)](gain(m, s, d)) + shift(m, s, d) for m, s, d in checks]
    cite = ", ".join(f"{s} {d} {m} {gain(m, s, d):+.1f}" for m, s, d in checks)
    margin_text = ", ".join(f"{s} {d} {v:.2f}" for (s, d), v in margins.items())
    return judge(claim, effects, adjusted, targets,
                 paper=f"{source}: {cite}; scaled {_scaled_how(scales, ('AR', 'F'), cells)}",
                 evidence=(f"AR gain per cell, and F reduction + the non-inferiority margin ({margin_how}; "
                           f"margins {margin_text}) against the margin + the scaled paper reduction "
                           f"({noise_source(spread) if not _seeded(a, b) else 'paired by seed'})"),
                 source=source, labels=[f"{s} {d} {m}" + (" + margin" if m == "F" else "") for m, s, d in checks],
                 exploratory=not _seeded(a, b))


def lower_than(claim: str, values: dict[str, float | list[float]], reference: str, sd: float | None = None,
               sd_source: str = "", source: str = "Fig. 3", spread: dict | None = None, metric: str = "") -> Claim:
    """"every setting's value is lower than `reference`'s" (Fig. 3: training loss, Fisher trace):
    reference − setting for each. A value is one run's, or a list of per-seed values (the seed
    subset's, index 0 the study's seed): two lists of the same length ≥ 2 are paired by seed, at the
    study's depth; a single run is compared with the reference's first (the same seed) on `sd`, one
    comparison's noise, exploratory. `sd`: of one difference; with a seed `spread` holding `metric`
    (one of `CONVERGENCE`), its difference spread is the sd (Student's t on its dof). The figure
    gives no numbers and its axes (a loss, a trace) carry no headroom to scale, so the paper's effect
    is stood in by σ_d (a standardised effect of 1): every comparison at once by `claims.judge`
    (never confirmed while one is exploratory; refuted by a paired comparison whose Bonferroni
    interval excludes σ_d, i.e. lower by clearly less than σ_d or higher). Without any sd (no spread
    measured): greater_verdict each, never confirmed."""
    if reference not in values:
        return not_testable(claim, f"no convergence measurement of {reference}", source)
    dof = None
    m = None if spread is None else spread["metrics"].get(metric)
    if m is not None:
        if sd is not None:
            raise ValueError(f"lower_than {claim!r}: give `sd` or a `spread` with {metric!r}, not both")
        sd, dof, sd_source = m["difference_spread"], m["dof"], f"seed spread of {spread['where']}"
    seeds = {k: list(v) if isinstance(v, (list, tuple)) else [v] for k, v in values.items()}
    ref = seeds[reference]
    others = [k for k in seeds if k != reference]
    paired = [len(seeds[o]) == len(ref) >= 2 for o in others]

    def diff(o, p, level=0.95):
        if p:
            return effect(ref, seeds[o], paired=True, level=level)
        return effect(ref[:1], seeds[o][:1], sd=sd, sd_source=sd_source, sd_dof=dof, level=level)

    effects = [diff(o, p) for o, p in zip(others, paired)]
    show = lambda v: "/".join(f"{x:.4g}" for x in v) + (" (seeds)" if len(v) > 1 else "")  # noqa: E731
    ev = f"{reference} {show(ref)}; " + ", ".join(f"{k} {show(seeds[k])}" for k in others)
    if sd is None:
        ev += "; one run each and no spread measured (seed spread not measured; the 16 batches' spread not recorded)"
        return claim_from(claim, combine([greater_verdict(e) for e in effects]), _weakest(effects), ev, source)
    k = len(others)
    adjusted = effects if k == 1 else [diff(o, p, pw.bonferroni_level(k)) for o, p in zip(others, paired)]
    return judge(claim, effects, adjusted, [sd] * k,
                 paper=f"{source}: no numbers; stand-in: one comparison's noise σ_d = {sd:.3g} ({sd_source}), "
                       "a standardised effect of 1",
                 evidence=ev, source=source, labels=[f"{reference} − {o}" for o in others] if k > 1 else None,
                 exploratory=[not p for p in paired])


def metric_sources(block: dict, params: dict) -> dict:
    """`vlcp report metrics`' curves: the 36-language stream's runs (Table 2)."""
    return {"experiments": [e for e in block.get("experiments", []) if e.startswith("cll36-")] or None}
