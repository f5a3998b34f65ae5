"""Pin the ledgers on one whole default repro (issue #74's pin): its runs' results.json files as
test data, and each registered study's ledger rendered on them by the report engine.

    .venv/bin/python scripts/pin_ledgers.py CLONE   # a clone after `dvc repro` (e.g. benchmarks/pipeline.py --workdir)
    .venv/bin/python scripts/pin_ledgers.py --only ctp --runs-from-pin   # one study's pin, on the committed runs
    .venv/bin/python scripts/pin_ledgers.py --only ctp --runs-from-pin --add DIR/runs-ctp --note "..."
                                                  # ... with a small set of its runs added to them first

Writes tests/pins/runs.tar.xz (every results.json under CLONE's runs*/ folders, nothing else),
tests/pins/meta.json (the clone's commit and profile), tests/pins/claims/<notebook>_claims.json
(the engine's ledger of each study with a claims file) and tests/pins/before/ (the ledgers the
clone's own report stages wrote, for the record of what the move changed). tests/test_pins.py
renders the ledgers again and compares.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from vlcp.config import load_params  # noqa: E402
from vlcp.report.ledger import ledger_json, study_ledger  # noqa: E402
from vlcp.report.study import load_study, registered  # noqa: E402
from vlcp.utils import write_json  # noqa: E402

PINS = ROOT / "tests" / "pins"


def results_files(clone: Path) -> list[Path]:
    """Every run's results.json under the clone's runs*/ folders, relative to the clone."""
    return sorted(p.relative_to(clone) for d in sorted(clone.glob("runs*")) if d.is_dir()
                  for p in d.rglob("results.json"))


def render(runs_root: Path, data_root: Path, only: str | None = None) -> dict[str, dict]:
    """{claims file name: ledger JSON} of every registered study with a claims file (but those
    tests/test_pins.py lists as pending; `only`: that study alone), on the runs under `runs_root`
    and the prepared benchmark at `data_root`."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_pins import PENDING, pin_params

    params = pin_params(data_root)

    out = {}
    for name in [only] if only else registered():
        study = load_study(name)
        if study.claims is not None and study.claims_file not in PENDING:
            out[study.claims_file] = ledger_json(study.title, study_ledger(study, params, runs_root / study.runs_folder(params)))
    return out


def pin_from_committed(name: str, data_root: Path) -> None:
    """Re-pin study `name`'s ledger on the committed runs (tests/pins/runs.tar.xz), the rest untouched:
    for a study whose claims file is new and whose runs the tarball holds (or lacks: its rows are then
    not testable there)."""
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(PINS / "runs.tar.xz") as tar:
            tar.extractall(tmp, filter="data")
        for file, ledger in render(Path(tmp), data_root, only=name).items():
            write_json(PINS / "claims" / file, ledger)
            print(f"pinned {file} on the committed runs")


def add_runs(folder: Path, note: str) -> int:
    """Add the results.json files under `folder` (one study's runs folder, e.g. runs-ctp) to
    tests/pins/runs.tar.xz as `<folder name>/...`, replacing any there before, and record them in
    meta.json's `added` with `note`; returns how many were added."""
    files = sorted(folder.rglob("results.json"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with tarfile.open(PINS / "runs.tar.xz") as tar:
            tar.extractall(root, filter="data")
        shutil.rmtree(root / folder.name, ignore_errors=True)
        for f in files:
            dest = root / folder.name / f.relative_to(folder)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, dest)
        with tarfile.open(PINS / "runs.tar.xz", "w:xz") as tar:
            for f in sorted(p.relative_to(root) for p in root.rglob("results.json")):
                tar.add(root / f, arcname=str(f))
    meta = json.loads((PINS / "meta.json").read_text())
    meta["added"] = [a for a in meta.get("added", []) if a["folder"] != folder.name] + [
        {"folder": folder.name, "runs": len(files), "note": note}]
    write_json(PINS / "meta.json", meta)
    return len(files)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("clone", type=Path, nargs="?")
    ap.add_argument("--only", help="one study's pin (with --runs-from-pin)")
    ap.add_argument("--runs-from-pin", action="store_true", help="render on tests/pins/runs.tar.xz, not a clone")
    ap.add_argument("--data", type=Path, help="a prepared emoji benchmark (default: params.yaml's data.root)")
    ap.add_argument("--add", type=Path, help="with --runs-from-pin: first add this runs folder's results.json files")
    ap.add_argument("--note", default="", help="what the added runs are (meta.json)")
    args = ap.parse_args()
    if args.runs_from_pin:
        if not args.only or args.clone:
            ap.error("--runs-from-pin takes --only STUDY and no CLONE")
        if args.add:
            print(f"added {add_runs(args.add.resolve(), args.note)} runs of {args.add.name}")
        pin_from_committed(args.only, args.data or ROOT / load_params(str(ROOT / "params.yaml"))["defaults"]["data"]["root"])
        return
    if args.clone is None or args.only:
        ap.error("give CLONE (every study, from a repro), or --only STUDY --runs-from-pin")
    clone = args.clone.resolve()
    files = results_files(clone)
    PINS.mkdir(parents=True, exist_ok=True)
    with tarfile.open(PINS / "runs.tar.xz", "w:xz") as tar:
        for f in files:
            tar.add(clone / f, arcname=str(f))
    commit = subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    params = load_params(str(clone / "params.yaml"))
    write_json(PINS / "meta.json", {"commit": commit, "profile": params.get("profile", "tiny"), "runs": len(files)})
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(PINS / "runs.tar.xz") as tar:
            tar.extractall(tmp, filter="data")
        shutil.rmtree(PINS / "claims", ignore_errors=True)
        for name, ledger in render(Path(tmp), clone / params["defaults"]["data"]["root"]).items():
            write_json(PINS / "claims" / name, ledger)
    (PINS / "before").mkdir(exist_ok=True)
    for f in sorted((clone / "reports").glob("*_claims.json")):
        shutil.copy(f, PINS / "before" / f.name)
    print(f"{len(files)} runs of {commit} pinned; ledgers: {', '.join(sorted(p.name for p in (PINS / 'claims').glob('*.json')))}")


if __name__ == "__main__":
    main()
