"""Run a golden case and reduce its outputs to what must not change across a refactor: the
results file without wall-clock fields (as indented JSON text, so key order and exact floats
count) and a digest of the final checkpoint (ordered keys, every tensor's bytes)."""
from __future__ import annotations

import hashlib
import json
import platform
from pathlib import Path

import torch

from vlcp.config import experiment_from_dict
from vlcp.utils import config_hash

HERE = Path(__file__).resolve().parent


def cpu_vendor() -> str:
    """The CPU's vendor (GenuineIntel, AuthenticAMD, from /proc/cpuinfo): MKL and oneDNN pick other
    kernels on each at the same capability, so the floats differ between them."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.machine() or "unknown"


def recorded() -> Path:
    """The golden set recorded on CPUs like this machine's: the same kernel capability and vendor
    (`machine`), its `results/<case>.json` and `meta.json`. AVX2 and AVX-512 kernels round
    differently, and so do Intel's and AMD's at one capability; each set is recorded from the same
    pre-refactor code. On an AMD AVX-512 machine the floats follow the ISA of ATen, MKL and oneDNN
    together: it reproduces the AVX2 set only with all three held to AVX2
    (ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2)."""
    return HERE / "recorded" / f"{torch.backends.cpu.get_cpu_capability()}-{cpu_vendor()}"


TIMINGS = ("seconds", "eval_seconds", "peak_memory_mb", "phase_seconds")


def machine() -> dict:
    """What the golden floats depend on: the same torch build on the same CPU kernels."""
    return {"torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "cpu_vendor": cpu_vendor()}


def experiment(case: dict, root: Path):
    return experiment_from_dict({**case, "data": {**case["data"], "root": str(root)}})


def run_case(case: dict, root: Path, out: Path, stop_after_task: int | None = None) -> dict:
    from vlcp.run import run_experiment

    return run_experiment(experiment(case, root), out, stop_after_task=stop_after_task, resume=True)


def normalise(results: dict, root: Path) -> str:
    """The results as text, timings dropped and the data root replaced by `<root>`. The config
    hash must be the hash of the recorded config (then it is dropped: it covers the root)."""
    r = json.loads(json.dumps(results))
    assert r["config_hash"] == config_hash(r["config"]), "config_hash is not the hash of the recorded config"
    r.pop("config_hash"), r.pop("wall_seconds", None), r.pop("attempt_seconds", None), r.pop("run_seconds", None)
    for row in r["train"]:
        for k in TIMINGS:
            row.pop(k, None)
    return json.dumps(r, indent=1).replace(str(root), "<root>") + "\n"


def _digest(h, obj) -> None:
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    elif isinstance(obj, dict):
        h.update(f"D{len(obj)}".encode())
        for k, v in obj.items():
            h.update(repr(k).encode())
            _digest(h, v)
    elif isinstance(obj, (list, tuple)):
        h.update(f"L{len(obj)}".encode())
        for v in obj:
            _digest(h, v)
    else:
        h.update(repr(obj).encode())


def checkpoint_digest(path: Path) -> dict:
    """Ordered top-level keys and one sha256 per part (model, method, rng, ...) of a checkpoint;
    the checksum, the config hash (it covers the data root) and the embedded results (timings)
    are left out."""
    raw = torch.load(path, map_location="cpu", weights_only=True)
    out = {"keys": list(raw)}
    for k, v in raw.items():
        if k in ("checksum", "config_hash", "results"):
            continue
        h = hashlib.sha256()
        _digest(h, v)
        out[k] = h.hexdigest()[:16]
    return out
