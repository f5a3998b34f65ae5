"""FoMo-in-Flux Table 4 at the paper's architecture: each method's memory multiplier (training
memory relative to full fine-tuning) and FLOPs per step for open_clip's ViT-B/16 at 224 px and
the paper's batch of 512, by the same tensor accounting and flop counter the study's runs use
(`vlcp.run.accounting.step_cost`).

The tiny study model cannot show the paper's memory order: at 32 px its activations are small
and CLIP's 49,408-row token embedding (3.2 M of its 3.4 M parameters) dominates, so locking the
image tower saves little. Here the model is the paper's (random init: memory and FLOPs do not
depend on the weights) on synthetic images and captions. Activations grow linearly in the batch
and nothing else does, so each method is measured at two small batches on the CPU and the
accounting is extrapolated to 512 (FLOPs likewise per sample). Writes
benchmarks/results/fomo_memory.json.
"""
from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path
from types import SimpleNamespace

import torch

from common import ROOT, provenance

from vlcp.config import FomoCfg, TrainCfg
from vlcp.methods import get_method
from vlcp.methods.base import Batch, TaskContext
from vlcp.models.clip import create_clip
from vlcp.run.accounting import step_cost
from vlcp.utils import write_json

# Table 4's rows (vlcp/report/studies/fomo/fomo_table4.csv) -> (method, config)
METHODS = {
    "full-ft": ("seqf", {}), "locked-text": ("locked-text", {}), "locked-image": ("locked-image", {}),
    "LNFit": ("lnfit", {}), "BitFit": ("bitfit", {}), "LoRA, r=4": ("lora", {"r": 4}),
    "LoRA, r=64": ("lora", {"r": 64}), "DoRA, r=4": ("dora", {"r": 4}), "VeRA, r=4": ("vera", {"r": 4}),
    "EWC": ("ewc", {"fisher_batches": 1, "fisher_batch_size": 2}), "SI": ("si", {}), "EMA-Merge": ("ema-merge", {}),
}


def synthetic_context(tokenizer, image_size: int, n: int = 64) -> TaskContext:
    """A task of `n` synthetic pairs: images drawn per id (deterministic), real tokenised captions."""
    tokens = tokenizer([f"a photo of object number {i}, a kind of thing" for i in range(n)])

    def materialize(ids, g=None):
        imgs = torch.stack([torch.randn(3, image_size, image_size, generator=torch.Generator().manual_seed(int(i)))
                            for i in ids])
        return Batch(images=imgs, tokens=tokens[ids], ids=ids)

    return TaskContext(task=0, num_tasks=2, train_set=None, task_ids=[torch.arange(n)], pool=torch.arange(n),
                       materialize=materialize, materialize_plain=materialize,
                       generator=torch.Generator().manual_seed(0))


def measure(model_name: str, image_size: int, batches: tuple[int, int], target_batch: int) -> dict:
    model, tokenizer = create_clip(model_name, None, "cpu", image_size)
    ctx = synthetic_context(tokenizer, image_size)
    device = torch.device("cpu")
    rows = {}
    for row, (name, args) in METHODS.items():
        t0 = time.time()
        cls = get_method(name)
        per_batch = {}
        for b in batches:
            method = cls(cls.Config(**args), seed=0)
            m = copy.deepcopy(model)
            method.prepare_model(m)
            cfg = SimpleNamespace(train=TrainCfg(batch_size=b, progress=False, device="cpu"), fomo=FomoCfg())
            per_batch[b] = step_cost(m, method, ctx, cfg, device)
            del m
        (b1, c1), (b2, c2) = sorted(per_batch.items())
        slope = {k: (c2["memory"][k] - c1["memory"][k]) / (b2 - b1) for k in c1["memory"]}
        mem = {k: c1["memory"][k] + slope[k] * (target_batch - b1) for k in c1["memory"]}
        rows[row] = {"method": name, "config": args, "measured_batches": {str(b): c for b, c in per_batch.items()},
                     "memory_at_target": mem, "flops_per_step_at_target": c2["flops"] / b2 * target_batch,
                     "seconds": round(time.time() - t0, 1)}
        print(f"{row:12s} memory {mem['total'] / 2**30:7.2f} GiB  GFLOPs/step {rows[row]['flops_per_step_at_target'] / 1e9:9.1f}"
              f"  ({rows[row]['seconds']:.0f} s)", flush=True)
    ref = rows["full-ft"]["memory_at_target"]["total"]
    for r in rows.values():
        r["memory_multiplier"] = r["memory_at_target"]["total"] / ref
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="ViT-B-16")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--batches", type=int, nargs=2, default=(2, 4))
    ap.add_argument("--target-batch", type=int, default=512)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/fomo_memory.json"))
    a = ap.parse_args()
    torch.manual_seed(0)
    rows = measure(a.model, a.image_size, tuple(a.batches), a.target_batch)
    write_json(Path(a.out), {"provenance": provenance(), "model": a.model, "image_size": a.image_size,
                             "measured_batches": list(a.batches), "target_batch": a.target_batch,
                             "accounting": "tensor accounting (vlcp.train.budget.training_memory_bytes), fp32, "
                                           "extrapolated linearly in the batch from the two measured batches",
                             "methods": rows})
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
