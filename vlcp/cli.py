"""`vlcp` command line: prepare data, run experiments, build the report index.

    vlcp data prepare [--params params.yaml]
    vlcp run [EXPERIMENT ...] [--list report.fomo.studies.methods] --seed S [--params params.yaml] [--out runs] [--set train.lr=1e-3 ...] [--jobs N]
    vlcp pretrain EXPERIMENT --out models/base.pt [--seed S] [--set ...]
    vlcp list
    vlcp config resolve [--out configs] [--study report.ctp.experiments ...]   (resolved configs, one JSON file each)
    vlcp config show EXPERIMENT
    vlcp report render notebooks/overview.ipynb [--reports reports]
    vlcp report index [--reports reports]

Errors in the input (config fields, missing or damaged files, a diverged run) print one line
`vlcp: error: ...` and exit 2; any other error prints one line too and exits 1. `--debug` (or
VLCP_DEBUG=1) shows the traceback instead.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from vlcp.errors import VlcpError


def cmd_prepare(args) -> None:
    from vlcp.config import load_params, resolve_data
    from vlcp.data.emoji import prepare_emoji

    cfg = resolve_data(load_params(args.params))
    if cfg.benchmark != "emoji":
        raise VlcpError(f"data.benchmark: {cfg.benchmark} is a real dataset: vlcp does not download or prepare it; "
                        f"put it under {cfg.root} as data/README.md describes")
    meta = prepare_emoji(cfg, args.out or cfg.root)
    n = len(meta["items"])
    print(f"prepared {n} emoji × {len(meta['styles'])} styles ({', '.join(meta['styles'])}), "
          f"{len(meta['groups'])} tasks, {len(meta['subgroups'])} classes -> {args.out or cfg.root} "
          f"in {meta['build_seconds']:.1f}s")


def _lookup(params: dict, key: str, what: str, path: str):
    node = params
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise VlcpError(f"{what}: no such key in {path}")
        node = node[part]
    return node


def _experiment_list(params: dict, key: str, what: str, path: str) -> list[str]:
    node = _lookup(params, key, what, path)
    if not isinstance(node, list) or not all(isinstance(e, str) for e in node):
        raise VlcpError(f"{what}: expected a list of experiment names in {path}")
    return node


def _run_one(cfg, out: Path, ckpt: Path, resume: bool) -> Path:
    from vlcp.runner import run_experiment

    run_experiment(cfg, out, ckpt, resume=resume)
    return out / "results.json"


def cmd_run(args) -> None:
    """Run one or more experiments for one seed: one after another in this process (a study's
    runs share the import and data-loading cost), or with `--jobs N` on N worker processes that
    take the experiments in order, each with train.num_threads // N threads (on 2 cores, two
    one-thread processes finish ~1.6x the 36-language CLL-CLIP runs of one two-thread process,
    ~1.2x its 12-language runs)."""
    from vlcp.config import load_params, resolve_experiment

    params = load_params(args.params)
    names = list(args.experiments)
    if args.list:
        names += _experiment_list(params, args.list, f"--list {args.list}", args.params)
    if not names:
        raise VlcpError("run: name at least one experiment (or --list KEY)")
    if args.jobs < 1:
        raise VlcpError(f"--jobs: must be >= 1, got {args.jobs}")
    if args.jobs > 1 and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise VlcpError("--jobs: runs experiments in parallel processes; under torchrun every rank runs one experiment")
    cfgs = [resolve_experiment(params, e, args.seed, args.set or []) for e in names]  # all valid first
    runs = [(cfg, Path(args.out) / name / f"seed{args.seed}", Path(args.checkpoints) / name / f"seed{args.seed}",
             not args.no_resume) for name, cfg in zip(names, cfgs)]
    if args.jobs == 1:
        for run in runs:
            print(f"wrote {_run_one(*run)}")
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    for cfg, *_ in runs:
        cfg.train.num_threads = max(1, cfg.train.num_threads // args.jobs)
    with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        for f in as_completed([pool.submit(_run_one, *run) for run in runs]):
            if f.exception() is not None:      # the first failure stops the runs not yet started
                pool.shutdown(cancel_futures=True)
                raise f.exception()
            print(f"wrote {f.result()}", flush=True)


def cmd_pretrain(args) -> None:
    """Train an experiment and keep its final model as a weights file (a base CLIP for the
    language stream): open_clip loads it with `model.pretrained: <file>`."""
    import torch

    from vlcp.config import load_params, resolve_experiment
    from vlcp.runner import run_experiment
    from vlcp.utils import atomic_path

    cfg = resolve_experiment(load_params(args.params), args.experiment, args.seed, args.set or [])
    run_dir = Path(args.runs) / args.experiment / f"seed{args.seed}"
    ckpt = Path(args.checkpoints) / args.experiment / f"seed{args.seed}"
    run_experiment(cfg, run_dir, ckpt)
    state = torch.load(ckpt / "checkpoint.pt", map_location="cpu", weights_only=False)["model"]
    with atomic_path(args.out) as tmp:
        torch.save(state, tmp)
    print(f"wrote {args.out} (and {run_dir / 'results.json'})")


def cmd_list(args) -> None:
    from vlcp.config import load_params
    from vlcp.methods import available_methods

    params = load_params(args.params)
    print("experiments:", ", ".join(params.get("experiments") or {}))
    print("methods:", ", ".join(available_methods()))
    print("profiles:", ", ".join(params.get("profiles") or {}), f"(active: {params.get('profile', 'tiny')})")


def cmd_config_resolve(args) -> None:
    """Write `<out>/<experiment>.json` for every experiment, and `<out>/study-<KEY>.json` (the
    resolved configs of the experiments listed at KEY, in order) for each `--study KEY`; a KEY
    holding a mapping of lists gives one file per entry. These are the run stages' dependencies in
    dvc.yaml. Everything is resolved before anything is written."""
    import json

    from vlcp.config import load_params, resolved_experiments
    from vlcp.utils import atomic_dir

    params = load_params(args.params)
    resolved = resolved_experiments(params)
    files = {f"{name}.json": cfg for name, cfg in resolved.items()}
    for key in args.study or []:
        node = _lookup(params, key, f"--study {key}", args.params)
        for at in [f"{key}.{k}" for k in node] if isinstance(node, dict) else [key]:
            names = _experiment_list(params, at, f"--study {at}", args.params)
            files[f"study-{at}.json"] = {"experiments": names, "configs": {e: resolved[e] for e in names}}
    out = Path(args.out)
    with atomic_dir(out) as tmp:   # replaces only the files an earlier `config resolve` wrote there
        for name, obj in files.items():
            (tmp / name).write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(files)} resolved configs to {out}/")


def cmd_config_show(args) -> None:
    import json

    from vlcp.config import load_params, resolve_experiment

    cfg = resolve_experiment(load_params(args.params), args.experiment, args.seed, args.set or [])
    print(json.dumps(cfg.to_dict(), indent=1))


def cmd_index(args) -> None:
    from vlcp.report.index import write_index

    path = write_index(args.reports)
    print(f"wrote {path}")


def cmd_render(args) -> None:
    from vlcp.report.render import render_notebook

    nb, html = render_notebook(args.notebook, args.reports)
    print(f"wrote {nb} and {html}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="vlcp", description="vision-language continual pretraining")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error (also VLCP_DEBUG=1)")
    sub = p.add_subparsers(dest="command", required=True)

    data = sub.add_parser("data", help="benchmark data").add_subparsers(dest="data_command", required=True)
    prep = data.add_parser("prepare", help="render and split the embedded emoji benchmark")
    prep.add_argument("--params", default="params.yaml")
    prep.add_argument("--out", default=None, help="output directory (default: data.root)")
    prep.set_defaults(func=cmd_prepare)

    run = sub.add_parser("run", help="train and evaluate experiments (one or more) for one seed")
    run.add_argument("experiments", nargs="*", metavar="EXPERIMENT")
    run.add_argument("--list", metavar="KEY", help="also run the experiments listed at KEY (dotted path) in the params file")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--params", default="params.yaml")
    run.add_argument("--out", default="runs")
    run.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field")
    run.add_argument("--checkpoints", default="checkpoints", help="where per-task checkpoints go")
    run.add_argument("--no-resume", action="store_true", help="ignore an existing checkpoint")
    run.add_argument("--jobs", type=int, default=1,
                     help="worker processes running the experiments in parallel (each with train.num_threads // JOBS threads)")
    run.set_defaults(func=cmd_run)

    pre = sub.add_parser("pretrain", help="train an experiment and save its final model as a weights file")
    pre.add_argument("experiment")
    pre.add_argument("--out", required=True, help="weights file to write, e.g. models/cll-base.pt")
    pre.add_argument("--seed", type=int, default=0)
    pre.add_argument("--params", default="params.yaml")
    pre.add_argument("--runs", default="runs-cllclip", help="where the training run's results.json goes")
    pre.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field")
    pre.add_argument("--checkpoints", default="checkpoints")
    pre.set_defaults(func=cmd_pretrain)

    lst = sub.add_parser("list", help="list experiments, methods and profiles")
    lst.add_argument("--params", default="params.yaml")
    lst.set_defaults(func=cmd_list)

    conf = sub.add_parser("config", help="resolved experiment configs").add_subparsers(dest="config_command", required=True)
    res = conf.add_parser("resolve", help="write every experiment's resolved config (active profile) to OUT/<name>.json")
    res.add_argument("--params", default="params.yaml")
    res.add_argument("--out", default="configs")
    res.add_argument("--study", action="append", metavar="KEY",
                     help="also write study-KEY.json: the resolved configs of the experiments listed at KEY (a list, or a mapping of lists)")
    res.set_defaults(func=cmd_config_resolve)
    show = conf.add_parser("show", help="print one experiment's resolved config")
    show.add_argument("experiment")
    show.add_argument("--seed", type=int, default=0)
    show.add_argument("--params", default="params.yaml")
    show.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field")
    show.set_defaults(func=cmd_config_show)

    rep = sub.add_parser("report", help="reports").add_subparsers(dest="report_command", required=True)
    idx = rep.add_parser("index", help="write reports/index.html")
    idx.add_argument("--reports", default="reports")
    idx.set_defaults(func=cmd_index)
    ren = rep.add_parser("render", help="execute a notebook (papermill) and write its HTML")
    ren.add_argument("notebook")
    ren.add_argument("--reports", default="reports")
    ren.set_defaults(func=cmd_render)

    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    debug = args.debug or os.environ.get("VLCP_DEBUG", "") not in ("", "0")
    try:
        args.func(args)
    except VlcpError as e:
        if debug:
            raise
        print(f"vlcp: error: {one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if debug:
            raise
        print("vlcp: interrupted (a run resumes from its last checkpoint)", file=sys.stderr)
        return 130
    except Exception as e:   # a defect, or an input vlcp does not check yet: still one line
        if debug:
            raise
        print(f"vlcp: error: {type(e).__name__}: {one_line(e)} (run with --debug or VLCP_DEBUG=1 for the traceback; "
              "please report it)", file=sys.stderr)
        return 1
    return 0


def one_line(e: BaseException) -> str:
    """An exception's message on one line."""
    return " ".join(str(e).split()) or type(e).__name__


if __name__ == "__main__":
    sys.exit(main())
