"""The spine's compute-matched methods (ER, JointT) against SeqF, robust to this VM's run-to-run drift.

    .venv/bin/python benchmarks/spine_cost.py [--repeats 5] [--steps 960] [--work DIR]

ER (half of each batch from the buffer) and JointT (batches drawn from every task seen) do the
same matrix work per step as SeqF, so their time ratio should be about 1. The spine study
(`dvc repro`, report section 2) times each run once, about 11 s of training on a shared 2-core
VM, where one run moves by 10-15 % from run to run: enough to put either over the issue's
FLOPs × 1.1 in one full run and under it in the next. This runs SeqF, ER and JointT at `--steps`
(default 960, 4 × the study's), interleaved (ABBA), `--repeats` times each in one process, and
reports each one's median seconds per step over the tasks after the first (where the methods
differ, as the study's table), per repeat its ratio to the same repeat's SeqF run (paired, so slow
drift cancels), and the FLOP ratio (torch's counter: `vlcp.report.results.flops_per_step`).
About 13 minutes on 2 cores. Needs the prepared benchmark (`dvc repro prepare`).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import flop_paired_cost  # noqa: E402  (benchmarks/common.py)

REFERENCE = "seqf"


def main() -> None:
    flop_paired_cost(__doc__, REFERENCE, [REFERENCE, "er", "jointt"], "benchmarks/results/spine_cost.json", 960,
                     "train.steps of each run (the study's 240: ~11 s of training)",
                     "ER's and JointT's training step time vs SeqF's (interleaved repeats, tasks 2..; ratios paired "
                     "per repeat), beside the FLOP ratio",
                     skip_first=True)


if __name__ == "__main__":
    main()
