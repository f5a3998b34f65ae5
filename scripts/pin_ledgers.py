"""Pin the ledgers on one whole default repro (issue #74's pin): its runs' results.json files as
test data, and each registered study's ledger rendered on them by the report engine.

    .venv/bin/python scripts/pin_ledgers.py CLONE   # a clone after `dvc repro` (e.g. benchmarks/pipeline.py --workdir)
    .venv/bin/python scripts/pin_ledgers.py --only fomo [--data-root DIR]   # one study's pin, on the committed runs

Writes tests/pins/runs.tar.xz (every results.json under CLONE's runs*/ folders, nothing else),
tests/pins/meta.json (the clone's commit and profile), tests/pins/claims/<notebook>_claims.json
(the engine's ledger of each study with a claims file) and tests/pins/before/ (the ledgers the
clone's own report stages wrote, for the record of what the move changed). tests/test_pins.py
renders the ledgers again and compares. `--only STUDY` re-renders one study's pinned ledger from the
committed tests/pins/runs.tar.xz alone (no clone: e.g. a study whose ledger moved onto the engine after
the runs were pinned); `--data-root` is the prepared benchmark, for a study whose floors read it.
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
    tests/test_pins.py lists as pending), on the runs under `runs_root` and the prepared benchmark
    at `data_root`; `only`: that study alone."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_pins import PENDING, pin_params

    params = pin_params(data_root)

    out = {}
    for name in registered():
        if only is not None and name != only:
            continue
        study = load_study(name)
        if study.claims is not None and study.claims_file not in PENDING:
            out[study.claims_file] = ledger_json(study.title, study_ledger(study, params, runs_root / study.runs_folder(params)))
    return out


def pin_one(study: str, data_root: Path) -> None:
    """Re-render `study`'s pinned ledger on the committed runs (tests/pins/runs.tar.xz)."""
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(PINS / "runs.tar.xz") as tar:
            tar.extractall(tmp, filter="data")
        got = render(Path(tmp), data_root, only=study)
    if not got:
        raise SystemExit(f"{study}: no registered study with a claims file of that name")
    for name, ledger in got.items():
        write_json(PINS / "claims" / name, ledger)
        print(f"{name}: {len(ledger['claims'])} rows on the committed runs")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("clone", type=Path, nargs="?")
    ap.add_argument("--only", help="re-render this study's pin from the committed runs alone (no clone)")
    ap.add_argument("--data-root", type=Path, default=ROOT / "data", help="the prepared benchmark (with --only)")
    args = ap.parse_args()
    if args.only:
        return pin_one(args.only, args.data_root)
    if args.clone is None:
        ap.error("give a CLONE, or --only STUDY")
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
