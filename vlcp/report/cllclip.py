"""CLL-CLIP's tables and ledger measures from our runs of the language stream (the notebook
`cllclip_teir` lays them out beside the paper's). a[i][j] = R@1 on language j after task i (NaN
before it is learned); AR = mean of the final row, F = mean over j < T of max_{k<T} a[k][j] − a[T][j].
I2T = TR@1, T2I = IR@1; "in" = unseen items in the training styles, "out" = the held-out style."""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from types import MappingProxyType

import numpy as np
import pandas as pd

from vlcp.report import ledger as lg, results, stats as st
from vlcp.report.stats import Noise, spread_frame  # noqa: F401  (spread_frame: the notebook's seed-spread table)
from vlcp.report.study import ClaimSpec, Runs, Study, load_runs, paper_number, stale_calibration, values
from vlcp.report.targets import engineering_targets  # noqa: F401  (the studies' shared engineering-targets table)

SETS = {"in": "in_domain", "out": "out_domain"}
DIRECTIONS = {"I2T": "TR@1", "T2I": "IR@1"}
CELLS = [(s, d) for s in SETS for d in DIRECTIONS]   # (in|out, I2T|T2I): the paper's four columns per metric


def accuracy_matrix(r: dict, eval_set: str = "in_domain", metric: str = "IR@1") -> np.ndarray:
    """float [tasks, languages], NaN where a language was not yet learned."""
    return np.array(r["matrix"][eval_set][metric], float)


def ar(a: np.ndarray) -> float:
    return float(np.nanmean(a[-1]))


def forgetting(a: np.ndarray) -> float | None:
    """Max-based forgetting over the languages learned before the last task (None for one task)."""
    if len(a) < 2:
        return None
    keep = ~np.isnan(a[:-1]).all(0)   # the languages learned before the last task
    return float(np.mean(np.nanmax(a[:-1, keep], 0) - a[-1, keep]))


def ar_curve(a: np.ndarray) -> np.ndarray:
    """AR_i after every task i."""
    return np.nanmean(a, 1)


def summary(r: dict, eval_set_suffix: str = "") -> dict[tuple[str, str, str], float | None]:
    """{(in|out, I2T|T2I, AR|F): value} of one run."""
    out = {}
    for s, d in CELLS:
        if SETS[s] + eval_set_suffix in r["matrix"]:
            a = accuracy_matrix(r, SETS[s] + eval_set_suffix, DIRECTIONS[d])
            out[(s, d, "AR")], out[(s, d, "F")] = ar(a), forgetting(a)
    return out


def as_runs(rs: dict | list[dict]) -> list[dict]:
    return rs if isinstance(rs, list) else [rs]


def cells_over(summaries: list[dict]) -> dict:
    """Each cell of one run's `summary` as it is, of several runs' "mean ± std"; None where a run has none."""
    def cell(vs):
        return None if None in vs else float(vs[0]) if len(vs) == 1 else results.over_seeds(vs)
    return {c: cell([p.get(c) for p in summaries]) for c in summaries[0]}


def summary_over(rs: dict | list[dict], eval_set_suffix: str = "") -> dict[tuple[str, str, str], float | str | None]:
    """`summary` of one run, or each cell's mean ± std over a list of runs."""
    return cells_over([summary(r, eval_set_suffix) for r in as_runs(rs)])


def cell_mean_sd(rs: dict | list[dict], cell: tuple[str, str, str]) -> tuple[float, float]:
    """(mean, sample std; 0 for one run) of one cell over the runs."""
    return results.mean_std([summary(r)[cell] for r in as_runs(rs)])


def rounded(df: pd.DataFrame) -> pd.DataFrame:
    """A table of floats to one decimal; a table of "mean ± std" strings as it is."""
    try:
        return df.astype(float).round(1)
    except (TypeError, ValueError):
        return df


def table(runs: dict[str, dict], suffix: str = "") -> pd.DataFrame:
    """Rows = experiments, columns = (set, direction, AR|F)."""
    return pd.DataFrame({exp: summary(r, suffix) for exp, r in runs.items()}).T


def table2(runs: dict[str, dict | list[dict]], methods: list[str], prefix: str = "cll") -> pd.DataFrame:
    """Table 2's layout: per method (`<prefix>-<method>[-teir]`, † where it needs the language at
    inference) rows plain / with TEIR / Δ paired by seed, then `<prefix>-joint`."""
    rows = {}
    for m in methods:
        plain_runs, teir_runs = as_runs(runs[f"{prefix}-{m}"]), as_runs(runs[f"{prefix}-{m}-teir"])
        if len(plain_runs) != len(teir_runs):
            raise ValueError(f"table2: {prefix}-{m} has {len(plain_runs)} runs and its -teir {len(teir_runs)}; "
                             "the same seeds expected on both")
        name = m + (" †" if plain_runs[0]["needs_task_id"] else "")
        plain, teir = [summary(r) for r in plain_runs], [summary(r) for r in teir_runs]
        delta = [{c: None if p.get(c) is None or t.get(c) is None else t[c] - p[c] for c in plain[0]}
                 for p, t in zip(plain, teir)]
        rows |= {(name, "plain"): cells_over(plain), (name, "with TEIR"): cells_over(teir),
                 (name, "Δ (TEIR − plain)"): cells_over(delta)}
    rows[("joint", "")] = summary_over(runs[f"{prefix}-joint"])
    return pd.DataFrame(rows).T


def convergence_over(runs: dict[str, list[dict]]) -> pd.DataFrame:
    """Fig. 3's measurements over each setting's runs to three significant digits (± std over seeds)."""
    def cell(values):
        m, sd = results.mean_std(values)
        return f"{m:.3g}" if len(values) == 1 else f"{m:.3g} ± {sd:.2g}"
    return pd.DataFrame({exp: {k: cell([r["convergence"][k] for r in rs]) for k in CONVERGENCE}
                         for exp, rs in runs.items() if all("convergence" in r for r in rs)}).T


def train_seconds(r: dict) -> float:
    return float(sum(t["seconds"] for t in r["train"]))


# --------------------------------------------------------------------------- the claims ledger
# The rows: vlcp/report/studies/cllclip/claims.yaml; here their measures, noise floors and two kinds.

NOISE_SOURCE = "test-set noise only (binomial over each language's test captions); seed spread not measured"
CONVERGENCE = ("loss", "fisher_trace")   # Fig. 3's measurements, in the seed spread under these keys


def spread_key(metric: str, s: str, d: str) -> str:
    """The seed spread's key of `metric` (AR, F) on set `s` (in|out), direction `d` (I2T|T2I)."""
    return f"{metric} {s} {d}"


def complete_subset(runs_dir, experiments: list[str], seeds: list[int]) -> tuple[dict[str, list[dict]], list[str]]:
    """({experiment: [results per seed]}, the runs missing); an experiment with a missing seed is left out."""
    found, missing = results.load_subset(runs_dir, experiments, seeds)
    return results.complete(found, seeds), missing


def seed_spread(subset: dict[str, list[dict]], seeds: list[int]) -> dict | None:
    """`spread.seed_spread` of AR, F per cell and Fig. 3's numbers over the subset, with "where" (None: no 2 seeds)."""
    values: dict[str, dict[str, list[float]]] = {}
    for e, rs in subset.items():
        for r in rs:
            got = {**{spread_key(m, s, d): v for (s, d, m), v in summary(r).items()},
                   **{k: r["convergence"][k] for k in CONVERGENCE if k in r.get("convergence", {})}}
            for key, v in got.items():
                if v is not None:
                    values.setdefault(key, {}).setdefault(e, []).append(v)
    where = st.runs_where({e: seeds for e in subset})
    spread = st.seed_spread(values, where)
    return {**spread, "where": where} if spread["metrics"] else None


def spread_note(spread: dict | None, missing: list[str], experiments: list[str], seeds: list[int]) -> str:
    """One markdown line: the seed spread in use, or why there is none."""
    if spread is not None:
        return (f"**Seed spread** of {spread['where']} (seed {seeds[0]}: the study's main runs; the others: "
                "`spread-seed<S>/`), per metric below; it joins the test-set noise of every single-seed verdict.")
    why = (f"its runs are missing: {', '.join(missing)}" if missing else
           "report.cllclip.spread names no experiments" if not experiments else
           f"one seed only ({', '.join(map(str, seeds))})" if len(seeds) < 2 else "no metric measured at two seeds")
    return f"**No seed spread** ({why}): the single-seed verdicts use test-set noise only ({NOISE_SOURCE})."


# AR and F per cell (`spread_key`'s names), and Fig. 3's measurements
MEASURES = MappingProxyType({**{spread_key(m, s, d): (lambda r, c=(s, d, m): summary(r)[c])
                                for m in ("AR", "F") for s, d in CELLS},
                             **{k: (lambda r, k=k: r["convergence"][k]) for k in CONVERGENCE}})


def test_counts(r: dict, n_test: int) -> np.ndarray:
    """Test captions per language in stream order: `n_test` × the share of them the language names."""
    cov = r["coverage"]["test"]
    if missing := [lang for lang in r["languages"] if lang not in cov]:
        raise ValueError(f"results coverage.test has no entry for languages {missing}")
    return np.array([max(1, round(n_test * cov[lang])) for lang in r["languages"]], float)


def ar_se(a: np.ndarray, counts: np.ndarray) -> float:
    """Binomial SE (points) of AR, language j's R@1 a proportion over its `counts[j]` captions."""
    p, keep = a[-1] / 100, ~np.isnan(a[-1])
    return float(100 * np.sqrt(np.sum(p[keep] * (1 - p[keep]) / counts[: a.shape[1]][keep])) / keep.sum())


def f_se(a: np.ndarray, counts: np.ndarray) -> float | None:
    """Binomial SE (points) of F, each term a difference of two proportions (the max's bias ignored); None: one task."""
    if len(a) < 2:
        return None
    keep = ~np.isnan(a[:-1]).all(0)
    best, last, n = np.nanmax(a[:-1, keep], 0) / 100, a[-1, keep] / 100, counts[: a.shape[1]][keep]
    return float(100 * np.sqrt(np.sum((best * (1 - best) + last * (1 - last)) / n)) / keep.sum())


def value_se(r: dict, n_test: int, s: str, d: str, metric: str) -> tuple[float, float]:
    """(AR or F, its test-set SE) of one run on set `s`, direction `d`."""
    a, counts = accuracy_matrix(r, SETS[s], DIRECTIONS[d]), test_counts(r, n_test)
    if metric not in ("AR", "F"):
        raise ValueError(f"metric must be 'AR' or 'F', got {metric!r}")
    return (ar(a), ar_se(a, counts)) if metric == "AR" else (forgetting(a), f_se(a, counts))


def ledger_runs(runs_dir, study: dict, long: bool = False) -> Runs:
    """Every experiment at the main seed (long: also the long profile's, from its folder), the subset's at its seeds."""
    main, spread = [study["seeds"][0]], study.get("spread") or {}
    seeds, dirs = results.long_reads(study, runs_dir, main) if long else (main, runs_dir)
    out = load_runs(dirs, study["experiments"], seeds)
    subset = load_runs(runs_dir, spread.get("experiments", []), list(dict.fromkeys([*main, *spread.get("seeds", [])])))
    return {e: dict(sorted({**subset.get(e, {}), **out.get(e, {})}.items())) for e in {*out, *subset}}


STREAMS = {"": "cll-clip", ", 36 languages": "cll36-clip"}   # floor-name suffix: the run whose test-set noise it reads


def floors(runs: Runs, n_test: int, spread: dict | None) -> dict[str, Noise]:
    """The noise floors: per cell ("AR in I2T[, 36 languages]") √2 × the `STREAMS` run's test-set SE joined by the
    subset's difference spread; "<cell>, seed spread", "<cell>, one run" and Fig. 3's: the spread alone."""
    metrics, where = (spread or {}).get("metrics") or {}, (spread or {}).get("where", "")
    out = {}
    for key, m in metrics.items():
        sds = ({key: m["difference_spread"]} if key in CONVERGENCE else
               {f"{key}, seed spread": m["difference_spread"], f"{key}, one run": m["pooled_std"]})
        out |= {k: Noise(float(sd), int(m["dof"]), f"seed spread of {where}") for k, sd in sds.items()}
    for suffix, exp in STREAMS.items():
        if not runs.get(exp):
            continue
        r = runs[exp][min(runs[exp])]
        for (s, d), metric in itertools.product(CELLS, ("AR", "F")):
            key = spread_key(metric, s, d)
            test, sp = math.sqrt(2) * value_se(r, n_test, s, d, metric)[1], metrics.get(key)
            out[key + suffix] = (Noise(test, None, f"test-set noise of {exp}") if sp is None else
                                 Noise(float(math.hypot(test, sp["difference_spread"])), int(sp["dof"]),
                                       f"test-set noise of {exp} + seed spread of {where}"))
    return out


@dataclass(frozen=True)
class Shifted(lg.Scale):
    """A `Scale` whose carried effect is moved by `by` (a non-inferiority margin in our units)."""
    by: float = 0.0

    def __call__(self, paper_effect: float) -> float | None:
        t = super().__call__(paper_effect)
        return None if t is None else t + self.by


def improves_without_forgetting_more(spec: ClaimSpec, runs: Runs, ctx: lg.Context) -> lg.Row:
    """Table 3 (6) vs (5): AR higher and F not higher by the margin `margin.share` (the paper's smallest credited F
    reduction, (a − b) / a) × `margin.of`'s F at its first seed (non-inferiority); not testable if it has F ≤ 0."""
    margin = spec.options.get("margin") or {}
    if not (of := margin.get("of")) or "share" not in margin:
        raise ValueError(f"claim {spec.id}: `margin: {{of, share: {{a, b}}}}` is missing")
    arms = sorted({e for c in spec.comparisons for e in (c.a, c.b) if e} | {of})
    if (absent := lg.unready(spec, runs, None, arms)) is not None:
        return absent
    where = f"claim {spec.id}: margin.share"
    share = paper_number(where, margin["share"]) / paper_number(f"{where}.a", margin["share"]["a"])
    out = []
    for c, plain in zip(spec.comparisons, lg.comparisons(spec, runs, None, None, None, ctx)):
        if c.measure.startswith("F "):
            f_ref = next(iter(values(runs, of, ctx.measures[c.measure]).values()))   # at its first seed
            if not f_ref > 0:
                return lg.not_testable(spec.id, f"{of} does not forget on {c.measure} (F {f_ref:.2f}): "
                                       "no scale for the margin")
            m, sc = share * f_ref, plain.scale
            plain = replace(plain, label=f"{plain.label} + margin {m:.2f}", a={s: v + m for s, v in plain.a.items()},
                            scale=Shifted(sc.paper_headroom, sc.headroom, f"{sc.how}; + margin {m:.2f}", sc.estimate,
                                          by=m))
        out.append(plain)
    return lg.greater(spec.id, out, depth=ctx.depth)


def lower_than_the_reference(spec: ClaimSpec, runs: Runs, ctx: lg.Context) -> lg.Row:
    """Fig. 3: every setting's value is lower than the reference's. The figure gives no numbers, so
    each effect (1) is in units of the row's floor σ_d; without that floor the effect is unknown."""
    floor = ctx.floors.get(spec.options.get("floor", ""))
    scale = (lg.Scale(1.0, floor.sd, f"σ_d {floor.sd:.3g} ({floor.source}) as the effect") if floor is not None
             else lg.Scale(1.0, None, "no seed spread measured: no σ_d to stand in for the effect"))
    return lg.unready(spec, runs, None) or lg.greater(
        spec.id, lg.comparisons(spec, runs, ctx.measures[spec.measure], scale, floor), depth=ctx.depth)


KINDS = MappingProxyType({"improves without forgetting more": improves_without_forgetting_more,
                          "lower than the reference": lower_than_the_reference})


def run_headline(r: dict) -> dict[str, float]:
    """`vlcp report metrics`' numbers of a language-stream run: in-domain T2I AR and F ({} else)."""
    if r.get("stream") != "language":
        return {}
    a = accuracy_matrix(r, "in_domain", "IR@1")
    return {k: v for k, v in {"AR": ar(a), "F": forgetting(a)}.items() if v is not None}


def run_curve(r: dict) -> list[float] | None:
    """`vlcp report metrics`' curve of a language-stream run: AR after every language."""
    return ar_curve(accuracy_matrix(r, "in_domain", "IR@1")).tolist() if r.get("stream") == "language" else None


def ledger(study: Study, params: dict, runs_dir, long: bool = False) -> list[lg.Row]:
    """CLL-CLIP's ledger on `ledger_runs`, its floors from plain CLL-CLIP's test-set noise and the spread."""
    from vlcp.config import resolve_experiment
    from vlcp.data.load import load_benchmark

    block = params["report"][study.params]
    seed, cfg = block["seeds"][0], block.get("spread") or {}
    seeds = list(dict.fromkeys([seed, *cfg.get("seeds", [])]))
    subset, missing = complete_subset(runs_dir, list(cfg.get("experiments", [])), seeds)
    runs = ledger_runs(runs_dir, block, long)
    items = load_benchmark(resolve_experiment(params, "cll-clip", seed).data).items
    n_test = sum(it["split"] == "test" for it in items)   # test emoji per language
    return lg.evaluate(study, runs, {}, calibrated=not stale_calibration(study, runs),
                       floors=floors(runs, n_test, None if missing else seed_spread(subset, seeds)))


def metric_sources(block: dict, params: dict) -> dict:
    """`vlcp report metrics`' curves: the 36-language stream's runs (Table 2)."""
    return {"experiments": [e for e in block.get("experiments", []) if e.startswith("cll36-")] or None}
