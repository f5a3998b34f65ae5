"""Where a tiny step's zero fills (`aten::fill_`) come from, with torch's attention and with vlcp's.

    .venv/bin/python benchmarks/step_fills.py [--steps 10] [--repeats 5] [--threads 1]

vlcp-tiny at the tiny runs' shapes (batch 128, 32 px, 24 tokens), full fine-tuning with the loop's
fused AdamW on random batches. Two models from the same weights: one with torch's
`nn.MultiheadAttention`, one with `vlcp.models.attention.PackedSelfAttention` (what `create_clip`
builds). For each, `--steps` steps run under torch.profiler with shapes. Per phase (forward,
backward, optimizer) and per caller (the op that called `fill_`, and its shape) the JSON records
the calls, the megabytes filled and the self milliseconds per step. The bytes are exact; the
milliseconds are not, because profiling slows small ops. Then the two models' steps are timed in
interleaved blocks of `--steps` (wall and CPU seconds; the minimum over `--repeats`). They must
give the same losses and weights bit for bit; the script stops if they do not.
"""
from __future__ import annotations

import argparse
import copy
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402

from vlcp.losses import clip_loss  # noqa: E402
from vlcp.models.attention import use_torch_attention  # noqa: E402
from vlcp.models.clip import create_clip  # noqa: E402
from vlcp.utils import write_json  # noqa: E402

from common import provenance  # noqa: E402  (benchmarks/common.py)

PHASES = ("forward", "backward", "optimizer")


def models(seed: int = 0) -> dict:
    """{"torch": (model, optimizer), "vlcp": (model, optimizer)} from the same weights."""
    torch.manual_seed(seed)
    model, _ = create_clip("vlcp-tiny")
    plain = copy.deepcopy(model)
    use_torch_attention(plain)
    return {name: (m, torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.1, fused=True))
            for name, m in (("torch", plain), ("vlcp", model))}


def step(model, opt, batch) -> torch.Tensor:
    with record_function("forward"):
        loss = clip_loss(*model(*batch)[:3])
    with record_function("backward"):
        opt.zero_grad(set_to_none=True)
        loss.backward()
    with record_function("optimizer"):
        opt.step()
    return loss.detach()


def fills(events, steps: int) -> dict:
    """Per phase and caller "op [shape]": calls, MB filled and self ms per step."""
    out = defaultdict(lambda: defaultdict(lambda: [0, 0.0, 0.0]))
    for e in events:
        if e.name != "aten::fill_":
            continue
        chain, p = [], e.cpu_parent
        while p is not None:
            chain.append(p.name)
            p = p.cpu_parent
        phase = next((c for c in chain if c in PHASES), "other")
        caller = next((c for c in chain if c not in ("aten::zero_", "aten::zeros", "aten::zeros_like", "aten::new_zeros",
                                                     "aten::fill_")), "?")
        shape = e.input_shapes[0] if e.input_shapes else []
        row = out[phase][f"{caller} {list(shape)}"]
        row[0] += 1
        row[1] += 4 * int(torch.tensor(shape).prod()) if shape else 4   # fp32
        row[2] += e.self_cpu_time_total
    return {ph: {k: {"calls": round(n / steps, 2), "mb": round(b / steps / 2**20, 3), "ms": round(us / 1e3 / steps, 3)}
                 for k, (n, b, us) in sorted(rows.items(), key=lambda kv: -kv[1][1])} for ph, rows in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/step_fills.json"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    batch = (torch.randn(128, 3, 32, 32, generator=g), torch.randint(1, 49000, (128, 24), generator=g))
    pair = models()
    losses = {name: [step(*mo, batch) for _ in range(2)] for name, mo in pair.items()}   # warm-up, allocations
    out = {"what": "aten::fill_ per tiny full fine-tuning step by phase and caller (calls, MB, self ms per step), "
                   "torch's attention vs PackedSelfAttention, and their step times",
           "model": "vlcp-tiny", "batch": 128, "threads": args.threads, "steps": args.steps, "fills": {}}
    for name, mo in pair.items():
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            losses[name] += [step(*mo, batch) for _ in range(args.steps)]
        out["fills"][name] = fills(prof.events(), args.steps)
        total = {ph: round(sum(r["mb"] for r in rows.values()), 2) for ph, rows in out["fills"][name].items()}
        print(f"{name}: MB zero-filled per step {total}", flush=True)
    times = {name: {"wall": [], "cpu": []} for name in pair}
    for rep in range(args.repeats):
        for name in (list(pair) if rep % 2 == 0 else list(pair)[::-1]):
            t0, c0 = time.perf_counter(), time.process_time()
            losses[name] += [step(*pair[name], batch) for _ in range(args.steps)]
            times[name]["wall"].append(round((time.perf_counter() - t0) / args.steps * 1e3, 2))
            times[name]["cpu"].append(round((time.process_time() - c0) / args.steps * 1e3, 2))
    same = all(torch.equal(a, b) for a, b in zip(losses["torch"], losses["vlcp"])) and all(
        torch.equal(a, b) for a, b in zip(pair["torch"][0].parameters(), pair["vlcp"][0].parameters()))
    if not same:
        sys.exit("step_fills: PackedSelfAttention's steps differ from torch's attention's: no JSON written")
    out["ms_per_step"] = times
    out["min_ms_per_step"] = {n: {k: min(v) for k, v in t.items()} for n, t in times.items()}
    out["identical_losses_and_weights"] = same
    for n, t in out["min_ms_per_step"].items():
        print(f"{n}: min {t['wall']:.1f} ms/step wall, {t['cpu']:.1f} ms/step CPU", flush=True)
    write_json(args.out, out | provenance())


if __name__ == "__main__":
    main()
