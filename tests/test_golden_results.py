"""Results pinned across refactors: a few runs per stream (tests/golden/cases.py) must write the
same results file, timings aside, as when tests/golden/record.py recorded them, and the same final
checkpoint (so checkpoints written before a refactor still resume). One case per stream also stops
after its first task and resumes, and must end in the same file."""
import difflib
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))
from cases import CASES, RESUMED  # noqa: E402
from golden import HERE, checkpoint_digest, machine, normalise, recorded, run_case  # noqa: E402

SET = recorded()   # the set recorded on CPUs of this machine's capability and vendor
RECORDED = json.loads((SET / "meta.json").read_text()) if (SET / "meta.json").exists() else None


@pytest.fixture(scope="module", autouse=True)
def same_machine():
    here = machine()
    if RECORDED is None or {k: RECORDED[k] for k in here} != here:
        sets = {p.name: json.loads((p / "meta.json").read_text())["torch"] for p in (HERE / "recorded").iterdir()}
        pytest.skip(f"no golden results for this machine ({here}; recorded sets, capability-vendor: torch: {sets}): "
                    "floats may differ; record a set from the pre-refactor commit (git worktree) with "
                    "tests/golden/record.py")


def same_text(got: str, name: str) -> None:
    want = (SET / "results" / f"{name}.json").read_text()
    if got != want:
        diff = "".join(list(difflib.unified_diff(want.splitlines(True), got.splitlines(True), "golden", "now"))[:60])
        pytest.fail(f"{name}: results differ from {SET / 'results' / name}.json\n{diff}")


@pytest.mark.parametrize("name", list(CASES))
def test_results_and_checkpoint_equal_the_golden_ones(name, emoji_root, tmp_path):
    out = tmp_path / name
    same_text(normalise(run_case(CASES[name], emoji_root, out), emoji_root), name)
    assert checkpoint_digest(out / "checkpoint.pt") == RECORDED["checkpoints"][name]
    assert json.loads((out / "results.json").read_text())["train"] is not None   # written, not only returned


@pytest.mark.parametrize("name", RESUMED)
def test_stopped_and_resumed_run_equals_the_golden_one(name, emoji_root, tmp_path):
    out = tmp_path / name
    run_case(CASES[name], emoji_root, out, stop_after_task=0)
    same_text(normalise(run_case(CASES[name], emoji_root, out), emoji_root), name)
