"""`make demo`: a first look at the whole pipeline in a few minutes on 2 cores.

The real `dvc.yaml`, notebooks and package, copied into a folder of their own (default `demo/`), run
`dvc repro overview` there on a smaller study: the benchmark is prepared, SeqF, ER and JointT train
at fewer steps and seeds, and `reports/overview.html` is rendered. Nothing the full run owns is read
or written; running it again re-runs only what changed.
"""
import argparse
import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
# what the stages read (.gitignore: what a user's `git add -A` leaves out)
COPIED = ("dvc.yaml", ".dvcignore", ".gitignore", "notebooks", "vlcp", "scripts", "benchmarks/results")
TARGET = "overview"


def demo_params(params: dict, seeds: tuple[int, ...] = (0, 1), steps: int = 120) -> dict:
    """`params` for the first look: the spine's runs at `seeds` and at most `steps` steps, no progress bars."""
    params = copy.deepcopy(params)
    params["seeds"] = list(seeds)
    tiny = params["profiles"][params["profile"]]
    spine = tiny["model_aliases"]["spine"]
    spine["train"] = {**spine.get("train", {}), "steps": min(spine.get("train", {}).get("steps", steps), steps)}
    tiny["train"] = {**tiny["train"], "progress": False}
    return params


def scaffold(dest: Path, params: dict) -> None:
    """Copy the pipeline's files into `dest` (code refreshed, outputs kept) and write `params` there."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        src, out = ROOT / name, dest / name
        if src.is_dir():
            shutil.copytree(src, out, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, out)
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="example: python scripts/demo.py --dir demo")
    parser.add_argument("--dir", type=Path, default=ROOT / "demo", help="the demo's own folder (default: demo/)")
    parser.add_argument("--params", type=Path, default=None,
                        help="a params.yaml to run as it is (default: this checkout's, made smaller)")
    args = parser.parse_args(argv)
    if args.params is None:
        params = demo_params(yaml.safe_load((ROOT / "params.yaml").read_text()))
    else:
        params = yaml.safe_load(args.params.read_text())
    dest = args.dir.resolve()
    scaffold(dest, params)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(dest), "DVC_NO_ANALYTICS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if not (dest / ".dvc").exists():
        subprocess.run(["dvc", "init", "-q", *([] if (dest / ".git").exists() else ["--no-scm"])],
                       cwd=dest, env=env, check=True)
    done = subprocess.run(["dvc", "repro", TARGET], cwd=dest, env=env)
    if done.returncode != 0:
        print(f"demo: dvc repro {TARGET} failed in {dest} (its output is above)", file=sys.stderr)
        return done.returncode
    print(f"demo: open {dest / 'reports' / f'{TARGET}.html'}  (the full study: make repro)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
