"""IncCLIP's step time against ER's, robust to this VM's run-to-run drift.

    .venv/bin/python benchmarks/incclip_cost.py [--repeats 3] [--work DIR]

The IncCLIP study times each experiment once, inside `dvc repro`; on a shared 2-core VM one run's
step time moves by 10-15 % from run to run, enough to flip the issue's ≤ 1.5 × ER target. This
runs ER, IncCLIP (pseudo texts every batch, the paper's), IncCLIP with the generation amortised
over 8 steps, and IncCLIP without pseudo texts (W.N.C + Dist.: the previous model's forward only),
interleaved, `--repeats` times each in one process, and reports each one's median seconds per
step over steps 2… (where the methods differ) and, per repeat, its ratio to the same repeat's ER
run (paired, so slow drift cancels): the median of those ratios, and their range. The held-out
Average of every run comes with it (one seed: the repeats are the same run, so it only varies by
nondeterminism). About 6 minutes on 2 cores at 5 repeats.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from vlcp.report import incclip as ic  # noqa: E402
from vlcp.report.results import step_time  # noqa: E402
from vlcp.utils import write_json  # noqa: E402

from common import paired_cost_args, paired_step_times, provenance  # noqa: E402  (benchmarks/common.py)

REFERENCE = "ic4-er"


def main() -> None:
    args, params, work = paired_cost_args(
        __doc__, REFERENCE, [REFERENCE, "ic4-incclip", "ic4-incclip-every8", "ic4-incclip-wnc-kd"],
        "benchmarks/results/incclip_cost.json")
    extra = lambda r: {"average": ic.classification(r)["Average"], "pseudo_every": r["config"]["method"].get("pseudo_every")}  # noqa: E731
    out = paired_step_times(params, args.experiments, args.repeats, args.seed, work, step_time, extra)
    extras = out.pop("extra")
    out = {"what": "IncCLIP's training step time vs ER's (interleaved repeats, steps 2..; ratios paired per repeat)",
           **out, "average": {e: [x["average"] for x in v] for e, v in extras.items()},
           "pseudo_every": {e: v[0]["pseudo_every"] for e, v in extras.items()}}
    write_json(args.out, out | provenance())


if __name__ == "__main__":
    main()
