"""The README's "Compare experiments the DVC way" commands, each run as written on a tiny fake project
offline: the real params.yaml, the spine's shape of stages (configs -> run@<experiment> -> overview, whose
`vlcp report metrics` writes the metrics and plots) and two stages that never ran."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DVC = Path(sys.executable).with_name("dvc")
FAKE_RUN = '''import json, sys
from pathlib import Path
e = sys.argv[1]
buffer = json.loads(Path(f"configs/{e}.json").read_text()).get("method", {}).get("buffer_size", 0)
tests = [{"test": {"Rm": round(10.0 * t + buffer / 100, 4), "mAP@1": 5.0 * t}} for t in (1, 2, 3)]
out = Path(f"runs/{e}/seed0/results.json")
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps({"experiment": e, "seed": 0, "cumulative": tests}))
'''
FAKE_CONFIGS = '''import json, yaml
from pathlib import Path
Path("configs").mkdir(exist_ok=True)
for e, cfg in yaml.safe_load(open("params.yaml"))["experiments"].items():
    Path(f"configs/{e}.json").write_text(json.dumps(cfg))
'''


def stages() -> dict:
    """The fake pipeline: the spine's stage names and shape; `ctp_tables` and `performance` never ran."""
    return {"stages": {
        "configs": {"cmd": f"{sys.executable} configs.py", "params": ["profile", "defaults", "profiles", "experiments"],
                    "outs": ["configs"]},
        "run": {"foreach": ["seqf", "er"], "do": {
            "cmd": f"{sys.executable} run.py ${{item}}", "deps": ["configs/${item}.json", "run.py"],
            "outs": ["runs/${item}/seed0/results.json"]}},
        "overview": {"cmd": f"{sys.executable} -m vlcp report metrics --study overview", "deps": ["runs"],
                     "params": ["report.overview"], "metrics": [{"metrics/overview.json": {"cache": False}}],
                     "plots": [{"plots/overview.csv": {"cache": False}}, {"plots/overview.png": {"cache": False}}]},
        "ctp_tables": {"cmd": "echo ctp > ctp.txt", "params": ["report.ctp"], "outs": ["ctp.txt"]},
        "performance": {"cmd": "echo all > performance.txt", "deps": ["runs"], "outs": ["performance.txt"]}}}


def readme_commands() -> dict[str, str]:
    """The section's `dvc ...` lines by their first two words (`dvc metrics show` -> "metrics show")."""
    text = (ROOT / "README.md").read_text().split("## Compare experiments the DVC way", 1)[1]
    block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines() if line.startswith("dvc ")]
    return {" ".join(line.split()[1:3]): line for line in lines}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """The fake project after one study (`dvc repro overview`), committed."""
    here = tmp_path_factory.mktemp("dvcproj")
    shutil.copy(ROOT / "params.yaml", here / "params.yaml")
    (here / "run.py").write_text(FAKE_RUN)
    (here / "configs.py").write_text(FAKE_CONFIGS)
    (here / "dvc.yaml").write_text(yaml.safe_dump(stages(), sort_keys=False))
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "PYTHONPATH": str(ROOT), "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}

    def sh(cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run(cmd, shell=True, cwd=here, env=env, capture_output=True, text=True, timeout=300)

    for cmd in ("git init -q", f"{DVC} init -q", f"{DVC} repro overview", "git add -A", "git commit -qm one-study"):
        done = sh(cmd)
        assert done.returncode == 0, (cmd, done.stdout[-2000:], done.stderr[-2000:])
    return here, sh


def readme(name: str) -> str:
    cmds = readme_commands()
    assert name in cmds, f"README's DVC section has no `dvc {name}` line ({sorted(cmds)})"
    return cmds[name].replace("dvc ", f"{DVC} ", 1)


def test_metrics_show(project):
    here, sh = project
    shown = sh(readme("metrics show"))
    assert shown.returncode == 0 and "metrics/overview.json" in shown.stdout and "run_count" in shown.stdout, shown


def test_plots_show_renders_without_the_network(project):
    """The page shows the curves as images: no script from a CDN (Vega) to load."""
    here, sh = project
    shown = sh(readme("plots show"))
    page = here / "dvc_plots" / "index.html"
    assert shown.returncode == 0 and page.exists(), shown.stderr
    html = page.read_text()
    assert "<img" in html and "overview.png" in html and "<script" not in html and "http" not in html


def test_exp_show_before_any_experiment(project):
    """Every row alike: `--only-changed` drops each constant column once (a metric named like a
    dependency, `runs`, was dropped twice: `unexpected error - 'runs'`)."""
    _, sh = project
    table = sh(readme("exp show"))
    assert table.returncode == 0, table.stderr


@pytest.fixture(scope="module")
def experiment(project):
    """The README's `dvc exp run -S ...` on the project, a second study out of date: its output."""
    here, sh = project
    assert "ctp_tables" in sh(f"{DVC} status").stdout                 # a second study that never ran
    ran = sh(readme("exp run"))
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    return ran.stdout


def test_exp_run_reruns_only_what_it_touches(project, experiment):
    """ER's run and the spine's report re-run; SeqF's run and the study that never ran do not."""
    here, _ = project
    assert "Running stage 'run@er'" in experiment and "Running stage 'overview'" in experiment
    assert "Running stage 'run@seqf'" not in experiment and "ctp_tables" not in experiment
    assert not (here / "ctp.txt").exists()


def test_exp_show_is_a_readable_table(project, experiment):
    """The experiment beside the commit: the changed param and metrics, not every param (the plain table)."""
    _, sh = project
    table = sh(readme("exp show") + " --csv")
    assert table.returncode == 0, table.stderr
    cols = table.stdout.splitlines()[0].split(",")
    everything = sh(f"{DVC} exp show --csv").stdout.splitlines()[0].split(",")
    assert len(everything) > 1000 and len(cols) <= 20, cols
    assert {"experiments.er.method.buffer_size", "experiments.er.Rm"} <= set(cols), cols


def test_metrics_diff(project, experiment):
    """The experiment, applied in the workspace, against the last commit: ER's Rm moved."""
    _, sh = project
    diff = sh(readme("metrics diff") + " --json")
    assert diff.returncode == 0, diff.stderr
    rm = json.loads(diff.stdout)["metrics/overview.json"]["experiments.er.Rm"]
    assert rm["old"] != rm["new"]


def columns(tree: dict, prefix: str = "") -> set[str]:
    """`dvc exp show`'s column names of a metrics or params file: its leaves' dotted keys."""
    return set().union(*[columns(v, f"{prefix}{k}.") if isinstance(v, dict) and v else {f"{prefix}{k}"}
                         for k, v in tree.items()])


def test_no_metric_column_names_a_dependency_or_param():
    """`dvc exp show` names a column by its key alone: no metric's may be a dependency path or a param of the
    real pipeline (the metric `runs` was the dependency `runs`)."""
    from vlcp.report.metrics import study_metrics

    ledger = {"claims": [{"verdict": "confirmed"}], "power": {"headroom": 1.0}}
    metrics = columns(study_metrics({"er": [{}]}, ledger, lambda r: {"Rm": 1.0, "mAP@1": 1.0}))
    pipeline = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"].values()
    deps = {next(iter(d)) if isinstance(d, dict) else d for s in pipeline for d in s.get("do", s).get("deps", [])}
    params = columns(yaml.safe_load((ROOT / "params.yaml").read_text()))
    assert {"run_count", "experiments.er.Rm", "claims.confirmed"} <= metrics and not metrics & (deps | params)
