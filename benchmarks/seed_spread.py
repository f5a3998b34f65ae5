"""Seed-to-seed spread of the IncCLIP study's headline metrics, for its single-seed claims.

    .venv/bin/python benchmarks/seed_spread.py [--seeds 0 1 2] [--work DIR]

The default `dvc repro` runs the IncCLIP study at one seed (24 runs fill its 15-minute budget),
so its claims ledger cannot measure a spread. This runs a few of its experiments at several seeds
(default: ER and IncCLIP at 4 and 8 class-incremental steps) and writes, per metric, the pooled
seed standard deviation and the spread of a difference of two single-seed values (√2 × pooled
std), which the report uses as its noise floor. About 8 minutes on 2 cores.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from vlcp.config import load_params, resolve_experiment  # noqa: E402
from vlcp.report import incclip as ic  # noqa: E402
from vlcp.runner import run_experiment  # noqa: E402
from vlcp.utils import write_json  # noqa: E402

from common import provenance  # noqa: E402  (benchmarks/common.py)

METRICS = {
    "average": lambda r: ic.classification(r)["Average"],
    "r1_mean": lambda r: float(np.mean([v for (s, d, k), v in ic.retrieval(r).items() if k == "R@1"])),
    "bwt_rm": lambda r: ic.chunk_bwt(r, "Rm", "test"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiments", nargs="+", default=["ic4-er", "ic4-incclip", "ic8-er", "ic8-incclip"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    ap.add_argument("--work", default=None, help="runs and checkpoints go here (default: a temp dir); reruns resume")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/incclip_seed_spread.json"))
    args = ap.parse_args()
    params = load_params(args.params)
    work = Path(args.work or tempfile.mkdtemp(prefix="vlcp-seeds-"))
    values: dict[str, dict[str, list[float]]] = {}
    for exp in args.experiments:
        for seed in args.seeds:
            cfg = resolve_experiment(params, exp, seed, ["train.progress=false"])
            r = run_experiment(cfg, work / "runs" / exp / f"seed{seed}", work / "ckpt" / exp / f"seed{seed}")
            for m, fn in METRICS.items():
                values.setdefault(m, {}).setdefault(exp, []).append(fn(r))
    out = {"what": "seed spread of the IncCLIP study's metrics (single-seed noise floor)",
           "experiments": args.experiments, "seeds": args.seeds, "values": values, "metrics": {}}
    for m, per_exp in values.items():
        stds = [float(np.std(v, ddof=1)) for v in per_exp.values()]
        pooled = float(np.sqrt(np.mean(np.square(stds))))
        out["metrics"][m] = {"std_per_experiment": dict(zip(per_exp, stds)), "pooled_std": pooled,
                             "difference_spread": float(np.sqrt(2) * pooled)}
        print(f"{m}: pooled seed std {pooled:.2f}, spread of a difference {np.sqrt(2) * pooled:.2f}")
    write_json(args.out, out | provenance())


if __name__ == "__main__":
    main()
