"""CTP's step time against SeqF's, beside its FLOP ratio, robust to this VM's run-to-run drift.

    .venv/bin/python benchmarks/ctp_cost.py [--repeats 4] [--steps 480] [--work DIR]

The CTP study times each run once inside `dvc repro` (about 8 s of training for SeqF at 160
steps); on a shared 2-core VM that moves by 10-15 % from run to run, as much as the issue's
margin (CTP's time ratio ≤ its FLOP ratio × 1.1). This runs SeqF, CTP and CTP+ER at `--steps`
(default 480, 3 × the study's), interleaved (ABBA), `--repeats` times each in one process, and
reports each one's median seconds per step over all tasks (as the study's Table 1), per repeat
its ratio to the same repeat's SeqF run (paired, so slow drift cancels), and the FLOP ratio
(torch's counter, per-task passes included: `vlcp.report.results.flops_per_step`). Needs the
initialisation `models/ctp-base.pt` (`dvc repro ctp_base`).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import flop_paired_cost  # noqa: E402  (benchmarks/common.py)

REFERENCE = "ctp-seqf"


def main() -> None:
    flop_paired_cost(__doc__, REFERENCE, [REFERENCE, "ctp-ctp", "ctp-ctp-er"], "benchmarks/results/ctp_cost.json", 480,
                     "train.steps of each run (the study's 160: ~8 s of training)",
                     "CTP's training step time vs SeqF's (interleaved repeats, all tasks; ratios paired per repeat), "
                     "beside the FLOP ratio",
                     skip_first=False)


if __name__ == "__main__":
    main()
