"""`vlcp update`'s planning figures agree: the plan line and docs/update.md's 'Costs' table quote the
one measured step file (benchmarks/results/update_step.json), the README and examples/update quote
no step time of their own and use the CLI's defaults (or say why not), docs/update.md names the one
default prompt-template set, the random-weights line fits the model, and vlcp's peft / galore
imports print nothing of bitsandbytes'."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from vlcp.config import TrainCfg, UpdateCfg

ROOT = Path(__file__).resolve().parents[1]
STEP_JSON = ROOT / "benchmarks" / "results" / "update_step.json"
UNIT_SECONDS = {"s": 1, "min": 60, "h": 3600}
STEP_TIME = re.compile(r"\d+(?:\.\d+)?(?:\s*[–-]\s*\d+(?:\.\d+)?)?\s*(?:s|sec|seconds)\b|s/step|s a step")


@pytest.fixture(scope="module")
def bench():
    return json.loads(STEP_JSON.read_text())


def section(text: str, heading: str) -> str:
    """The markdown section under `heading` (a '## ' line), up to the next '## ' heading."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def scaled(row: dict, steps: int, batch: int) -> float:
    return row["seconds_per_step"] * batch / row["batch_size"] * steps


@pytest.mark.parametrize("model", ["ViT-B-32", "vlcp-tiny"])
def test_plan_quotes_the_measured_step_scaled_to_its_steps_and_batch(bench, model):
    from vlcp.run.streams.user import plan

    row = bench["models"][model]
    line = plan([100, 100], 128, [], 1000, model)
    assert f"measured {model} at {row['seconds_per_step']:.2f} s a step at batch {row['batch_size']}" in line
    assert f"{bench['threads']} threads, {bench['cpus']} CPUs, {bench['processor']}" in line
    said = re.search(r"about (\d+(?:\.\d+)?) (s|min|h) for 200 step\(s\) at batch 128", line)
    assert said, line
    assert float(said[1]) * UNIT_SECONDS[said[2]] == pytest.approx(scaled(row, 200, 128), rel=0.06)


def test_plan_without_a_measurement_says_nothing_of_one(tmp_path):
    from vlcp.run.streams.user import plan

    for model, path in (("ViT-L-14", STEP_JSON), ("ViT-B-32", tmp_path / "absent.json")):
        line = plan([10], 8, [], 1000, model, path)
        assert line.startswith("vlcp update: plan: 1 chunk(s) × 10 steps at batch 8")
        assert "update_step.py measured" not in line


def test_docs_costs_table_equals_the_measured_steps(bench):
    costs = section((ROOT / "docs" / "update.md").read_text(), "Costs")
    flat = " ".join(costs.split())
    assert f"{bench['threads']} threads, {bench['cpus']} CPUs, {bench['processor']}" in flat
    header = next(line for line in costs.splitlines() if line.startswith("| model |"))
    assert f"({UpdateCfg().steps} steps at batch {TrainCfg().batch_size})" in header
    rows = {cells[0]: cells[1:] for line in costs.splitlines() if line.startswith("| ") and "---" not in line
            for cells in [[c.strip() for c in line.strip("|").split("|")]] if cells[0] != "model"}
    assert sorted(rows) == sorted(bench["models"])
    for model, (per_step, defaults) in rows.items():
        row = bench["models"][model]
        assert f"s/step at batch {row['batch_size']}" in header
        assert per_step == f"{row['seconds_per_step']:.2f}", model
        said = re.search(r"(\d+(?:\.\d+)?) (s|min|h)\b", defaults)
        assert said, defaults
        assert float(said[1]) * UNIT_SECONDS[said[2]] == pytest.approx(
            scaled(row, UpdateCfg().steps, TrainCfg().batch_size), rel=0.06), model


def test_readme_update_section_quotes_no_step_time_and_links_the_table():
    update = section((ROOT / "README.md").read_text(), "Keep your own CLIP current")
    assert not STEP_TIME.findall(update), STEP_TIME.findall(update)
    assert "docs/update.md#costs" in update


def test_example_uses_the_cli_defaults_or_says_why_not():
    from vlcp.update.recipes import FOMO_TRAIN

    params = yaml.safe_load((ROOT / "examples" / "update" / "params.yaml").read_text())
    readme = " ".join((ROOT / "examples" / "update" / "README.md").read_text().split())
    assert params["batch_size"] == TrainCfg().batch_size and params["lr"] == FOMO_TRAIN["lr"]
    if params["steps"] != UpdateCfg().steps:
        assert f"{params['steps']} a month is this example's own choice, not the default ({UpdateCfg().steps}" in readme
    assert not STEP_TIME.findall(readme), STEP_TIME.findall(readme)
    assert "docs/update.md#costs" in readme


def test_docs_name_one_default_template_set_the_codes():
    from vlcp.data.formats.layouts import _default_templates

    assert UpdateCfg().templates == "simple" and len(_default_templates("simple")) == 7
    text = " ".join((ROOT / "docs" / "update.md").read_text().split())
    clauses = re.split(r"[;|]|\. ", text)
    assert [c for c in clauses if "7 simple" in c]
    assert not [c for c in clauses if "CLIP's 80" in c and "--templates openai" not in c]


def test_random_weights_line_fits_the_model(capsys):
    from vlcp.models.clip import note_random_init

    note_random_init.cache_clear()
    note_random_init("ViT-B-32")
    b32 = capsys.readouterr().err
    note_random_init("vlcp-tiny")
    tiny = capsys.readouterr().err
    note_random_init.cache_clear()
    assert "vlcp: ViT-B-32 starts from random weights" in b32 and "--pretrained FILE" in b32
    assert "tiny profile" not in b32
    assert "vlcp: vlcp-tiny starts from random weights" in tiny and "expected for the tiny profile's models" in tiny


PROBE = """
import torch
from vlcp.config import TrainCfg
from vlcp.methods import get_method
import vlcp.methods.lora, vlcp.methods.galore  # noqa
for name in ("lora", "galore"):
    method = get_method(name)(get_method(name).Config(), seed=0)
    method.peft_config() if name == "lora" else method.make_optimizer(torch.nn.Linear(4, 4), TrainCfg())
    print("built", name)
"""


def test_vlcps_peft_and_galore_imports_print_no_bitsandbytes_warning():
    """One fresh process imports both (what they print at import time is the point) and builds each."""
    r = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "built lora" in r.stdout and "built galore" in r.stdout
    assert "kernels" not in r.stdout + r.stderr, r.stderr
