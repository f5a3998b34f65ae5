"""Provenance every benchmark JSON carries: where, when and on which commit it was measured."""
from __future__ import annotations

import os
import platform
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def git_commit(root: Path = ROOT) -> str:
    """Short HEAD of `root`, with "-dirty" when tracked files other than the benchmarks' own
    outputs differ from it ("" outside git)."""
    def git(*a):
        return subprocess.run(["git", *a], cwd=root, text=True, capture_output=True).stdout.strip()
    head = git("rev-parse", "--short", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".",
                ":!benchmarks/results", ":!benchmarks/dvc.lock")
    return head + ("-dirty" if head and dirty else "")


def cpu_model() -> str:
    """The CPU's model name (Linux /proc/cpuinfo; platform.processor() is empty there)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        return platform.processor()


def provenance() -> dict:
    import torch

    return {"machine": platform.machine(), "processor": cpu_model(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%d"), "commit": git_commit()}
