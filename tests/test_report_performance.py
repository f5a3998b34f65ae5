"""The performance report's method-overhead tables, on hand-made runs."""
import pytest

from vlcp.report import performance as pf
from vlcp.utils import write_json


def run(name, method, seconds, flops, passes=0, mem=100.0, steps=10, seed=0, **method_args):
    return {"experiment": name, "seed": seed, "config": {"method": {"name": method, **method_args}},
            "train": [{"steps": steps, "seconds": seconds, "flops_per_step": flops, "task_pass_flops": passes,
                       "peak_memory_mb": mem} for _ in range(2)]}


def test_study_overheads_ratios_and_uncounted_work(tmp_path):
    runs = {"ref": [run("ref", "seqf", 1.0, 100), run("ref", "seqf", 3.0, 100, seed=1)],   # 0.2 s/step mean
            "si": [run("si", "si", 3.0, 100, mem=150)],                                    # time 1.5x, FLOPs 1x
            "ewc": [run("ewc", "ewc", 4.0, 150, passes=500)],                               # FLOPs (150*10+500)/10 = 200: 2x
            "teir": [run("teir", "cllclip", 3.0, 100, teir=True)],
            "new": [run("new", "brand-new", 5.0, 100)]}
    for exp, rs in runs.items():
        for r in rs:
            write_json(tmp_path / "study-seed0" / exp / f"seed{r['seed']}" / "results.json", r)
    found = pf.discover_runs(tmp_path, list(runs) + ["absent"])
    assert list(found) == list(runs) and len(found["ref"]) == 2
    t = pf.study_overheads(found, "ref")
    assert t.loc["ref", "time ratio"] == 1 and t.loc["ref", "seeds"] == 2
    assert t.loc["si", "time ratio"] == pytest.approx(1.5) and t.loc["si", "FLOP ratio"] == 1
    assert t.loc["si", "memory ratio"] == 1.5 and not t.loc["si", "within"]
    assert "path-integral" in t.loc["si", "likely uncounted work (rows over target)"]
    assert t.loc["ewc", "FLOP ratio"] == pytest.approx(2.0) and t.loc["ewc", "within"]      # 2.0 <= 2.0 x 1.1
    assert t.loc["ewc", "likely uncounted work (rows over target)"] == ""
    assert "TEIR" in t.loc["teir", "likely uncounted work (rows over target)"]
    assert t.loc["new", "likely uncounted work (rows over target)"] == "not analysed"


def test_study_overheads_needs_flop_counts():
    old = run("ref", "seqf", 1.0, 100)
    for t in old["train"]:
        del t["flops_per_step"]
    with pytest.raises(ValueError, match="no runs with FLOP counts"):
        pf.study_overheads({"ref": [old]}, "ref")
