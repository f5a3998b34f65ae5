"""IncCLIP's tables from our runs (pure functions of results dicts; the notebook
`incclip_ablations` lays them out beside the paper's numbers).

Our stand-ins for the paper's evaluation sets (held-out suite, `Evaluator.heldout`):
zero-shot classification (prompt ensembles) by subgroup and by group on the unseen items in the
training styles and on every item in the unseen style, by shape and colour on the procedural
shapes, and by object count and background on the procedural scenes — the paper's eight
classification sets; zero-shot retrieval on the unseen items (the
in-domain set, Flickr30K's role) and on the unseen style (out of domain, MSCOCO's role)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from vlcp.errors import VlcpError
from vlcp.eval.continual import bwt
from vlcp.report.claims import (Claim, Effect, claim_from, combine, effect, engineering_targets, runs_where,  # noqa: F401
                                all_equivalent, blocked_noise, calibration_mismatch, calibration_source, equivalence_level, equivalent_verdict, greater_verdict, measured_scale, Noise, pair_noise,
                                ordered_verdict, powered_at_depth, powered_equivalence, Scale, seed_spread, spread_frame, unresolved_pair)
from vlcp.report.paper import paper_table
from vlcp.report.results import complete, load_subset, mean_frame, shown_frame  # noqa: F401  (ic.mean_frame, ic.shown_frame)

CLASSIFICATION = {"test/subgroup": "subgroup (unseen items)", "test/group": "group (unseen items)",
                  "unseen_style/subgroup": "subgroup (unseen style)", "unseen_style/group": "group (unseen style)",
                  "shapes/shape": "shape (shapes)", "shapes/colour": "colour (shapes)",
                  "scenes/count": "count (scenes)", "scenes/background": "background (scenes)"}
RETRIEVAL_SETS = {"test": "unseen items", "unseen_style": "unseen style"}
HEADLINE = "test/subgroup"   # the ImageNet column's role: the classes the stream is cut by


def classification(r: dict, step: int = -1) -> dict[str, float]:
    """Zero-shot top-1 (%) per held-out set after `step`, plus their mean ("Average")."""
    acc = r["heldout"][step]["classification"]
    row = {name: acc[key] for key, name in CLASSIFICATION.items() if key in acc}
    row["Average"] = float(np.mean(list(row.values())))
    return row


def retrieval(r: dict, step: int = -1, ks=(1, 5, 10)) -> dict[tuple[str, str, str], float]:
    """{(set, "I2T"|"T2I", "R@k"): %} on the whole held-out sets after `step`."""
    out = {}
    for key, name in RETRIEVAL_SETS.items():
        cell = r["heldout"][step]["retrieval"][key]
        for k in ks:
            out[(name, "I2T", f"R@{k}")] = cell[f"TR@{k}"]
        for k in ks:
            out[(name, "T2I", f"R@{k}")] = cell[f"IR@{k}"]
    return out


def curve(rs: list[dict], key: str = "Average") -> np.ndarray:
    """Mean over seeds of a classification column after every step (Fig. 3)."""
    return np.mean([[classification(r, i)[key] for i in range(len(r["heldout"]))] for r in rs], axis=0)


def chunk_bwt(r: dict, metric: str = "Rm", eval_set: str = "test") -> float:
    """The paper's BWT (Table 7): mean over chunks j < T of a[T][j] - a[j][j], a[i][j] = the
    score of the model after step i on chunk j's held-out items (negative = forgetting)."""
    return bwt(np.asarray(r["matrix"][eval_set][metric], float))


# ----------------------------------------------------------------------------------------------
# the claims ledger: every verdict from vlcp.report.claims (values: {experiment: [value per seed]};
# `sd`, `sd_source`, `sd_dof` of the claim functions: a metric's `Noise`, from `noise_sds`)

def average(r: dict, step: int = -1) -> float:
    """The paper's "Average" column: mean zero-shot top-1 over the held-out classification sets."""
    return classification(r, step)["Average"]


def r1_mean(r: dict, step: int = -1) -> float:
    """Mean R@1 over both retrieval sets and both directions."""
    return float(np.mean([v for (_, _, k), v in retrieval(r, step).items() if k == "R@1"]))


def bwt_rm(r: dict) -> float:
    """Table 7's BWT of Rm on each chunk's unseen items (the ledger's forgetting claim)."""
    return chunk_bwt(r, "Rm", "test")


SPREAD_METRICS = {"average": average, "r1_mean": r1_mean, "bwt_rm": bwt_rm}   # the ledger's metrics


def seed_blocks(runs: dict[str, list[dict]], where: str = "") -> dict:
    """Per ledger metric (`SPREAD_METRICS`): the runs' seeds as blocks (`claims.blocked_noise` over
    every experiment run at common seeds; {experiment: [results]}, a result's seed its "seed", else its
    position), or None where no three experiments share two seeds: the noise of a comparison paired by seed."""
    return {m: blocked_noise({e: per_seed(rs, fn) for e, rs in runs.items()}, where) for m, fn in SPREAD_METRICS.items()}


def per_seed(rs: list[dict], fn) -> dict:
    """{seed: fn(result)} over one experiment's results (a result's seed its "seed", else its position)."""
    return {r.get("seed", i): fn(r) for i, r in enumerate(rs)}


def subset_seeds(main_seeds: list[int], spread_cfg: dict) -> list[int]:
    """The seed subset's seeds: the study's main seed(s) (the runs every table reads, stage
    run_incclip) then `report.incclip.spread.seeds` (stage run_incclip_seeds), without repeats."""
    return list(dict.fromkeys([*main_seeds, *spread_cfg.get("seeds", [])]))


def spread(runs: dict[str, list[dict]], seeds: list[int]) -> dict:
    """The study's seed spread (`claims.seed_spread`) of the ledger's metrics (`SPREAD_METRICS`)
    from the seed subset's runs ({experiment: [results of each of `seeds`]}), with the
    `experiments` and `seeds` it was measured on."""
    values = {m: {exp: [fn(r) for r in rs] for exp, rs in runs.items()} for m, fn in SPREAD_METRICS.items()}
    return seed_spread(values, runs_where({e: seeds for e in runs})) | {"experiments": list(runs), "seeds": list(seeds)}


def subset_spread(runs_dir, study: dict) -> tuple[dict | None, dict[str, list[dict]], str]:
    """The seed subset of the study (`study["spread"]`: its `experiments`, run at the main
    `study["seeds"]` and at `seeds`), read from `runs_dir` by `find_run`: the main seeds' runs at
    `<runs_dir>/stream-seed<S>/<experiment>/seed<S>/results.json` (stage run_incclip, one process
    per seed running the study's list), the spread seeds' at
    `<runs_dir>/spread-seed<S>/<experiment>/seed<S>/results.json` (stage run_incclip_seeds).
    Returns (its `spread`, or None when a subset run is missing or no subset is set; the subset's
    runs {experiment: [results per seed]}, complete experiments only; a one-line note naming the
    runs and seeds measured, or what is missing and the fallback, `report.incclip.noise_floor`)."""
    cfg = study.get("spread") or {}
    if not (isinstance(cfg, dict) and isinstance(cfg.get("experiments", []), list) and isinstance(cfg.get("seeds", []), list)):
        raise VlcpError(f"report.incclip.spread: expected {{experiments: [...], seeds: [...]}}, got {cfg!r}")
    fallback = f"single-seed verdicts use `report.incclip.noise_floor` ({study.get('noise_floor')} points) for every metric"
    seeds = subset_seeds(study.get("seeds", []), cfg)
    if not cfg.get("experiments") or len(seeds) < 2:
        return None, {}, f"No seed subset set (`report.incclip.spread`): {fallback}."
    found, missing = load_subset(runs_dir, cfg["experiments"], seeds)
    found = complete(found, seeds)
    if missing:
        return None, found, (f"Seed subset incomplete in {runs_dir} (missing {', '.join(missing)}; "
                             f"stage run_incclip_seeds): {fallback}.")
    return spread(found, seeds), found, f"Seed spread measured in this pipeline on {runs_where({e: seeds for e in found})}."


def noise_sds(spread: dict | None, fallback: float) -> dict[str, Noise]:
    """{metric: Noise(sd of ONE single-seed difference, its source, its dof)} for "average",
    "r1_mean" and "bwt_rm": the difference spread (√2 × the pooled seed std) of the study's seed
    subset where `spread` (`spread`'s dict) has the metric, its source naming the runs, seeds and
    degrees of freedom, dof = the spread's; else `fallback` (report.incclip.noise_floor), dof None."""
    out = {}
    for m in SPREAD_METRICS:
        if spread and m in spread.get("metrics", {}):
            d = spread["metrics"][m]
            out[m] = Noise(float(d["difference_spread"]), f"{spread['source']}, Student's t on {d['dof']} dof",
                           int(d["dof"]))
        else:
            out[m] = Noise(float(fallback), "report.incclip.noise_floor (seed subset not run)", None)
    return out


def sensitivity(runs: dict[str, list[dict]], reference: str, choices: list[dict],
                sds: dict[str, Noise]) -> pd.DataFrame:
    """The result's sensitivity to the choices the paper leaves open (`report.incclip.sensitivity`,
    the Deviations table's "open choice" rows): per choice (`choice`, `ours`, `alternative`, the
    alternative's `experiment`), Δ = alternative − ours of the final Average and mean R@1 (means over
    each arm's seeds) beside its noise (`sds`, the sd of one single-seed difference, divided by
    √seeds) and a reading: |Δ| > 2 × noise on either metric "moves the result"; else "within 2 ×
    noise", which is not evidence that the choice does not matter. Choices whose runs are absent
    are left out."""
    ref = runs[reference]
    rows = []
    for c in choices:
        alt = runs.get(c["experiment"])
        if not alt:
            continue
        row = {"open choice": c["choice"], "ours": str(c["ours"]), "alternative": str(c["alternative"]),
               "experiment": c["experiment"]}
        moved = False
        for key, fn, label in (("average", average, "Average"), ("r1_mean", r1_mean, "mean R@1")):
            diff = float(np.mean([fn(r) for r in alt]) - np.mean([fn(r) for r in ref]))
            noise = sds[key][0] / np.sqrt(min(len(alt), len(ref)))
            row[f"Δ {label}"], row[f"noise {label}"] = diff, noise
            moved |= abs(diff) > 2 * noise
        row["reading"] = "moves the result (|Δ| > 2 × noise)" if moved else "within 2 × noise (not shown to be harmless)"
        rows.append(row)
    return pd.DataFrame(rows, columns=["open choice", "ours", "alternative", "experiment", "Δ Average", "noise Average",
                                       "Δ mean R@1", "noise mean R@1", "reading"])


# ----------------------------------------------------------------------------------------------
# power (issue 48): the paper's effects, carried to our headroom by one rule (`claims.Scale`): an
# effect's share of the paper's Joint − ER on the claim's metric, times our Joint − ER on it
# (BWT: ER's forgetting, −BWT(ER), the distance to a model that forgets nothing). The paper's Joint
# is its upper bound and ER its plainest baseline (Tables 1, 2, 6, 7; naive fine-tuning has no
# numbers, Fig. 1 only). Ours is fixed on calibration seeds (`report.incclip.power.headroom`).

R1_COLUMNS = ["Flickr30K I2T", "Flickr30K T2I", "MSCOCO I2T", "MSCOCO T2I"]   # the R@1 columns of Tables 3 and 6 (Table 2: "... R@1")


def paper_scores(metric: str, split: str = "ic4") -> dict[str, float]:
    """The paper's final value per method (joint, er, ucir, geodl, co2l, incclip) of a ledger metric
    (`SPREAD_METRICS`) on one of our splits: "average" (Table 1's Average at 4 / 8 steps, Table 6's
    for the instance split), "r1_mean" (the mean of the four R@1 columns, Table 2 / Table 6),
    "bwt_rm" (Table 7, the 4-step class split, no joint row)."""
    if metric == "bwt_rm":
        if split != "ic4":
            raise VlcpError(f"paper_scores: the paper's BWT (Table 7) is for the 4-step class split, not {split!r}")
        t = paper_table("incclip_table7")
        return {str(m): float(v) for m, v in zip(t["method"], t["BWT"])}
    if split == "ici":
        t = paper_table("incclip_table6").set_index("method")
        cols = ["Average"] if metric == "average" else R1_COLUMNS
    else:
        steps = {"ic4": "4", "ic8": "8"}.get(split)
        if steps is None:
            raise VlcpError(f"paper_scores: unknown split {split!r}; known: ic4, ic8, ici")
        t = paper_table("incclip_table1" if metric == "average" else "incclip_table2")
        t = t[t["steps"].astype(str).isin([steps, "joint"])].set_index("method")
        cols = ["Average"] if metric == "average" else [f"{c} R@1" for c in R1_COLUMNS]
    if metric not in ("average", "r1_mean"):
        raise VlcpError(f"paper_scores: unknown metric {metric!r}; known: {', '.join(SPREAD_METRICS)}")
    return {str(m): float(np.mean([float(row[c]) for c in cols])) for m, row in t.iterrows()}


def paper_headroom(metric: str, split: str = "ic4") -> float:
    """The paper's headroom on `metric`: Joint − ER (bwt_rm: −BWT(ER), Table 7)."""
    p = paper_scores(metric, split)
    return -p["er"] if metric == "bwt_rm" else p["joint"] - p["er"]


def paper_ablation(metric: str) -> dict[str, float]:
    """Table 3's rows (and ER's from Tables 1-2, 4 steps) as our experiments: "average" reads the
    ImageNet column (Table 3 gives no Average), "r1_mean" the mean of its four R@1 columns."""
    t = paper_table("incclip_table3")
    names = {("yes", "no", "no"): "ic4-incclip-wnc", ("yes", "yes", "no"): "ic4-incclip-wnc-kd",
             ("yes", "yes", "yes"): "ic4-incclip"}
    cols = ["ImageNet"] if metric == "average" else R1_COLUMNS
    out = {names[(r["wnc"], r["dist"], r["hntg"])]: float(np.mean([float(r[c]) for c in cols])) for _, r in t.iterrows()}
    if metric == "average":
        t1 = paper_table("incclip_table1")
        out["ic4-er"] = float(t1.loc[(t1["steps"].astype(str) == "4") & (t1["method"] == "er"), "ImageNet"].iloc[0])
    else:
        out["ic4-er"] = paper_scores("r1_mean", "ic4")["er"]
    return out


def paper_ablation_headroom(metric: str) -> float:
    """Joint − ER at 4 steps on Table 3's columns (ImageNet; mean R@1)."""
    if metric != "average":
        return paper_headroom(metric, "ic4")
    t1 = paper_table("incclip_table1").set_index("method")
    return float(t1.loc["joint", "ImageNet"]) - float(t1[t1["steps"].astype(str) == "4"].loc["er", "ImageNet"])


def paper_memory() -> dict[int, float]:
    """Tables 4-5: the Average at each memory size (% of the data), 4 steps."""
    t = paper_table("incclip_table4_5")
    return {int(p): float(v) for p, v in zip(t["memory_pct"], t["Average"])}


def measured_headroom(metric: str, upper: list[dict], lower: list[dict]) -> float:
    """Our headroom on `metric` from runs of Joint (`upper`) and ER (`lower`): the difference of
    their means (bwt_rm: −BWT of ER)."""
    fn = SPREAD_METRICS[metric]
    if metric == "bwt_rm":
        return -float(np.mean([fn(r) for r in lower]))
    return float(np.mean([fn(r) for r in upper]) - np.mean([fn(r) for r in lower]))


def study_scales(study: dict, runs: dict[str, list[dict]], unresolved: str | None = None) -> dict[str, Scale]:
    """The ledger's `Scale` per metric (`SPREAD_METRICS`): our headroom from
    `report.incclip.power.headroom` ({metric: value}, fixed on calibration seeds before the
    ledger's runs, where its `calibrated_on` matches these runs: `claims.calibration_mismatch`),
    else measured on this ledger's own ic4-joint and ic4-er runs (the scale says so, and why;
    carried to 0 where `unresolved`, `claims.unresolved_headroom` of the power table, says these
    runs do not resolve their headroom, or where Joint − ER itself does not: `claims.unresolved_pair`,
    the power table's pair being Joint − naive fine-tuning); a metric with neither is left out (its
    claims keep the older verdicts)."""
    cfg = study.get("power") or {}
    fixed = cfg.get("headroom") or {}
    if not isinstance(fixed, dict):
        raise VlcpError(f"report.incclip.power.headroom: expected {{metric: value}}, got {fixed!r}")
    out = {}
    stale = calibration_mismatch(cfg, runs, "report.incclip.power")
    for m in SPREAD_METRICS:
        if m in fixed and not stale:
            out[m] = Scale(float(fixed[m]), paper_headroom(m), calibration_source(cfg, "report.incclip.power"))
        elif runs.get("ic4-joint") and runs.get("ic4-er"):
            h = measured_headroom(m, runs["ic4-joint"], runs["ic4-er"])
            out[m] = measured_scale(h, paper_headroom(m), f"measured on this ledger's own ic4-joint and ic4-er runs: "
                                    f"{stale or 'report.incclip.power sets none'}",
                                    unresolved or unresolved_pair(h, headroom_noise(m, runs["ic4-joint"], runs["ic4-er"]),
                                                                  "ER's −BWT" if m == "bwt_rm" else f"Joint − ER on {m}"))
    return out


def headroom_noise(metric: str, upper: list[dict], lower: list[dict]) -> Noise | None:
    """The noise of one run of `measured_headroom`'s pair (`claims.pair_noise`): Joint − ER paired
    by seed (bwt_rm: ER's −BWT, its seed sd)."""
    fn = SPREAD_METRICS[metric]
    if metric == "bwt_rm":
        return pair_noise(per_seed(lower, lambda r: -fn(r)))
    return pair_noise(per_seed(upper, fn), per_seed(lower, fn))


def fmt(v: list[float]) -> str:
    return f"{np.mean(v):.1f}" + (f" ± {np.std(v, ddof=1):.1f}" if len(v) > 1 else "")


def _weakest(effects: list[Effect]) -> Effect:
    """The check closest to failing "greater" (lowest interval end): the claim's shown effect."""
    return min(effects, key=lambda e: (e.low, e.diff))


def _cite(paper: dict, winner: str, others: list[str], where: str) -> str:
    return f"{where}: {winner} {paper[winner]:.2f}; " + ", ".join(f"{o} {paper[o]:.2f}" for o in others)


def beats_all(claim: str, values: dict[str, list[float]], winner: str, others: list[str],
              sd: float | None, sd_source: str, source: str, *, sd_dof: int | None = None,
              paper: dict[str, float] | None = None, scale: Scale | None = None, block: Noise | None = None) -> Claim:
    """"`winner` > each of `others`". With the paper's values (`paper`: {method: value}) and
    `scale`: judged against the paper's effects carried to our headroom (`claims.powered`, every
    rival at once); without them greater_verdict per rival, combined. The effect shown is the
    closest rival's. `sd`, `sd_source`, `sd_dof`: a `Noise` (single-seed comparisons); `block`: the
    seeds as blocks (`seed_blocks`) for comparisons paired by seed."""
    ev = f"{winner} {fmt(values[winner])}; " + ", ".join(f"{o} {fmt(values[o])}" for o in others)
    if paper is not None and scale is not None:
        return powered_at_depth(claim, [(values[winner], values[o]) for o in others], [paper[winner] - paper[o] for o in others],
                      scale, _cite(paper, winner, others, source), labels=[f"vs {o}" for o in others], evidence=ev,
                      source=source, sd=sd, sd_source=sd_source, sd_dof=sd_dof, block=block)
    effects = [effect(values[winner], values[o], sd=sd, sd_source=sd_source, sd_dof=sd_dof, block=block) for o in others]
    return claim_from(claim, combine([greater_verdict(e) for e in effects]), _weakest(effects), ev, source)


def greater_claim(claim: str, a: list[float], b: list[float], sd: float | None, sd_source: str,
                  source: str, names: tuple[str, str] = ("a", "b"), *, sd_dof: int | None = None,
                  paper: tuple[float, str] | None = None, scale: Scale | None = None, block: Noise | None = None) -> Claim:
    """"a > b": with `paper` (the paper's a − b, and where it comes from) and `scale`, by
    `claims.powered` against it carried to our headroom; else by greater_verdict. `block`: as in
    `beats_all`, for two experiments' values paired by seed."""
    ev = f"{names[0]} {fmt(a)}, {names[1]} {fmt(b)}"
    if paper is not None and scale is not None:
        return powered_at_depth(claim, [(a, b)], [paper[0]], scale, paper[1], labels=None, evidence=ev, source=source,
                      sd=sd, sd_source=sd_source, sd_dof=sd_dof, block=block)
    e = effect(a, b, sd=sd, sd_source=sd_source, sd_dof=sd_dof, block=block)
    return claim_from(claim, greater_verdict(e), e, ev, source)


def gains(values: dict[str, list[float]], winner: str, others: list[str]) -> list[float]:
    """Per seed: `winner` − the mean of `others` (seed i of every list is the same seed)."""
    return [float(values[winner][i] - np.mean([values[o][i] for o in others])) for i in range(len(values[winner]))]


def gain_grows(values4: dict[str, list[float]], values8: dict[str, list[float]], winner: str, others: list[str],
               sd: float | None, sd_source: str, *, sd_dof: int | None = None,
               paper: tuple[dict[str, float], dict[str, float]] | None = None, scale: Scale | None = None) -> Claim:
    """§4.2.1 "when the number of steps increases, the average gain from our method increases":
    gain(8 steps) > gain(4 steps), gain = IncCLIP − the baselines' mean. One run each: a gain has
    (1 + 1/#baselines) × one run's variance, so the sd of a difference of gains is
    sd × √(1 + 1/#baselines) (on the same `sd_dof`: a scaled estimate keeps its dof)."""
    g4, g8 = gains(values4, winner, others), gains(values8, winner, others)
    k = np.sqrt(1 + 1 / len(others))
    text, ev = ("IncCLIP's average gain over the baselines grows from 4 to 8 steps",
                f"gain at 4 steps {np.mean(g4):+.1f}, at 8 steps {np.mean(g8):+.1f} (Average)")
    sd_k, src_k = None if sd is None else sd * k, f"{sd_source}, × √(1 + 1/{len(others)})"
    if paper is not None and scale is not None:   # (the paper's values at 4 steps, at 8 steps)
        p4, p8 = (float(p[winner] - np.mean([p[o] for o in others])) for p in paper)
        return powered_at_depth(text, [(g8, g4)], [p8 - p4], scale,
                      f"Table 1: gain {p4:+.2f} at 4 steps, {p8:+.2f} at 8", labels=None, evidence=ev,
                      source="§4.2.1, Table 1", sd=sd_k, sd_source=src_k, sd_dof=sd_dof)
    e = effect(g8, g4, sd=sd_k, sd_source=src_k, sd_dof=sd_dof)
    return claim_from(text, greater_verdict(e), e, ev, "§4.2.1, Table 1")


def slight_margin(table1: pd.DataFrame, methods=("ucir", "co2l"), reference: str = "er") -> tuple[float, str]:
    """"Slightly", from the paper's Table 1: the largest gain of `methods` over `reference` in
    Average, relative to the reference's Average, over the 4- and 8-step rows (Co2L at 8 steps:
    (12.62 − 11.02) / 11.02 = 14.5 %). Returns (relative margin, how it was found)."""
    rel, _, how = _largest_gain(table1, methods, reference)
    return rel, how


def slight_gain(table1: pd.DataFrame, methods=("ucir", "co2l"), reference: str = "er") -> tuple[float, str]:
    """`slight_margin`'s gain in the paper's Average points (12.62 − 11.02 = 1.60), for `Scale`."""
    _, points, how = _largest_gain(table1, methods, reference)
    return points, how


def _largest_gain(table1, methods, reference) -> tuple[float, float, str]:
    t = table1[table1["steps"].astype(str) != "joint"]
    best, points, where = -np.inf, 0.0, ""
    for steps, rows in t.groupby(t["steps"].astype(str)):
        ref = float(rows.loc[rows["method"] == reference, "Average"].iloc[0])
        for m in methods:
            gain = float(rows.loc[rows["method"] == m, "Average"].iloc[0]) - ref
            if gain / ref > best:
                best, points, where = gain / ref, gain, f"{m} at {steps} steps"
    return float(best), points, (f"the paper's largest {'/'.join(methods)} gain over {reference} in Table 1's Average "
                                 f"({where}: {points:.2f} points, {best:.1%} of {reference}'s)")


def slightly_better(values_by_split: dict[str, dict[str, list[float]]], methods: list[str], reference: str,
                    margin_rel: float, margin_how: str, sd: float | None, sd_source: str, *,
                    sd_dof: int | None = None, scale: Scale | None = None, paper_gain: float | None = None) -> Claim:
    """§4.2.1 "UCIR, Co2L are better than ER, [but] the improvement is limited": per split and
    method, |method − ER| < margin (two one-sided tests). The claim's direction ("better") shows in
    the effects' sign. With `scale` and the paper's largest gain (`paper_gain`, `slight_gain`'s
    points): margin = that gain carried to our headroom, every comparison at once by
    `claims.powered_equivalence` (`all_equivalent`; paired by seed where both sides have the
    subset's seeds, else one run each on `sd`, exploratory). Else margin = `margin_rel` × ER's
    Average in our run, equivalent_verdict each, combined."""
    if scale is not None and paper_gain is not None:
        margin = scale(paper_gain)
        k = sum(len(methods) for _ in values_by_split)
        text = "UCIR and Co2L are only slightly better than ER (within " + (
            f"±{margin:.2f} Average points, the paper's largest gain scaled)" if scale.unresolved is None
            else "the paper's largest gain scaled, a margin unknown here: its headroom is not resolved)")
        rows, parts = [], []
        level = round(100 * equivalence_level(margin, k, scale.unresolved), 1)
        for split, vals in values_by_split.items():
            for m in methods:
                single = min(len(vals[m]), len(vals[reference])) < 2
                kw = dict(sd=sd, sd_source=sd_source, sd_dof=sd_dof) if single else {}
                r = powered_equivalence(text, vals[m], vals[reference], margin,
                                        paper=f"§4.2.1, Table 1: {margin_how}; scaled {scale.cite()}",
                                        evidence=f"{split} {m} − {reference}", source="§4.2.1, Table 1",
                                        exploratory=single, comparisons=k, unknown_margin=scale.unresolved, **kw)
                rows.append(r)
                parts.append(f"{split} {m} − {reference} {r.effect:+.2f} ({level:g} % [{r.low:+.2f}, {r.high:+.2f}], "
                             f"{r.seeds} seed{'s' if r.seeds > 1 else ''}): {r.verdict}")
        worst = all_equivalent(text, rows)
        return dataclasses.replace(worst, evidence=f"{k} equivalences, all must hold: " + "; ".join(parts)
                                   + f"; the deciding one: {worst.evidence}")
    verdicts, effects, ev = [], [], []
    for split, vals in values_by_split.items():
        margin = margin_rel * float(np.mean(vals[reference]))
        for m in methods:
            v, e = equivalent_verdict(vals[m], vals[reference], margin, sd=sd, sd_source=sd_source, sd_dof=sd_dof)
            verdicts.append(v)
            effects.append(e)
            ev.append(f"{split} {m} − {reference} {e.diff:+.1f} (90 % [{e.low:+.1f}, {e.high:+.1f}], margin ±{margin:.1f})")
    shown = max(effects, key=lambda e: max(abs(e.low), abs(e.high)))
    return claim_from(f"UCIR and Co2L are only slightly better than ER (within ±{margin_rel:.1%} of ER's Average)",
                      combine(verdicts), shown, f"margin: {margin_how}; " + "; ".join(ev), "§4.2.1, Table 1")


def ordered_claim(claim: str, values: dict[str, list[float]], order: list[str], sd: float | None,
                  sd_source: str, source: str, *, sd_dof: int | None = None,
                  paper: dict[str, float] | None = None, scale: Scale | None = None) -> Claim:
    """"order[0] > order[1] > ...": with the paper's values (`paper`, keyed as `values`) and
    `scale`, every adjacent pair at once by `claims.powered` against the paper's steps carried to
    our headroom; else by ordered_verdict. The effect shown is the weakest link."""
    ev = ", ".join(f"{k} {fmt(values[k])}" for k in order)
    if paper is not None and scale is not None:
        links = list(zip(order, order[1:]))
        return powered_at_depth(claim, [(values[a], values[b]) for a, b in links], [paper[a] - paper[b] for a, b in links],
                      scale, f"{source}: " + ", ".join(f"{k} {paper[k]:.2f}" for k in order),
                      labels=[f"{a} > {b}" for a, b in links], evidence=ev, source=source, sd=sd,
                      sd_source=sd_source, sd_dof=sd_dof)
    verdict, effects = ordered_verdict(values, order, sd=sd, sd_source=sd_source, sd_dof=sd_dof)
    return claim_from(claim, verdict, _weakest(effects), ev, source)


def step_values(rs: list[dict], fn=average) -> list[list[float]]:
    """[seed][step] of fn(r, step) after every step."""
    return [[fn(r, i) for i in range(len(r["heldout"]))] for r in rs]


def above_at_every_step(curves: dict[str, dict[str, list[list[float]]]], winner: str, others: list[str],
                        sd: float | None, sd_source: str, first: int = 1, *, sd_dof: int | None = None,
                        paper: dict[str, dict[str, float]] | None = None, scale: Scale | None = None) -> Claim:
    """Fig. 3 / §4.2.1 "our method consistently outperforms the comparison methods at different
    steps": `curves` {split: {method: [seed][step]}}; `winner` over each rival after every step
    from `first` (0-based; step 1 is left out by default: before any replay or previous model the
    methods train alike). With `paper` ({split: {method: the paper's final value}}: Fig. 3 gives no
    numbers, so the final step's effect of Table 1 stands in at every step) and `scale`: every
    comparison at once by `claims.powered` (an intersection-union test whose power accounts for
    their number); else greater_verdict per comparison, combined."""
    pairs, labels, targets, ev = [], [], [], []
    for split, c in curves.items():
        steps = range(first, len(c[winner][0]))
        for o in others:
            for i in steps:
                pairs.append(([s[i] for s in c[winner]], [s[i] for s in c[o]]))
                labels.append(f"{split} step {i + 1} vs {o}")
                targets.append(paper[split][winner] - paper[split][o] if paper is not None else 0.0)
            ev.append(f"{split} vs {o}: " + " ".join(f"{np.mean(pairs[j][0]) - np.mean(pairs[j][1]):+.1f}"
                                                      for j in range(len(pairs) - len(steps), len(pairs))))
    text, evidence = ("IncCLIP stays above every baseline after every step (Average)",
                      f"per step from step {first + 1}: " + "; ".join(ev))
    if paper is not None and scale is not None:
        cite = "Table 1 (Fig. 3 has no numbers: the final step's effect at every step): " + "; ".join(
            f"{split} {winner} {p[winner]:.2f} vs " + ", ".join(f"{o} {p[o]:.2f}" for o in others) for split, p in paper.items())
        return powered_at_depth(text, pairs, targets, scale, cite, labels=labels, evidence=evidence, source="Fig. 3, §4.2.1",
                      sd=sd, sd_source=sd_source, sd_dof=sd_dof)
    effects = [effect(a, b, sd=sd, sd_source=sd_source, sd_dof=sd_dof) for a, b in pairs]
    return claim_from(text, combine([greater_verdict(e) for e in effects]), _weakest(effects), evidence, "Fig. 3, §4.2.1")


def metric_sources(block: dict, params: dict) -> dict:
    """`vlcp report metrics`' curves: the 4-step class split's methods (Table 1)."""
    return {"experiments": [f"ic4-{m}" for m in block.get("methods", [])] or None}
