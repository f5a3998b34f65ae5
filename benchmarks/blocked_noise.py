"""What pooling the seed noise would buy (issue 48): a repro's runs at several seeds, read two ways.

    .venv/bin/python benchmarks/blocked_noise.py /path/to/a/repro [--long]

For each study's runs at several seeds (the spine's three experiments, CTP's Table 1, the seed
subsets of IncCLIP, CLL-CLIP and FoMo-in-Flux; with `--long`, every row the long profile ran at
its seeds too), on the study's headline metric and its candidates (`power_levers.STUDIES`, `MORE`):

- **today**: a comparison paired by seed reads its own spread, the sd of its n per-seed
  differences on n − 1 degrees of freedom (the median over every pair of experiments, and the range);
  a single-seed comparison reads √2 × the pooled seed std (`spread.seed_spread`);
- **seeds as blocks**: `spread.block_spread`, value = experiment + seed + residual, the residual
  pooled over every experiment on (E − 1)(S − 1) degrees of freedom; √2 σ is the sd of one
  difference at a common seed;

and the MDE of one comparison paired at the study's seeds under each (`stats.mde`). Nothing here
changes a ledger: it measures a rule before any ledger adopts it. Writes
benchmarks/results/blocked_noise.json (`--long`: blocked_noise_long.json) with provenance.
"""
from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from vlcp.config import load_params  # noqa: E402
from vlcp.report import stats as st  # noqa: E402
from vlcp.report.stats import block_spread, seed_spread  # noqa: E402
from vlcp.report.results import find_run  # noqa: E402
from vlcp.utils import read_json, write_json  # noqa: E402

from common import provenance  # noqa: E402  (benchmarks/common.py)
from power_levers import MORE, STUDIES  # noqa: E402


def _fomo_gm(r: dict) -> float:
    from vlcp.report.fomo import endpoint
    return endpoint(r)["GM"]


METRICS = {study: {STUDIES[study][2]: STUDIES[study][3], **MORE.get(study, {})} for study in STUDIES}
METRICS["fomo"]["GM"] = _fomo_gm          # the main claims' metric (endpoint GM)


def study_runs(params: dict, long: bool) -> dict[str, tuple[list[str], list[str], list[int]]]:
    """{study: (its runs folders, its experiments, their seeds)}: the runs each ledger pairs by seed."""
    r = params["report"]
    out = {"spine": (["runs"], r["overview"]["experiments"], params["seeds"]),
           "ctp": (["runs-ctp"], r["ctp"]["experiments"], r["ctp"]["seeds"])}
    for study, seed in (("incclip", r["incclip"]["seeds"][0]), ("cllclip", r["cllclip"]["seeds"][0]), ("fomo", r["fomo"]["seed"])):
        runs_dir, sp = f"runs-{study}", r[study]["spread"]
        out[study] = ([runs_dir], sp["experiments"], [seed, *sp["seeds"]])
        if long:
            lg = r[study]["long"]
            exps = r[study]["experiments"] if study != "fomo" else [e for es in r["fomo"]["studies"].values() for e in es]
            out[study] = ([runs_dir, lg["runs"]], list(dict.fromkeys(exps)), list(dict.fromkeys([seed, *lg["seeds"]])))
    return out


def load(root: Path, dirs: list[str], experiments: list[str], seeds: list[int]) -> dict[str, list[dict]]:
    """Every experiment found at every one of `seeds` ({experiment: [results per seed]}); the rest left out."""
    out = {}
    for e in experiments:
        paths = [find_run([root / d for d in dirs], e, s) for s in seeds]
        if all(paths):
            out[e] = [read_json(p) for p in paths]
    return out


def measure(values: dict[str, list[float]]) -> dict:
    """Today's sds and the blocked one, with the MDE of one paired comparison at these seeds."""
    n = len(next(iter(values.values())))
    own = [float(np.std(np.subtract(values[a], values[b]), ddof=1)) for a, b in itertools.combinations(values, 2)]
    blocked = block_spread(values)
    single = seed_spread({"m": values}, "")["metrics"]["m"]
    today = float(np.median(own))
    return {"experiments": len(values), "seeds": n,
            "paired_own_sd": {"median": today, "min": min(own), "max": max(own), "dof": n - 1},
            "single_seed_sd": {"sd": single["difference_spread"], "dof": single["dof"]},
            "blocked_sd": {"sd": blocked["difference_spread"], "dof": blocked["dof"]},
            "mde_paired_today": st.mde(today, n, n - 1),
            "mde_paired_blocked": st.mde(blocked["difference_spread"], n, blocked["dof"])}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("repro", type=Path, help="a repro's folder (its params.yaml and runs folders)")
    ap.add_argument("--long", action="store_true", help="also the long profile's runs at its seeds")
    args = ap.parse_args(argv)
    params = load_params(args.repro / "params.yaml")
    rows = {}
    for study, (dirs, experiments, seeds) in study_runs(params, args.long).items():
        runs = load(args.repro, dirs, experiments, seeds)
        if len(runs) < 2:
            print(f"{study}: fewer than two experiments at seeds {seeds} under {dirs}; skipped")
            continue
        for metric, value in METRICS[study].items():
            row = measure({e: [value(r) for r in rs] for e, rs in runs.items()})
            rows[f"{study}: {metric}"] = {"study": study, "metric": metric, "runs": dirs, "seeds_used": seeds, **row}
            print(f"{study:8s} {metric:34s} E={row['experiments']:2d} n={row['seeds']} "
                  f"paired own sd {row['paired_own_sd']['median']:.2f} ({row['seeds'] - 1} dof) "
                  f"blocked {row['blocked_sd']['sd']:.2f} ({row['blocked_sd']['dof']} dof) "
                  f"single-seed {row['single_seed_sd']['sd']:.2f} | MDE paired {row['mde_paired_today']:.2f} -> "
                  f"{row['mde_paired_blocked']:.2f}")
    out = ROOT / "benchmarks" / "results" / ("blocked_noise_long.json" if args.long else "blocked_noise.json")
    write_json(out, {"repro": str(args.repro), "long": args.long, "rows": rows, "provenance": provenance()})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
