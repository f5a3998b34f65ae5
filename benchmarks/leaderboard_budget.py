"""The leaderboard track 1's compute-matched steps: FoMo-in-Flux's budget rule on measured costs.

For every experiment of `report.leaderboard.track1.experiments`, one step of full fine-tuning and
one of the method are measured on the track's stream without training (`vlcp.run.step_costs`:
torch's FLOP counter, the training memory and the per-task passes), and the method gets the
memory-adjusted FLOPs full fine-tuning spends in the track's steps (`vlcp.run.accounting.mafs_steps`
over the stream's tasks). Writes vlcp/report/studies/leaderboard/budget.yaml; the `train.steps` of
the `report.leaderboard.track1.compute_matched` experiments in params.yaml must equal its `steps`
(tests/test_leaderboard_budget.py checks both). Needs a prepared benchmark (`vlcp data prepare`).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vlcp.config import load_params, resolve_experiment  # noqa: E402
from vlcp.run import step_costs  # noqa: E402
from vlcp.run.accounting import mafs_steps  # noqa: E402
from vlcp.utils import atomic_path  # noqa: E402

OUT = ROOT / "vlcp/report/studies/leaderboard/budget.yaml"
HEADER = """\
# Leaderboard track 1 under FoMo-in-Flux's budget rule, measured by benchmarks/leaderboard_budget.py on the
# track's stream: full fine-tuning's and each experiment's FLOPs of one step, FLOPs of its per-task passes
# (a Fisher pass, a buffer's selection), training memory in bytes and trainable parameters; `steps`: full fine-tuning's
# memory-adjusted FLOPs over `reference_steps`, less every task's passes, over the method's per step.
"""


def cost(c: dict) -> dict:
    return {"flops": c["flops"], "task_flops": c["task_flops"], "memory_bytes": c["memory"]["total"]}


def as_cost(row: dict) -> dict:
    """A row of the file back as `vlcp.run.accounting.step_cost`'s shape, for `mafs_steps`."""
    return {"flops": row["flops"], "task_flops": row["task_flops"], "memory": {"total": row["memory_bytes"]}}


def measure(params: dict, experiments: list[str], root: str) -> dict:
    rows, full_ft, tasks = {}, None, None
    for name in experiments:
        cfg = resolve_experiment(params, name, 0, [f"data.root={root}", "train.progress=false"])
        c = step_costs(cfg)
        if full_ft not in (None, cost(c["full_ft"])) or tasks not in (None, c["num_tasks"]):
            raise SystemExit(f"{name}: another model or stream than the track's other experiments")
        full_ft, tasks = cost(c["full_ft"]), c["num_tasks"]
        steps, _ = mafs_steps(cfg.train.steps, c["full_ft"], c["method"], tasks=tasks)
        rows[name] = {"method": cfg.method.name, **cost(c["method"]), "trainable_params": c["trainable_params"],
                      "steps": steps}
        print(f"{name}: {rows[name]}", flush=True)
    return {"reference_steps": cfg.train.steps, "tasks": tasks, "full_ft": full_ft, "experiments": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    ap.add_argument("--data-root", default="data/emoji", help="a prepared benchmark (vlcp data prepare)")
    args = ap.parse_args()
    params = load_params(args.params)
    doc = measure(params, params["report"]["leaderboard"]["track1"]["experiments"], args.data_root)
    with atomic_path(OUT) as tmp:
        Path(tmp).write_text(HEADER + yaml.safe_dump(doc, sort_keys=False, width=110))
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
