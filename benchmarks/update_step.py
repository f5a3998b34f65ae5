"""What a `vlcp update` step costs on this machine: seconds per training step of the update's
run (full fine-tuning, the default recipe), for vlcp-tiny and ViT-B-32, on CPU.

    .venv/bin/python benchmarks/update_step.py [--models vlcp-tiny ViT-B-32] [--batch-size 8] [--steps 4]

Each model updates from random weights on a synthetic chunk of 64 coloured-shape pictures (a
folder of images with same-name captions) with a 3-class ImageFolder keep-set, at `--batch-size`,
for `--steps` steps. The per-step time is the run's training seconds over its steps (the first
step, which builds the optimiser and warms the kernels, included: a user's update pays it too),
and the time an update of the defaults (`UpdateCfg.steps` steps at `TrainCfg.batch_size`) would
take is scaled from it as `vlcp update`'s plan scales it: linear in batch size, an estimate. Writes
benchmarks/results/update_step.json, which `vlcp update`'s plan line and docs/update.md's 'Costs'
table quote (tests/test_update_planning.py holds the table equal to it).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from vlcp.utils import write_json  # noqa: E402

from common import provenance  # noqa: E402  (benchmarks/common.py)

COLOURS = {"red": (220, 30, 30), "green": (30, 180, 60), "blue": (40, 60, 220), "yellow": (230, 210, 40)}


def make_data(root: Path, n: int = 64) -> tuple[Path, Path]:
    """A chunk of `n` captioned pictures and a 3-class keep-set of 8 pictures a class."""
    from PIL import Image, ImageDraw

    def picture(colour: str, k: int) -> Image.Image:
        im = Image.new("RGB", (64, 64), (250, 250, 250))
        o = k % 9
        ImageDraw.Draw(im).rectangle((8 + o, 8 + o, 40 + o, 40 + o), fill=COLOURS[colour])
        return im

    chunk, keep = root / "chunk", root / "keep"
    chunk.mkdir(parents=True)
    for k in range(n):
        c = list(COLOURS)[k % len(COLOURS)]
        picture(c, k).save(chunk / f"{k:03d}.png")
        (chunk / f"{k:03d}.txt").write_text(f"a {c} square\n")
    for c in list(COLOURS)[:3]:
        (keep / c).mkdir(parents=True)
        for k in range(8):
            picture(c, k).save(keep / c / f"{k}.png")
    return chunk, keep


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=["vlcp-tiny", "ViT-B-32"])
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "update_step.json"))
    args = p.parse_args()

    from vlcp.config import TrainCfg, UpdateCfg
    from vlcp.run.streams.user import duration, scaled_seconds
    from vlcp.update import update

    steps, batch = UpdateCfg().steps, TrainCfg().batch_size   # the defaults of vlcp update
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        chunk, keep = make_data(Path(tmp))
        for model in args.models:
            t0 = time.perf_counter()
            h = update([str(chunk)], Path(tmp) / model, model=model, keep=[f"colours={keep}"], report=False,
                       train={"batch_size": args.batch_size, "device": "cpu", "num_threads": args.threads,
                              "progress": False},
                       options={"steps": args.steps, "holdout": 0.25, "min_candidates": 0})
            u = h["updates"][0]
            per_step = u["seconds"] / u["steps"]
            rows[model] = {"seconds_per_step": per_step, "steps": u["steps"], "batch_size": args.batch_size,
                           "training_seconds": u["seconds"], "update_seconds": time.perf_counter() - t0}
            defaults = scaled_seconds(rows[model], steps, batch)
            rows[model]["defaults_estimate_hours"] = defaults / 3600
            print(f"{model}: {per_step:.2f} s/step at batch {args.batch_size} ({args.threads} threads); the defaults "
                  f"({steps} steps at batch {batch}) ≈ {duration(defaults)} (estimate)", flush=True)
    write_json(args.out, {"what": "seconds per vlcp update training step (full fine-tuning from random weights, "
                                  "CPU), and the defaults' time scaled from it (linear in batch: an estimate)",
                          "threads": args.threads, "models": rows, **provenance()})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
