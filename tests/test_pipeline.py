"""A tiny end-to-end `dvc repro` of the real pipeline (3 groups, few steps, one seed) in a scratch
git repo: data prepare -> runs (spine, CTP, IncCLIP, CLL-CLIP and FoMo-in-Flux studies) -> papermill notebooks -> HTML -> index;
then a no-op, and which stages an edit of params.yaml invalidates."""
import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "scripts"))
from demo import demo_params  # noqa: E402  (scripts/demo.py: `make demo`)
from test_findings import readable_ledger_problems  # noqa: E402
from pipeline import other_load, pace_first, pace_probe, seqf_seconds_per_step, timed_repro  # noqa: E402  (benchmarks/pipeline.py: dvc repro with each stage's seconds, the pace)


def ci_params(params: dict, steps: int = 12, language_steps: int = 6) -> dict:
    """params.yaml sized for CI: one seed, three groups, a few rows of each study's tables, and every
    step count small whatever the default profile's calibration sets: the tiny profile's own steps,
    every model alias's and every experiment's `train.steps` are capped (`language_steps` for the
    CLL-CLIP streams), and the FoMo stream runs 3 tasks of 2 steps."""
    params = copy.deepcopy(params)
    for layer in [params["profiles"]["tiny"], *params["profiles"]["tiny"].get("model_aliases", {}).values(),
                  *(e or {} for e in params["experiments"].values())]:
        if isinstance(layer.get("train"), dict) and "steps" in layer["train"]:
            layer["train"] = {**layer["train"], "steps": min(layer["train"]["steps"], steps)}
    params["seeds"] = [0]
    params["defaults"]["data"]["styles"] = ["twemoji", "noto-mono", "openmoji"]
    params["profiles"]["tiny"]["train"].update(steps=steps, batch_size=16, num_threads=1, progress=False)
    params["profiles"]["tiny"]["data"]["tasks"] = ["Smileys & Emotion", "Activities", "Flags"]
    params["profiles"]["tiny"]["data"]["num_languages"] = 3           # the CLL-CLIP stream: en + 2
    for name, exp in params["experiments"].items():
        if name.startswith("cll"):                                     # cll-* and the 36-language cll36-*
            exp["train"] = {**(exp.get("train") or {}), "steps": steps if name == "cll-base" else language_steps, "batch_size": 16}
        if name.startswith("cll36-"):
            exp["data"] = {**exp["data"], "num_languages": 3}
    params["experiments"]["ctp-base"]["train"] = {"steps": steps, "batch_size": 16}   # the CTP study's initialisation
    params["profiles"]["tiny"]["model_aliases"]["albef"]["train"] = {"steps": steps, "batch_size": 16}
    ctp = params["report"]["ctp"]                                      # the CTP study: a few rows of each table
    ctp.update(seeds=[0], experiments=["ctp-seqf", "ctp-ctp", "ctp-er", "ctp-jointt"],
               ablation_experiments=["ctp-abl-cmc", "ctp-rev-seqf", "ctp-rev-ctp"])
    incclip = params["report"]["incclip"]                              # the IncCLIP study: one open-choice alternative
    dropped = {c["experiment"] for c in incclip["sensitivity"][1:]}
    incclip.update(sensitivity=incclip["sensitivity"][:1], experiments=[e for e in incclip["experiments"] if e not in dropped])
    incclip["spread"] = {"experiments": ["ic4-incclip"], "seeds": [1]}   # the seed subsets: one experiment at one more seed
    methods = ["joint", "er", "incclip"]                               # Tables 1, 2, 6, 7: three of the six methods
    dropped |= {f"{split}-{m}" for split in incclip["splits"] for m in incclip["methods"] if m not in methods}
    incclip["memory"] = {p: e for p, e in incclip["memory"].items() if p in (10, 50)}   # Tables 4-5: two memory sizes
    dropped |= {e for e in params["experiments"] if e.startswith("ic4-incclip-mem")} - set(incclip["memory"].values())
    incclip.update(methods=methods, experiments=[e for e in incclip["experiments"] if e not in dropped])
    cll = params["report"]["cllclip"]                                  # the CLL-CLIP study: Table 2 for two methods, one of them †
    cll["spread"] = {"experiments": ["cll-clip"], "seeds": [1]}
    gone = {f"cll36-{m}{teir}" for m in cll["methods"] if m not in ("clip", "lora") for teir in ("", "-teir")}
    cll.update(methods=["clip", "lora"], experiments=[e for e in cll["experiments"] if e not in gone])
    for name, exp in params["experiments"].items():                    # the FoMo study: every group, 3 tasks of 2 steps
        if name.startswith("fomo-") and name != "fomo-base":
            exp["data"] = {**(exp.get("data") or {}), "tasks": []}
    for base in params["report"]["fomo"]["bases"]:                   # θ0 and the model-scaling study's two bases
        params["experiments"][base]["train"] = {"steps": steps, "batch_size": 16}
    params["profiles"]["tiny"]["fomo"] = {"steps_per_task": 2, "num_tasks": 3}
    fomo = params["report"]["fomo"]
    fomo["studies"] = {"methods": ["fomo-ft", "fomo-joint", "fomo-lora4", "fomo-ema-merge"], "orderings": ["fomo-o-sim"]}
    fomo["spread"] = {"experiments": ["fomo-ft"], "seeds": [1]}
    return params


def test_the_demo_is_the_spine_at_fewer_steps_and_seeds_and_nothing_else_changes():
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    demo = demo_params(params, seeds=(0, 1), steps=120)
    spine = lambda p: p["profiles"][p["profile"]]["model_aliases"]["spine"]   # noqa: E731
    assert demo["seeds"] == [0, 1] and spine(demo)["train"]["steps"] == min(spine(params)["train"]["steps"], 120)
    assert demo["profiles"][demo["profile"]]["train"]["progress"] is False
    for p in (params, demo):          # all else as the checkout's params
        p.pop("seeds")
        spine(p)["train"].pop("steps")
        p["profiles"][p["profile"]]["train"].pop("progress", None)
    assert demo == params


def test_a_probes_other_load_is_the_busy_share_it_did_not_use_itself():
    assert other_load(busy=60.0, own=58.0, wall=30.0, cpus=2) == pytest.approx(2 / 60, abs=1e-3)   # alone: its own CPU
    assert other_load(busy=60.0, own=40.0, wall=30.0, cpus=2) == pytest.approx(20 / 60, abs=1e-3)  # a third of the cores elsewhere
    assert other_load(busy=10.0, own=12.0, wall=30.0, cpus=2) == 0.0 and other_load(1.0, 0.0, 0.0, 2) == 0.0


def test_a_parts_spine_seqf_stages_run_first_and_a_whole_repro_is_one_pass():
    assert pace_first(("fomo_figures", "run@seqf-0", "run@seqf-1")) == [("run@seqf-0", "run@seqf-1"), ("fomo_figures",)]
    assert pace_first(("ctp_tables",)) == [("ctp_tables",)]
    assert pace_first(()) == [()]


@pytest.mark.slow
def test_tiny_dvc_repro(tmp_path_factory):
    # `make demo` first, in a scratch git repo with a clone's files (scripts/demo.py copies them; .gitignore:
    # what a user's `git add -A` leaves out, the checkpoints' GBs among them; of benchmarks/, the results
    # only: no bench stages), on the CI-sized params: the overview's stages; then the rest of `dvc repro`
    tmp_path = tmp_path_factory.mktemp("repo")
    params = ci_params(yaml.safe_load((ROOT / "params.yaml").read_text()))
    ctp, fomo = params["report"]["ctp"], params["report"]["fomo"]   # the studies' CI-sized lists, checked below
    ci_file = tmp_path_factory.mktemp("ci") / "params.yaml"
    ci_file.write_text(yaml.safe_dump(params, sort_keys=False))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               DVC_NO_ANALYTICS="1", HF_HUB_OFFLINE="1", PYTHONPATH=str(tmp_path), GIT_AUTHOR_NAME="vlcp",
               GIT_AUTHOR_EMAIL="vlcp@localhost", GIT_COMMITTER_NAME="vlcp", GIT_COMMITTER_EMAIL="vlcp@localhost")
    run = lambda *cmd: subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)  # noqa: E731
    assert run("git", "init", "-q").returncode == 0
    assert run("dvc", "init", "-q").returncode == 0
    demo = run(sys.executable, str(ROOT / "scripts" / "demo.py"), "--dir", str(tmp_path), "--params", str(ci_file))
    assert demo.returncode == 0, demo.stdout[-4000:] + demo.stderr[-4000:]
    assert f"demo: open {tmp_path / 'reports' / 'overview.html'}" in demo.stdout
    assert (tmp_path / "params.yaml").read_text() == ci_file.read_text()
    assert not (tmp_path / "reports" / "ctp_tables.html").exists()      # the demo renders the overview alone
    r = timed_repro(tmp_path, env, echo="tiny repro")
    assert r.returncode == 0, r.log[-6000:]
    assert "without encryption" not in r.log          # no kernel start-up warning on every render (issue 46)

    for exp in params["report"]["overview"]["experiments"]:
        assert (tmp_path / "runs" / exp / "seed0" / "results.json").exists()
    html = (tmp_path / "reports" / "overview.html").read_text()
    assert "Claims ledger" in html and "SeqF vs ER vs JointT" in html
    assert "Traceback" not in html and "Error" not in html.split("Claims ledger")[0][-2000:]
    assert html.count("data:image/png") >= 5          # contact sheet, sizes, curves, task curves, matrices
    perf = (tmp_path / "reports" / "performance.html").read_text()
    assert "Traceback" not in perf and perf.count("data:image/png") >= 3
    inc = (tmp_path / "reports" / "incclip_ablations.html").read_text()
    assert "Claims ledger" in inc and "Traceback" not in inc and inc.count("data:image/png") >= 2
    for exp in params["report"]["incclip"]["experiments"]:
        assert (tmp_path / "runs-incclip" / "stream-seed0" / exp / "seed0" / "results.json").exists()
    assert (tmp_path / "runs-incclip" / "spread-seed1" / "ic4-incclip" / "seed1" / "results.json").exists()   # the seed subsets
    assert (tmp_path / "runs-cllclip" / "spread-seed1" / "cll-clip" / "seed1" / "results.json").exists()
    assert (tmp_path / "runs-fomo" / "spread-seed1" / "fomo-ft" / "seed1" / "results.json").exists()
    cll = (tmp_path / "reports" / "cllclip_teir.html").read_text()
    assert "Claims ledger" in cll and "Traceback" not in cll and cll.count("data:image/png") >= 5
    for exp in params["report"]["cllclip"]["experiments"]:
        assert (tmp_path / "runs-cllclip" / "stream-seed0" / exp / "seed0" / "results.json").exists()
    ctp_html = (tmp_path / "reports" / "ctp_tables.html").read_text()
    assert "Claims ledger" in ctp_html and "Traceback" not in ctp_html and ctp_html.count("data:image/png") >= 1
    for study, exps in (("table1", ctp["experiments"]), ("ablations", ctp["ablation_experiments"])):
        for exp in exps:
            assert (tmp_path / "runs-ctp" / f"{study}-seed0" / exp / "seed0" / "results.json").exists()
    assert (tmp_path / "models" / "ctp-base.pt").exists()
    fomo_html = (tmp_path / "reports" / "fomo_figures.html").read_text()
    assert "Claims ledger" in fomo_html and "Traceback" not in fomo_html and fomo_html.count("data:image/png") >= 8
    for study, exps in fomo["studies"].items():
        for exp in exps:
            assert (tmp_path / "runs-fomo" / study / exp / "seed0" / "results.json").exists()
    index = (tmp_path / "reports" / "index.html").read_text()
    assert "fomo_figures.html" in index and "Model merging gives the best" in index
    assert "ctp_tables.html" in index and "CTP beats every memory-free baseline" in index
    assert "cllclip_teir.html" in index and "TEIR improves AR and F of every method" in index
    assert "incclip_ablations.html" in index and "IncCLIP beats every baseline" in index
    assert "overview.html" in index and "performance.html" in index and "final Rm orders JointT &gt; ER &gt; SeqF" in index
    assert any(v in index for v in ("confirmed", "inconclusive", "not confirmed"))
    for name in ("overview", "performance", "ctp_tables", "incclip_ablations", "cllclip_teir", "fomo_figures"):
        page = (tmp_path / "reports" / f"{name}.html").read_text()   # each opens with what its study found
        found = page.find("What this study found")
        assert found > 0 and page.rfind("<h2", 0, found) == page.find("<h2", page.find("<h1")), name   # the first section
        assert "claims**" not in page and "At this scale, " in page[found:found + 2000], name
        assert 'class="vlcp-ledger"' in page and readable_ledger_problems(page) == [], name   # tests/test_findings.py
    for page in (tmp_path / "reports").glob("*.html"):            # no library warning tops a report
        assert "Warning:" not in page.read_text(), page.name
        assert "<title>Notebook</title>" not in page.read_text(), page.name      # each titled by its study
        assert "No description has been provided" not in page.read_text(), page.name   # every figure: its alt text
    assert (tmp_path / "dvc.lock").exists()

    again = run("dvc", "repro")
    assert again.returncode == 0 and "up to date" in again.stdout
    # benchmarks/pipeline.py's pace at both ends: the spine's SeqF runs, then one more SeqF run that leaves nothing behind
    pace, others = pace_probe(tmp_path, env)   # with the share of the cores other work kept busy meanwhile
    assert seqf_seconds_per_step(tmp_path / "runs") > 0 and pace > 0 and (others is None or 0 <= others <= 1)
    assert not (tmp_path / ".pace-probe").exists() and "up to date" in run("dvc", "repro").stdout

    # DVC's own tools: every study's headline metrics, the curves, and an experiment compared with them
    shown = run("dvc", "metrics", "show", "--json")
    assert shown.returncode == 0, shown.stderr
    for study in ("overview", "ctp", "incclip", "cllclip", "fomo"):
        assert f"metrics/{study}.json" in shown.stdout
    er_rm = json.loads((tmp_path / "metrics" / "overview.json").read_text())["experiments"]["er"]["Rm"]
    plots = run("dvc", "plots", "show", "--out", "dvc_plots")
    assert plots.returncode == 0 and (tmp_path / "dvc_plots" / "index.html").exists(), plots.stderr
    assert run("git", "add", "-A").returncode == 0 and run("git", "commit", "-qm", "baseline").returncode == 0
    committed = run("git", "ls-files").stdout.splitlines()     # the user's commit: code, params, dvc.lock, no run output
    assert "dvc.lock" in committed and not [f for f in committed if f.startswith(("checkpoints/", "runs", "models/"))]
    exp = run("dvc", "exp", "run", "-S", "experiments.er.method.buffer_size=40")
    assert exp.returncode == 0, exp.stdout[-2000:] + exp.stderr[-2000:]
    assert "Running stage 'run@er-0'" in exp.stdout                          # only what the change touches
    assert "Running stage 'run@seqf-0'" not in exp.stdout and "Running stage 'run_ctp@0'" not in exp.stdout
    table = run("dvc", "exp", "show", "--json")
    assert table.returncode == 0 and "metrics/overview.json" in table.stdout
    diff = json.loads(run("dvc", "metrics", "diff", "--json").stdout)
    assert diff["metrics/overview.json"]["experiments.er.Rm"]["old"] == er_rm
    assert diff["metrics/overview.json"]["experiments.er.Rm"]["new"] != er_rm

    # runs depend on their resolved configs (configs/), not on params.yaml: editing one experiment
    # invalidates only its runs and studies; editing a report's settings re-runs no run.
    # dvc exp run left its experiment applied in the workspace (buffer_size 40): edit from there
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    assert params["experiments"]["er"]["method"]["buffer_size"] == 40
    params["experiments"]["seqf"].setdefault("train", {})["lr"] = 0.002
    params["report"]["ctp"]["time_tolerance"] = 1.2
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert run("dvc", "repro", "configs").returncode == 0
    status = run("dvc", "status").stdout
    assert "run@seqf-0" in status and "ctp_tables" in status
    assert "run@er-0" not in status and "run_ctp@0" not in status and "run_fomo@methods" not in status
