"""The `long` profile (issue 48): `vlcp run --list` over a mapping of lists with `--except`,
`vlcp report render -p`, long/dvc.yaml's stages, and the FoMo and CTP notebooks' setup with `long = True`."""
import json
from pathlib import Path

import pytest
import yaml

from vlcp import cli
from vlcp.errors import VlcpError

ROOT = Path(__file__).parents[1]


def test_experiment_list_flattens_a_mapping_of_lists_in_order_once():
    params = {"a": {"x": ["e1", "e2"], "y": ["e2", "e3"]}, "b": ["e4"], "c": {"x": [1]}}
    assert cli._experiment_list(params, "a", "--list a", "p.yaml") == ["e1", "e2", "e3"]
    assert cli._experiment_list(params, "b", "--list b", "p.yaml") == ["e4"]
    with pytest.raises(VlcpError, match="a mapping of such lists"):
        cli._experiment_list(params, "c", "--list c", "p.yaml")


def test_run_except_leaves_out_the_subsets_experiments(monkeypatch, tmp_path):
    ran = []
    monkeypatch.setattr(cli, "_run_one", lambda cfg, out, *a: ran.append(out.parent.name) or out / "results.json")
    cli.main(["run", "--list", "report.fomo.studies", "--except", "report.fomo.spread.experiments", "--seed", "3",
              "--params", str(ROOT / "params.yaml"), "--out", str(tmp_path)])
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    fomo = params["report"]["fomo"]
    every = list(dict.fromkeys(e for v in fomo["studies"].values() for e in v))
    assert ran == [e for e in every if e not in fomo["spread"]["experiments"]] and "fomo-ema-merge" not in ran
    assert cli.main(["run", "fomo-ft", "--except", "report.fomo.spread.experiments", "--params", str(ROOT / "params.yaml")]) != 0


def test_render_passes_parameters_and_the_reports_folder(monkeypatch, tmp_path):
    import vlcp.report.render as render

    seen = {}
    monkeypatch.setattr(render, "render_notebook", lambda nb, reports, parameters: seen.update(parameters) or (nb, reports))
    assert cli.main(["report", "render", "x.ipynb", "--reports", str(tmp_path), "-p", "long=true", "-p", "seeds=[1, 2]"]) == 0
    assert seen == {"reports_dir": str(tmp_path), "long": True, "seeds": [1, 2]}
    assert cli.main(["report", "render", "x.ipynb", "-p", "long"]) != 0          # not KEY=VALUE: a clear error


def test_long_pipeline_is_apart_from_the_default_and_reads_the_root_params():
    dvc = yaml.safe_load((ROOT / "long" / "dvc.yaml").read_text())
    assert dvc["vars"] == ["../params.yaml"]
    run = dvc["stages"]["run_fomo_long"]
    assert run["foreach"] == "${report.fomo.long.seeds}" and run["do"]["wdir"] == ".."
    assert "--except report.fomo.spread.experiments" in run["do"]["cmd"] and "--jobs 2" in run["do"]["cmd"]
    out = run["do"]["outs"][0]
    assert list(out.values())[0]["persist"] is True            # an interrupted stage keeps its finished runs
    assert "-p long=true" in dvc["stages"]["fomo_figures_long"]["cmd"]
    root = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert not any("long" in name for name in root)            # `dvc repro` (the default) never runs them
    long = yaml.safe_load((ROOT / "params.yaml").read_text())["report"]["fomo"]["long"]
    spread = yaml.safe_load((ROOT / "params.yaml").read_text())["report"]["fomo"]["spread"]
    assert long["seeds"] and 0 not in long["seeds"] and set(long["seeds"]) <= set(spread["seeds"])   # the subset has them already


def run(gm: float) -> dict:
    """A FoMo results dict: θ0 (10, 40), then one task ending at A_KA = A_ZS = gm."""
    rows = [{"A_KA": ka, "A_ZS": zs, "GM": (ka * zs) ** 0.5, "datasets": {"a": ka, "r": zs}} for ka, zs in [(10, 40), (gm, gm)]]
    return {"zero_shot": rows[0], "trajectory": rows[1:], "datasets": {"a": {"role": "adaptation", "n": 100},
                                                                        "r": {"role": "retention", "n": 100}}}


def test_notebook_setup_with_long_merges_every_rows_seeds(tmp_path, monkeypatch):
    from vlcp.report import fomo as fm
    from vlcp.utils import write_json

    nb = json.loads((ROOT / "notebooks" / "fomo_figures.ipynb").read_text())
    cell = next("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code" and "fm.subset_spread(" in "".join(c["source"]))
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["report"]["fomo"]["studies"] = {"methods": ["fomo-ft", "fomo-ema-merge", "fomo-lora4"]}
    params["report"]["fomo"]["spread"] = {"experiments": ["fomo-ft", "fomo-ema-merge"], "seeds": [1]}
    params["report"]["fomo"]["long"] = {"runs": str(tmp_path / "long"), "seeds": [1, 2],
                                        "studies": {"table5": ["fomo-isolated"], "length": ["fomo-ema-t50"]}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    for e, gm in (("fomo-ft", 20), ("fomo-ema-merge", 25), ("fomo-lora4", 18)):
        write_json(tmp_path / "runs" / "methods" / e / "seed0" / "results.json", run(gm))
    for e in ("fomo-ft", "fomo-ema-merge"):
        write_json(tmp_path / "runs" / "spread-seed1" / e / "seed1" / "results.json", run(21))
    for s in (1, 2):
        write_json(tmp_path / "long" / f"seed{s}" / "fomo-lora4" / f"seed{s}" / "results.json", run(18 + s))
    write_json(tmp_path / "long" / "table5" / "fomo-isolated" / "seed0" / "results.json", run(30))   # a row only the long profile runs
    monkeypatch.chdir(ROOT)
    ns = {"params_file": str(tmp_path / "params.yaml"), "runs_dir": str(tmp_path / "runs"), "run_live": False, "long": True}
    exec(cell, ns)
    assert sorted(ns["subset"]["fomo-lora4"]) == [0, 1, 2] and fm.endpoint(ns["subset"]["fomo-lora4"][2])["GM"] == pytest.approx(20)
    assert sorted(ns["subset"]["fomo-ft"]) == [0, 1]              # the subset's own seeds: not looked for in the long runs
    assert "fomo-lora4" in ns["spread"]["source"]
    assert fm.endpoint(ns["runs"]["fomo-isolated"])["GM"] == pytest.approx(30)   # the long-only rows join the study's runs
    assert "fomo-ema-t50" in ns["long_missing"] and "fomo-isolated" not in ns["long_missing"]


def test_the_long_profile_runs_every_row_a_report_says_it_renders():
    from vlcp.report.paper import coverage, not_rendered

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    rows = [e for v in params["report"]["fomo"]["long"]["studies"].values() for e in v]
    named = [e for g in coverage("fomo").not_rendered for e in g.experiments]
    assert sorted(named) == sorted(rows)                          # each long-only row renders a named item, and back
    assert all(e in params["experiments"] for e in rows)
    stage = yaml.safe_load((ROOT / "long" / "dvc.yaml").read_text())["stages"]["run_fomo_long_rows"]
    assert stage["foreach"] == "${report.fomo.long.studies}" and "--seed ${report.fomo.seed}" in stage["do"]["cmd"]
    assert list(stage["do"]["outs"][0].values())[0]["persist"] is True
    default = not_rendered("fomo")
    assert {"Table 5", "Table 4", "Fig. 12 right", "Fig. 19 centre"} <= set(default["item"])
    assert "long profile" in default.set_index("item").loc["Table 5", "what would render it"]
    rendered = not_rendered("fomo", rows)                         # the long report: those items drop out
    gaps = rendered[rendered["rendered"] != "does not apply"]
    assert set(gaps["item"]) == {"Fig. 19 centre", "Fig. 19 right"} and len(gaps) == 2   # B/32; T = 200
    assert {"Fig. 1", "Fig. 8"} <= set(rendered[rendered["rendered"] == "does not apply"]["item"])
    assert not_rendered("ctp")["rendered"].eq("does not apply").all()   # every applicable CTP item renders



def test_ctp_long_stages_run_table1_and_the_ablations_at_more_seeds():
    dvc = yaml.safe_load((ROOT / "long" / "dvc.yaml").read_text())["stages"]
    t1, abl = dvc["run_ctp_long"], dvc["run_ctp_long_ablations"]
    assert t1["foreach"] == "${report.ctp.long.seeds}" and "--list report.ctp.experiments" in t1["do"]["cmd"]
    assert "--jobs" not in t1["do"]["cmd"]                      # Table 1's timings feed the time claims: one process
    assert abl["foreach"] == "${report.ctp.long.ablation_seeds}" and "--jobs 2" in abl["do"]["cmd"]
    assert all(list(s["do"]["outs"][0].values())[0]["persist"] is True for s in (t1, abl))
    assert "-p long=true" in dvc["ctp_tables_long"]["cmd"] and "reports/long" in dvc["ctp_tables_long"]["cmd"]
    ctp = yaml.safe_load((ROOT / "params.yaml").read_text())["report"]["ctp"]
    assert not set(ctp["long"]["seeds"]) & set(ctp["seeds"])                      # more seeds, never the same again
    assert not set(ctp["long"]["ablation_seeds"]) & set(ctp["ablation_seeds"])
    assert set(ctp["long"]["ablation_seeds"]) <= set(ctp["seeds"])                # Table 2's SeqF/CTP rows come from Table 1's


def test_ctp_notebook_setup_with_long_reads_both_runs_folders_paired_by_seed(tmp_path, monkeypatch):
    from vlcp.report import ctp
    from vlcp.utils import write_json

    nb = json.loads((ROOT / "notebooks" / "ctp_tables.ipynb").read_text())
    cell = next("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code" and "ctp.study_config(" in "".join(c["source"]))
    params = {"report": {"ctp": {"seeds": [0], "ablation_seeds": [0],
                                 "table1": {"memory-free": ["ctp-seqf"], "upper bound": ["ctp-jointt"]},
                                 "table2": ["ctp-seqf", "ctp-abl-cmc"], "table3": {}, "momentum": {}, "reversed": [],
                                 "long": {"runs": str(tmp_path / "long"), "seeds": [3], "ablation_seeds": [1]}}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))

    def result(e, s):
        return {"experiment": e, "seed": s, "tasks": ["a"], "train": [{"seconds": 1.0, "steps": 1}],
                "cumulative": [{"test": {"Rm": 10.0 + s}}], "config": {}}
    for s in (0, 1):   # the default pipeline: Table 1 at seeds 0-1 (0 is the study's; 1 serves the long ablations)
        for e in ("ctp-seqf", "ctp-jointt"):
            write_json(tmp_path / "runs" / f"table1-seed{s}" / e / f"seed{s}" / "results.json", result(e, s))
    write_json(tmp_path / "runs" / "ablations-seed0" / "ctp-abl-cmc" / "seed0" / "results.json", result("ctp-abl-cmc", 0))
    for e in ("ctp-seqf", "ctp-jointt"):
        write_json(tmp_path / "long" / "table1-seed3" / e / "seed3" / "results.json", result(e, 3))
    write_json(tmp_path / "long" / "ablations-seed1" / "ctp-abl-cmc" / "seed1" / "results.json", result("ctp-abl-cmc", 1))
    monkeypatch.chdir(ROOT)
    base = {"params_file": str(tmp_path / "params.yaml"), "runs_dir": str(tmp_path / "runs"), "run_live": False}
    for k in ("seeds", "ablation_seeds", "table1", "table2", "table3", "momentum", "reversed_methods", "noise_floor"):
        base[k] = None
    ns = dict(base, long=False)
    exec(cell.split("\nif report:")[0], ns)                    # the default profile: the long runs are not read
    assert ns["study"]["seeds"] == [0] and "more_runs" not in ns["study"]
    ns = dict(base, long=True)
    exec(cell, ns)
    assert ns["study"]["seeds"] == [0, 3] and ns["study"]["ablation_seeds"] == [0, 1]
    assert [r["seed"] for r in ns["runs1"]["ctp-seqf"]] == [0, 3] and not ns["missing1"]
    assert [r["seed"] for r in ns["runs_abl"]["ctp-abl-cmc"]] == [0, 1]
    # Table 2's SeqF row: the ablation seeds' runs (seed 1 from the default's Table 1 folder) and Table 1's own seeds
    assert [r["seed"] for r in ns["runs_abl"]["ctp-seqf"]] == [0, 1, 3]
    write_json(tmp_path / "long" / "x" / "ctp-seqf" / "seed0" / "results.json", result("ctp-seqf", 0))
    with pytest.raises(VlcpError, match="more than one place"):   # one run in both folders: named, not guessed
        ctp.ledger_runs(params["report"]["ctp"], str(tmp_path / "runs"), long=True)


def test_a_reports_title_is_its_notebooks_first_heading():
    import nbformat

    from vlcp.report.render import title

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"),
                                         nbformat.v4.new_markdown_cell("intro\n# CTP on the emoji benchmark\n## 1.")])
    assert title(nb, "ctp_tables") == "CTP on the emoji benchmark"
    assert title(nbformat.v4.new_notebook(), "ctp_tables") == "ctp_tables"


def test_one_seed_shows_as_one_seed_not_a_zero_spread():
    from vlcp.report.results import over_seeds

    assert over_seeds([4.25]) == "4.2 (1 seed)" and over_seeds([4.0, 6.0]) == "5.0 ± 1.4"


def test_every_embedded_figure_gets_the_alt_text_of_its_section():
    import nbformat

    from vlcp.report.render import figure_alts, with_alt_text

    png = {"output_type": "display_data", "data": {"image/png": "AAAA"}, "metadata": {}}
    cell = nbformat.v4.new_code_cell("plot()")
    cell.outputs = [nbformat.from_dict(png), nbformat.from_dict(png)]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("## 6. Fig. 3: convergence"), cell])
    alts = figure_alts(nb)
    assert alts == ["figure 1 of '6. Fig. 3: convergence'", "figure 2 of '6. Fig. 3: convergence'"]
    generic = '<img alt="No description has been provided for this image" class="" src="data:image/png;base64,'
    body = with_alt_text(f'x{generic}AAAA">y<img src="data:image/png;base64,BBBB">', alts)   # nbconvert's, and none
    assert body.count('alt="figure') == 2 and "&#x27;6. Fig. 3: convergence&#x27;" in body
    assert "No description" not in body and body.count("alt=") == 2


def test_tidy_tables_drops_row_numbers_and_keeps_a_real_index(tmp_path):
    """In a kernel, a DataFrame indexed 0, 1, 2... shows without that column; a named index stays."""
    import nbformat
    import papermill

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import pandas as pd\nfrom vlcp.report import tidy_tables\ntidy_tables()\n"
        "display(pd.DataFrame({'a': [1.5, 2.25]}))\ndisplay(pd.DataFrame({'a': [1, 2]}, index=['x', 'y']))")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "python3", "language": "python"}
    nbformat.write(nb, tmp_path / "t.ipynb")
    papermill.execute_notebook(str(tmp_path / "t.ipynb"), str(tmp_path / "o.ipynb"), progress_bar=False,
                               kernel_name="python3")
    rows, named = [o["data"]["text/html"] for o in nbformat.read(tmp_path / "o.ipynb", as_version=4).cells[0].outputs]
    assert ">0</th>" not in rows and "2.25" in rows
    assert ">x</th>" in named


def test_a_partial_repro_is_named_briefly_with_the_command_that_makes_it(tmp_path):
    from vlcp.report import live

    (tmp_path / "runs" / "seqf" / "seed0").mkdir(parents=True)
    (tmp_path / "runs" / "seqf" / "seed0" / "results.json").write_text("{}")
    expected = [tmp_path / "runs" / e / "seed0" / "results.json" for e in ("seqf", "er", "jointt", "ewc", "lwf")]
    absent = live.missing_outputs(*expected)
    assert len(absent) == 4                                           # the one run there is not missing
    note = live.missing_note(absent, "overview")
    assert "and 1 more" in note and "dvc repro overview" in note and "seqf" not in note


def test_incclip_long_stages_run_every_row_but_the_subsets_at_the_long_seeds():
    dvc = yaml.safe_load((ROOT / "long" / "dvc.yaml").read_text())["stages"]
    run = dvc["run_incclip_long"]
    assert run["foreach"] == "${report.incclip.long.seeds}" and run["do"]["wdir"] == ".."
    cmd = run["do"]["cmd"]
    assert "--list report.incclip.experiments --except report.incclip.spread.experiments" in cmd and "--jobs 2" in cmd
    assert list(run["do"]["outs"][0].values())[0]["persist"] is True
    render = dvc["incclip_ablations_long"]
    assert "-p long=true" in render["cmd"] and "reports/long" in render["cmd"]
    assert "${report.incclip.long.runs}" in render["deps"] and "runs-incclip" in render["deps"]
    ic = yaml.safe_load((ROOT / "params.yaml").read_text())["report"]["incclip"]
    assert not set(ic["long"]["seeds"]) & set(ic["seeds"])                        # more seeds, never the same again
    assert set(ic["long"]["seeds"]) <= set(ic["spread"]["seeds"])                # the subset has them already


def _incclip_run(experiment, seed, acc):
    cell = {f"{d}@{k}": acc for d in ("TR", "IR") for k in (1, 5, 10)} | {"Rm": acc}
    return {"experiment": experiment, "seed": seed, "tasks": ["a", "b"], "task_sizes": [10, 10],
            "heldout": [{"classification": {"test/subgroup": acc, "shape": acc},
                         "retrieval": {"test": cell, "unseen_style": cell}}] * 2,
            "matrix": {"test": {"Rm": [[acc, 0.0], [acc, acc]]}}, "train": [{"seconds": 1.0, "steps": 5}] * 2,
            "config": {"model": {"name": "m"}, "train": {"steps": 10, "batch_size": 4, "lr": 1e-3},
                       "method": {"buffer_size": 2, "replay_fraction": 0.5}}}


def test_incclip_notebook_setup_with_long_reads_every_row_at_the_long_seeds(tmp_path, monkeypatch):
    """long = True: the rows outside the seed subset come from the long runs at its seeds, the
    subset's from its own (so every row has seeds 0-2, paired by seed); the main claims keep the
    subset's five."""
    from vlcp.utils import write_json

    nb = json.loads((ROOT / "notebooks" / "incclip_ablations.ipynb").read_text())
    cell = next("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code" and "ic.subset_spread(" in "".join(c["source"]))
    spread = ["ic4-er", "ic4-incclip"]
    exps = [*spread, "ic8-incclip"]
    study = {"seeds": [0], "methods": ["er", "incclip"], "splits": {"ic4": "4 steps", "ic8": "8 steps"},
             "spread": {"experiments": spread, "seeds": [1, 2, 3]}, "experiments": exps, "noise_floor": 3.4,
             "long": {"runs": str(tmp_path / "long"), "seeds": [1, 2]}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"report": {"incclip": study}}))
    runs_dir = tmp_path / "runs"
    for e in exps:
        write_json(runs_dir / "stream-seed0" / e / "seed0" / "results.json", _incclip_run(e, 0, 10.0))
    for s in (1, 2, 3):
        for e in spread:
            write_json(runs_dir / f"spread-seed{s}" / e / f"seed{s}" / "results.json", _incclip_run(e, s, 10.0 + s))
    for s in (1, 2):
        write_json(tmp_path / "long" / f"seed{s}" / "ic8-incclip" / f"seed{s}" / "results.json", _incclip_run("ic8-incclip", s, 20.0 + s))
    monkeypatch.chdir(ROOT)
    ns = {"params_file": str(tmp_path / "params.yaml"), "runs_dir": str(runs_dir), "run_live": False, "long": True}
    exec(cell, ns)
    assert ns["seeds"] == [0, 1, 2] and all(len(rs) == 3 for rs in ns["runs"].values())
    assert [r["seed"] for r in ns["runs"]["ic8-incclip"]] == [0, 1, 2] and ns["runs"]["ic8-incclip"][2]["heldout"][0]["classification"]["shape"] == 22.0
    assert [r["seed"] for r in ns["runs"]["ic4-er"]] == [0, 1, 2]                # the subset's runs serve the long seeds
    assert len(ns["deep"]["ic4-er"]) == 4 and len(ns["deep"]["ic8-incclip"]) == 3  # the main claims: every subset seed
    (tmp_path / "long" / "seed2" / "ic8-incclip" / "seed2" / "results.json").unlink()
    with pytest.raises(VlcpError, match="long/ic8-incclip/seed2/results.json: missing"):
        exec(cell, ns | {"long": True})
    ns = {"params_file": str(tmp_path / "params.yaml"), "runs_dir": str(runs_dir), "run_live": False, "long": False}
    exec(cell, ns)
    assert ns["seeds"] == [0] and len(ns["runs"]["ic8-incclip"]) == 1              # by default: the study's seed alone


def test_cllclip_long_stages_run_every_row_but_the_subsets_at_the_long_seeds():
    dvc = yaml.safe_load((ROOT / "long" / "dvc.yaml").read_text())["stages"]
    run = dvc["run_cllclip_long"]
    assert run["foreach"] == "${report.cllclip.long.seeds}" and "models/cll-base.pt" in run["do"]["deps"]
    assert "--list report.cllclip.experiments --except report.cllclip.spread.experiments" in run["do"]["cmd"]
    assert list(run["do"]["outs"][0].values())[0]["persist"] is True
    assert "-p long=true" in dvc["cllclip_teir_long"]["cmd"] and "${report.cllclip.long.runs}" in dvc["cllclip_teir_long"]["deps"]
    cll = yaml.safe_load((ROOT / "params.yaml").read_text())["report"]["cllclip"]
    assert not set(cll["long"]["seeds"]) & set(cll["seeds"]) and set(cll["long"]["seeds"]) <= set(cll["spread"]["seeds"])


def test_long_reads_adds_the_long_seeds_once_and_their_folder_after_the_studys():
    from vlcp.report.results import long_reads

    study = {"long": {"seeds": [1, 2], "runs": "runs-x-long"}}
    assert long_reads(study, "runs-x", [0, 1]) == ([0, 1, 2], ["runs-x", "runs-x-long"])
    assert long_reads(study, "runs-x", [0]) == ([0, 1, 2], ["runs-x", "runs-x-long"])
