"""Retrieval evaluation on large synthetic galleries: vlcp's chunked top-k vs the naive full
similarity matrix, time and peak memory of each.

    .venv/bin/python benchmarks/eval_memory.py [--sizes 5000 10000 20000 50000] [--dim 512]
        [--threads 2] [--out benchmarks/results/eval_memory.json]

Each (path, size) runs in a fresh subprocess. Peak memory is the evaluation's own working memory:
on CPU the growth of the kernel's peak-RSS mark (VmHWM, reset through /proc/self/clear_refs once
the features are built), on GPU `torch.cuda.max_memory_allocated` over the allocation before it.
Both paths compute the same metrics, TR/IR@1,5,10 for N images against N texts (one caption each)
and mAP@1,5,10 of images against texts with classes of 50, and the benchmark checks they agree.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from vlcp.eval.retrieval import KS, average_precision, cross_modal, mean_average_precision, recall_at_k  # noqa: E402
from vlcp.utils import write_json  # noqa: E402

from common import provenance  # noqa: E402  (benchmarks/common.py)


def naive_cross_modal(img: torch.Tensor, txt: torch.Tensor, labels: torch.Tensor, ks=KS) -> dict[str, float]:
    """The textbook path: materialise the full [N, N] similarity matrix, then top-k both ways."""
    sims = img @ txt.T
    tr = recall_at_k(labels[sims.topk(max(ks), dim=1).indices] == labels[:, None], ks)
    ir = recall_at_k(labels[sims.topk(max(ks), dim=0).indices.T] == labels[:, None], ks)  # no [N, N] copy
    out = {f"TR@{k}": tr[k] for k in ks} | {f"IR@{k}": ir[k] for k in ks}
    out["Rm"] = sum(out.values()) / len(out)
    return out


def naive_map(query: torch.Tensor, gallery: torch.Tensor, labels: torch.Tensor, ns=KS) -> dict[int, float]:
    """mAP@N from the full [N, N] similarity matrix."""
    hits = labels[(query @ gallery.T).topk(max(ns), dim=1).indices] == labels[:, None]
    n_rel = torch.bincount(labels)[labels]
    return {n: 100.0 * average_precision(hits, n_rel, n).mean().item() for n in ns}


def features(n: int, dim: int, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Unit-norm image features and noisy text copies (so recall is neither 0 nor 100)."""
    g = torch.Generator().manual_seed(0)
    img = torch.nn.functional.normalize(torch.randn(n, dim, generator=g), dim=1)
    txt = torch.nn.functional.normalize(img + 5.0 * torch.randn(n, dim, generator=g) / dim ** 0.5, dim=1)
    return img.to(device), txt.to(device), torch.arange(n, device=device)


CLASS_SIZE = 50


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024


def reset_peak_rss() -> float:
    """Reset the kernel's peak-RSS mark (VmHWM) to the current RSS and return it (MB)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status_mb("VmRSS")


def peak_rss_mb() -> float:
    return _status_mb("VmHWM")


def one(path: str, n: int, dim: int, device: str, threads: int) -> dict:
    torch.set_num_threads(threads)
    dev = torch.device(device)
    img, txt, labels = features(n, dim, dev)
    if dev.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = reset_peak_rss()
    t0 = time.perf_counter()
    classes = labels // CLASS_SIZE                     # mAP: positives = the query's class
    if path == "chunked":
        out = cross_modal(img, txt, labels, labels)
        out |= {f"mAP@{k}": v for k, v in mean_average_precision(img, txt, classes, classes).items()}
    else:
        out = naive_cross_modal(img, txt, labels)
        out |= {f"mAP@{k}": v for k, v in naive_map(img, txt, classes).items()}
    if dev.type == "cuda":
        torch.cuda.synchronize()
        peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    else:
        peak = peak_rss_mb() - base
    return {"path": path, "n": n, "seconds": round(time.perf_counter() - t0, 3), "peak_mb": round(peak, 1),
            "Rm": out["Rm"], "mAP@10": out["mAP@10"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[5000, 10000, 20000, 50000])
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "eval_memory.json"))
    ap.add_argument("--one", nargs=2, metavar=("PATH", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]), args.dim, args.device, args.threads)))
        return
    rows = []
    for n in args.sizes:
        for path in ("chunked", "naive"):
            cmd = [sys.executable, __file__, "--one", path, str(n), "--dim", str(args.dim),
                   "--threads", str(args.threads), "--device", args.device]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                row = {"path": path, "n": n, "error": (r.stderr.strip().splitlines() or ["killed"])[-1][:200]}
            else:
                row = json.loads(r.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(row, flush=True)
    by = {(r["path"], r["n"]): r for r in rows}
    agree = all(abs(by[("chunked", n)][m] - by[("naive", n)][m]) < 1e-6 for n in args.sizes for m in ("Rm", "mAP@10")
                if "Rm" in by[("chunked", n)] and "Rm" in by[("naive", n)])
    biggest = max(args.sizes)
    c, nv = by[("chunked", biggest)], by[("naive", biggest)]
    write_json(args.out, {
        "what": "retrieval (TR/IR@1,5,10 and mAP@1,5,10) on N x N synthetic features: chunked top-k vs full matrix",
        "dim": args.dim, "threads": args.threads, "device": args.device, "rows": rows, "paths_agree": agree,
        "memory_ratio_at_largest": (nv["peak_mb"] / max(c["peak_mb"], 1e-9)) if "peak_mb" in nv and "peak_mb" in c else None,
        "largest": biggest, "target_ratio": 5.0, **provenance(),
    })
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
