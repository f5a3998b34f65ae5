"""IncCLIP's tables and ledger measures from our runs (the notebook `incclip_ablations` lays them
out beside the paper's; the rows: `vlcp/report/studies/incclip/claims.yaml`). The paper's eight
classification sets and two retrieval sets stand in as the held-out suite's zero-shot sets
(`Evaluator.heldout`): unseen items, the unseen style, the procedural shapes and scenes."""
from __future__ import annotations

import dataclasses
import math
from types import MappingProxyType

import numpy as np
import pandas as pd

from vlcp.errors import VlcpError
from vlcp.eval.continual import bwt
from vlcp.report import stats as st
from vlcp.report.stats import Noise, runs_where, seed_spread, spread_frame  # noqa: F401  (ic.spread_frame)
from vlcp.report.targets import engineering_targets  # noqa: F401  (ic.engineering_targets)
from vlcp.report.ledger import Comparison, Context, Row, evaluate, greater, unready, comparisons as row_comparisons
from vlcp.report.results import MEASURES as GENERIC_MEASURES
from vlcp.report.results import complete, load_subset, long_reads, mean_frame, shown_frame  # noqa: F401  (notebook)
from vlcp.report.study import ClaimSpec, Runs, Study, load_runs, stale_calibration

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
    return {**row, "Average": float(np.mean(list(row.values())))}


def retrieval(r: dict, step: int = -1, ks=(1, 5, 10)) -> dict[tuple[str, str, str], float]:
    """{(set, "I2T"|"T2I", "R@k"): %} on the whole held-out sets after `step`."""
    cells = r["heldout"][step]["retrieval"]
    return {(name, d, f"R@{k}"): cells[key][f"{m}@{k}"] for key, name in RETRIEVAL_SETS.items()
            for d, m in (("I2T", "TR"), ("T2I", "IR")) for k in ks}


def curve(rs: list[dict], key: str = "Average") -> np.ndarray:
    """Mean over seeds of a classification column after every step (Fig. 3)."""
    return np.mean([[classification(r, i)[key] for i in range(len(r["heldout"]))] for r in rs], axis=0)


def chunk_bwt(r: dict, metric: str = "Rm", eval_set: str = "test") -> float:
    """Table 7's BWT: mean over chunks j < T of a[T][j] − a[j][j] (negative = forgetting)."""
    return bwt(np.asarray(r["matrix"][eval_set][metric], float))


def average(r: dict, step: int = -1) -> float:
    """The paper's "Average" column: mean zero-shot top-1 over the classification sets."""
    return classification(r, step)["Average"]


def r1_mean(r: dict, step: int = -1) -> float:
    """Mean R@1 over both retrieval sets and both directions."""
    return float(np.mean([v for (_, _, k), v in retrieval(r, step).items() if k == "R@1"]))


SPREAD_METRICS = {"average": average, "r1_mean": r1_mean, "bwt_rm": chunk_bwt}   # the ledger's metrics (BWT: of Rm)


def subset_seeds(main_seeds: list[int], spread_cfg: dict) -> list[int]:
    """The study's main seeds then `report.incclip.spread.seeds`, without repeats."""
    return list(dict.fromkeys([*main_seeds, *spread_cfg.get("seeds", [])]))


def spread(runs: dict[str, list[dict]], seeds: list[int]) -> dict:
    """`spread.seed_spread` of `SPREAD_METRICS` over the subset's runs at `seeds`, naming them."""
    values = {m: {exp: [fn(r) for r in rs] for exp, rs in runs.items()} for m, fn in SPREAD_METRICS.items()}
    return seed_spread(values, runs_where({e: seeds for e in runs})) | {"experiments": list(runs), "seeds": list(seeds)}


def subset_spread(runs_dir, study: dict) -> tuple[dict | None, dict[str, list[dict]], str]:
    """The seed subset (`study["spread"]`'s experiments at the main and its own seeds) under `runs_dir`: (its
    `spread`, None if a run is missing or none is set; its complete experiments' runs; a one-line note)."""
    cfg = study.get("spread") or {}
    if not (isinstance(cfg, dict) and all(isinstance(cfg.get(k, []), list) for k in ("experiments", "seeds"))):
        raise VlcpError(f"report.incclip.spread: expected {{experiments: [...], seeds: [...]}}, got {cfg!r}")
    fallback = (f"single-seed verdicts use `report.incclip.noise_floor` ({study.get('noise_floor')} points) "
                "for every metric")
    seeds = subset_seeds(study.get("seeds", []), cfg)
    if not cfg.get("experiments") or len(seeds) < 2:
        return None, {}, f"No seed subset set (`report.incclip.spread`): {fallback}."
    found, missing = load_subset(runs_dir, cfg["experiments"], seeds)
    found = complete(found, seeds)
    if missing:
        return None, found, (f"Seed subset incomplete in {runs_dir} (missing {', '.join(missing)}; "
                             f"stage run_incclip_seeds): {fallback}.")
    where = runs_where({e: seeds for e in found})
    return spread(found, seeds), found, f"Seed spread measured in this pipeline on {where}."


def noise_sds(spread: dict | None, fallback: float) -> dict[str, Noise]:
    """{metric: one single-seed difference's noise}: the subset's difference spread on its dof where `spread` has
    the metric, else `fallback` (report.incclip.noise_floor) as known."""
    def noise(d: dict | None) -> Noise:
        if d is None:
            return Noise(float(fallback), None, "report.incclip.noise_floor (seed subset not run)")
        return Noise(float(d["difference_spread"]), int(d["dof"]), f"{spread['source']}, Student's t on {d['dof']} dof")
    return {m: noise(((spread or {}).get("metrics") or {}).get(m)) for m in SPREAD_METRICS}


def sensitivity(runs: dict[str, list[dict]], reference: str, choices: list[dict],
                sds: dict[str, Noise]) -> pd.DataFrame:
    """Per open choice the paper leaves (`report.incclip.sensitivity`) that ran: Δ = alternative − ours of the
    final Average and mean R@1 beside its noise (`sds` / √seeds); |Δ| > 2 × noise "moves the result"."""
    ref, rows = runs[reference], []
    for c in (c for c in choices if runs.get(c["experiment"])):
        alt, moved = runs[c["experiment"]], False
        row = {"open choice": c["choice"], "ours": str(c["ours"]), "alternative": str(c["alternative"]),
               "experiment": c["experiment"]}
        for key, fn, label in (("average", average, "Average"), ("r1_mean", r1_mean, "mean R@1")):
            diff = float(np.mean([fn(r) for r in alt]) - np.mean([fn(r) for r in ref]))
            noise = sds[key].sd / np.sqrt(min(len(alt), len(ref)))
            row[f"Δ {label}"], row[f"noise {label}"] = diff, noise
            moved |= abs(diff) > 2 * noise
        rows.append(row | {"reading": "moves the result (|Δ| > 2 × noise)" if moved
                           else "within 2 × noise (not shown to be harmless)"})
    return pd.DataFrame(rows, columns=["open choice", "ours", "alternative", "experiment", "Δ Average",
                                       "noise Average", "Δ mean R@1", "noise mean R@1", "reading"])


# --------------------------------------------------------------------------- the claims ledger
# its measures: the spread's metrics and what a run forgets, −BWT of Rm (the BWT scale's headroom)
MEASURES = MappingProxyType({**SPREAD_METRICS, "bwt_forgetting": lambda r: -chunk_bwt(r)})


def gain_grows(spec: ClaimSpec, runs: Runs, ctx: Context) -> Row:
    """"The gain grows": the later gain (the mean of its comparisons per seed, and of their paper effects) > the
    earlier (`earlier`: its comparisons' labels, half of them); a single-run floor widens by √(1 + 1/k)."""
    def gain(cs: list[Comparison]) -> tuple[dict[int, float], float]:   # at the seeds all their arms share
        seeds = sorted(set.intersection(*(set(c.a) & set(c.b) for c in cs)))
        return ({s: float(np.mean([c.a[s] - c.b[s] for c in cs])) for s in seeds},
                float(np.mean([c.paper_effect for c in cs])))

    if (absent := unready(spec, runs, ctx.floors)) is not None:
        return absent
    floor = ctx.floors.get(spec.options.get("floor"))
    cs = row_comparisons(spec, runs, ctx.measures[spec.measure], ctx.scales[spec.scale], floor)
    earlier = set(spec.options.get("earlier") or ())
    before, after = [c for c in cs if c.label in earlier], [c for c in cs if c.label not in earlier]
    if not before or len(before) != len(after):
        raise VlcpError(f"claim {spec.id}: `earlier` must name half of its comparisons by label, got {sorted(earlier)}")
    (g0, p0), (g1, p1) = gain(before), gain(after)
    k = len(before)
    wide = floor and Noise(floor.sd * math.sqrt(1 + 1 / k), floor.dof, f"{floor.source}, × √(1 + 1/{k})")
    c = Comparison("later gain − earlier gain", g1, g0, p1 - p0, ctx.scales[spec.scale], wide)
    return dataclasses.replace(greater(spec.id, [c], depth=ctx.depth), kind=spec.kind)


def above_at_every_step(spec: ClaimSpec, runs: Runs, ctx: Context) -> Row:
    """"Above at every step" (Fig. 3): each comparison after every step from `from_step` (1-based)
    on, one `greater` row; the paper's final-step effect and the floor stand at every step."""
    if (absent := unready(spec, runs, ctx.floors)) is not None:
        return absent
    first, measure = int(spec.options.get("from_step", 1)), ctx.measures[spec.measure]
    floor, scale = ctx.floors.get(spec.options.get("floor")), ctx.scales[spec.scale]
    cs = []
    for c in spec.comparisons:
        last = min(len(r["heldout"]) for e in (c.a, c.b) for r in runs[e].values())
        for i in range(first - 1, last):
            one = dataclasses.replace(spec, comparisons=(dataclasses.replace(c, label=f"{c.label}, step {i + 1}"),))
            cs += row_comparisons(one, runs, lambda r, i=i: measure(r, i), scale, floor)
    return dataclasses.replace(greater(spec.id, cs, depth=ctx.depth), kind=spec.kind)


KINDS = MappingProxyType({"gain grows": gain_grows, "above at every step": above_at_every_step})


def ledger_runs(block: dict, runs_dir, seeds: list[int]) -> Runs:
    """The study's experiments at `seeds` and the subset's seeds, under `runs_dir` (one folder or more)."""
    return load_runs(runs_dir, block["experiments"], subset_seeds(seeds, block.get("spread") or {}))


def ledger(study: Study, params: dict, runs_dir, long: bool = False) -> list[Row]:
    """IncCLIP's ledger on `ledger_runs` (`long`: also at the long seeds), its floors `noise_sds`."""
    block = params["report"][study.params]
    spread_, _, _ = subset_spread(runs_dir, block)
    seeds, dirs = (long_reads(block, runs_dir, block["seeds"]) if long else (block["seeds"], runs_dir))
    runs = ledger_runs(block, dirs, seeds)
    return evaluate(study, runs, GENERIC_MEASURES, calibrated=not stale_calibration(study, runs),
                    floors=noise_sds(spread_, float(block.get("noise_floor", 0.0))))


def has_suite(r: dict) -> bool:
    return bool(r.get("heldout")) and "classification" in r["heldout"][-1]


def run_headline(r: dict) -> dict[str, float]:
    """`vlcp report metrics`' numbers of a run with a held-out suite: its zero-shot Average."""
    return {"Average": average(r)} if has_suite(r) else {}


def run_curve(r: dict) -> list[float] | None:
    """`vlcp report metrics`' curve of a run with a held-out suite: the Average after every step."""
    return curve([r]).tolist() if has_suite(r) else None


def metric_sources(block: dict, params: dict) -> dict:
    """`vlcp report metrics`' curves: the 4-step class split's methods (Table 1)."""
    return {"experiments": [f"ic4-{m}" for m in block.get("methods", [])] or None}
