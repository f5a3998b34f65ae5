"""`vlcp` command line: prepare data, run experiments, build the report index.

    vlcp data prepare [--params params.yaml] [--out DIR] [--set data.seed=1 ...]
    vlcp run [EXPERIMENT ...] [--list report.fomo.studies.methods] --seed S [--params params.yaml] [--out runs] [--set train.lr=1e-3 ...] [--jobs N]
    vlcp pretrain EXPERIMENT --out models/base.pt [--seed S] [--set ...] [--skip-unread]
    vlcp list [PATTERN]   (experiments by study, methods, profiles)
    vlcp config resolve [--out configs] [--study report.ctp.experiments ...] [--profile small]   (resolved configs, one JSON file each)
    vlcp config show EXPERIMENT [--profile small] [--set ...]
    vlcp report render notebooks/overview.ipynb [--reports reports]
    vlcp report index [--reports reports]
    vlcp report metrics [--out metrics] [--plots plots]   (headline numbers and per-task curves for `dvc metrics` / `dvc plots`)
    vlcp update CHUNK ... --out DIR [--from PREV | --model NAME --pretrained FILE] [--keep [NAME=]PATH ...] [--recipe auto]
    vlcp eval [DIR] [--model NAME --pretrained FILE] [--keep [NAME=]PATH ...] [--chunk PATH ...]

Errors in the input (config fields, missing or damaged files, a diverged run) print one line
`vlcp: error: ...` and exit 2; any other error prints one line too and exits 1. `--debug` (or
VLCP_DEBUG=1) shows the traceback instead.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from vlcp import __version__
from vlcp.errors import VlcpError, did_you_mean, unknown_name


def cmd_prepare(args) -> None:
    from vlcp.config import load_params, resolve_data
    from vlcp.data.emoji import prepare_emoji

    cfg = resolve_data(load_params(args.params), args.set or [])   # the data a run resolves (defaults < profile < --set)
    if cfg.benchmark != "emoji":
        raise VlcpError(f"data.benchmark: {cfg.benchmark} is a real dataset: vlcp does not download or prepare it; "
                        f"put it under {cfg.root} as data/README.md describes")
    meta = prepare_emoji(cfg, args.out or cfg.root)
    n = len(meta["items"])
    print(f"prepared {n} emoji × {len(meta['styles'])} styles ({', '.join(meta['styles'])}), "
          f"{len(meta['groups'])} tasks, {len(meta['subgroups'])} classes -> {args.out or cfg.root} "
          f"in {meta['build_seconds']:.1f}s")


def _lookup(params: dict, key: str, what: str, path: str):
    node, above = params, ""
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            hint = did_you_mean(part, node, above) if isinstance(node, dict) else ""
            raise VlcpError(f"{what}: no such key in {path}{hint}")
        node, above = node[part], f"{above}{part}."
    return node


def _experiment_list(params: dict, key: str, what: str, path: str) -> list[str]:
    """The experiment names at `key`: a list, or a mapping of lists (e.g. report.fomo.studies: every
    study's, in order, each name once)."""
    node = _lookup(params, key, what, path)
    lists = list(node.values()) if isinstance(node, dict) else [node]
    if not all(isinstance(v, list) and all(isinstance(e, str) for e in v) for v in lists):
        raise VlcpError(f"{what}: expected a list of experiment names (or a mapping of such lists) in {path}")
    return list(dict.fromkeys(e for v in lists for e in v))


def _run_one(cfg, out: Path, ckpt: Path, resume: bool, bad_checkpoint: str = "error") -> Path:
    from vlcp.run import run_experiment

    run_experiment(cfg, out, ckpt, resume=resume, bad_checkpoint=bad_checkpoint)
    return out / "results.json"


def cmd_run(args) -> None:
    """Run one or more experiments for one seed: one after another in this process (a study's
    runs share the import and data-loading cost), or with `--jobs N` on N worker processes that
    take the experiments in order, each with train.num_threads // N threads (on 2 cores, two
    one-thread processes finish ~1.6x the 36-language CLL-CLIP runs of one two-thread process,
    ~1.2x its 12-language runs). With train.device cuda (or auto on a machine with a GPU) the N
    workers share the one GPU (`jobs_plan`)."""
    from vlcp.config import load_params, resolve_experiment

    params = load_params(args.params)
    names = list(args.experiments)
    if args.list:
        names += _experiment_list(params, args.list, f"--list {args.list}", args.params)
    if args.skip:
        skip = set(_experiment_list(params, args.skip, f"--except {args.skip}", args.params))
        names = [e for e in names if e not in skip]
    if not names:
        raise VlcpError("run: name at least one experiment (or --list KEY)" + (f"; --except {args.skip} left none" if args.skip else ""))
    if args.jobs < 1:
        raise VlcpError(f"--jobs: must be >= 1, got {args.jobs}")
    if args.jobs > 1 and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise VlcpError("--jobs: runs experiments in parallel processes; under torchrun every rank runs one experiment")
    cfgs = [resolve_experiment(params, e, args.seed, args.set or []) for e in names]  # all valid first
    from vlcp.run.requirements import check_config
    for cfg in cfgs:
        check_config(cfg)
    runs = [(cfg, Path(args.out) / name / f"seed{args.seed}", Path(args.checkpoints) / name / f"seed{args.seed}",
             not args.no_resume, args.bad_checkpoint) for name, cfg in zip(names, cfgs)]
    if args.jobs == 1:
        for run in runs:
            print(f"wrote {_run_one(*run)}")
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    if where := jobs_plan([cfg for cfg, *_ in runs], names, args.jobs, _cuda_available()):
        print(where, flush=True)
    with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_die_with_parent, initargs=(os.getpid(),)) as pool:
        futures = {pool.submit(_run_one, *run): name for name, run in zip(names, runs)}
        for f in as_completed(futures):
            if isinstance(f.exception(), BrokenProcessPool):   # a worker was killed: the pool ends them all
                unfinished = [n for g, n in futures.items() if g.exception() is not None]
                raise VlcpError(f"run --jobs {args.jobs}: a worker process died (killed by the system, possibly out "
                                f"of memory) while running {', '.join(unfinished)} (seed {args.seed}); the same command "
                                "resumes from the checkpoints") from None
            if f.exception() is not None:      # the first failure stops the runs not yet started
                pool.shutdown(cancel_futures=True)
                raise f.exception()
            print(f"wrote {f.result()}", flush=True)


def _cuda_available() -> bool:
    """Whether a GPU is visible, asked without creating a CUDA context here: the `--jobs` workers
    (spawned, not forked) each make their own."""
    import torch

    return torch.cuda.is_available()


def jobs_plan(cfgs: list, names: list[str], jobs: int, cuda: bool) -> str:
    """Prepare `cfgs` (of the experiments `names`) for `jobs` worker processes, in place: each run
    gets train.num_threads // jobs threads. With a GPU (`cuda`) and train.device cuda or auto the
    workers share the one GPU, each its own process and CUDA context (a spawned worker resolves
    "auto" as the parent does: it sees the same devices); the line returned says so ("" when every
    run is on the CPU).
    A run asking for cuda without a GPU is refused before any worker starts."""
    for name, cfg in zip(names, cfgs):
        if cfg.train.device == "cuda" and not cuda:
            raise VlcpError(f"train.device: {name} asks for cuda but no GPU is available (run --jobs {jobs}); "
                            "set train.device=cpu or auto")
        cfg.train.num_threads = max(1, cfg.train.num_threads // jobs)
    on_gpu = [n for n, c in zip(names, cfgs) if c.train.device == "cuda" or (c.train.device == "auto" and cuda)]
    return (f"run --jobs {jobs}: {min(jobs, len(names))} worker processes share the one GPU (cuda) for "
            f"{len(on_gpu)} of {len(names)} runs" if on_gpu else "")


def _die_with_parent(parent: int) -> None:
    """A `--jobs` worker's initializer: the worker ends when its parent (pid `parent`) does, also
    when the parent is killed. Linux: the kernel sends it SIGKILL (prctl PR_SET_PDEATHSIG);
    elsewhere a thread that checks the parent every second."""
    import ctypes
    import signal

    try:
        if ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL) == 0:   # 1: PR_SET_PDEATHSIG
            if os.getppid() != parent:    # the parent was gone before the call
                os._exit(1)
            return
    except (OSError, AttributeError):    # no prctl (not Linux)
        pass
    import threading
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="watch-parent").start()


def _watch_parent(parent: int) -> None:
    import time

    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def cmd_pretrain(args) -> None:
    """Train an experiment and keep its final model as a weights file (a base CLIP for the
    language stream): open_clip loads it with `model.pretrained: <file>`. With `--skip-unread`
    (the pipeline's base stages) an `--out` that no experiment of the active profile loads is
    not trained for: a one-line note takes the place of the weights and of the run's results."""
    import json

    from vlcp.config import load_params, resolve_experiment, weights_readers
    from vlcp.run import pretrain
    from vlcp.utils import atomic_path

    params = load_params(args.params)
    cfg = resolve_experiment(params, args.experiment, args.seed, args.set or [])
    run_dir = Path(args.runs) / args.experiment / f"seed{args.seed}"
    if args.skip_unread and not weights_readers(params, args.out):
        note = (f"vlcp pretrain {args.experiment}: not trained, no experiment of profile "
                f"{params.get('profile', 'tiny')!r} loads {args.out} (--skip-unread)")
        with atomic_path(args.out) as tmp:
            tmp.write_text(note + "\n")
        with atomic_path(run_dir / "results.json") as tmp:   # no `experiment` key: no report reads it as a run
            tmp.write_text(json.dumps({"skipped": note}) + "\n")
        print(note)
        return
    pretrain(cfg, args.out, run_dir, Path(args.checkpoints) / args.experiment / f"seed{args.seed}", args.bad_checkpoint)
    print(f"wrote {args.out} (and {run_dir / 'results.json'})")


def cmd_list(args) -> None:
    """Experiments by study (as params.yaml's `report:` section groups them), methods and profiles;
    PATTERN (a glob, or a substring) keeps the matching names."""
    import fnmatch
    import shutil
    import textwrap

    from vlcp.config import load_params
    from vlcp.methods import available_methods

    params = load_params(args.params)
    pattern = args.pattern or "*"
    if not any(c in pattern for c in "*?["):
        pattern = f"*{pattern}*"
    keep = lambda names: [n for n in names if fnmatch.fnmatchcase(n, pattern)]  # noqa: E731
    width = shutil.get_terminal_size((100, 24)).columns
    rows = [(study, keep(names)) for study, names in study_experiments(params).items()]
    rows += [("methods", keep(available_methods()))]
    rows += [("models (open_clip's and vlcp's; --model of vlcp update)", keep(_model_names()))]
    rows += [(f"profiles (active: {params.get('profile', 'tiny')})", keep(list(params.get("profiles") or {})))]
    label = max(len(f"{s} ({len(n)})") for s, n in rows) + 2
    for study, names in rows:
        if names:
            text = textwrap.fill(", ".join(names), width=max(width, label + 40), initial_indent=" " * label,
                                 subsequent_indent=" " * label, break_on_hyphens=False, break_long_words=False)
            print(f"{f'{study} ({len(names)})':<{label}}{text[label:]}")


def _model_names() -> list[str]:
    import open_clip

    from vlcp.models.clip import register_configs
    register_configs()
    return list(open_clip.list_models())


def study_experiments(params: dict) -> dict[str, list[str]]:
    """{study: its experiments} from each registered study's `lists` (params keys; a mapping of
    lists gives one group per key), then every other experiment (pretraining bases, extras) under "other"."""
    from vlcp.report.study import load_study, registered

    lists = {}
    for name in registered():
        for key in load_study(name).lists:
            node = params
            for part in key.split("."):
                node = node.get(part) if isinstance(node, dict) else None
            if isinstance(node, dict):
                lists |= {f"{name} {k}": v for k, v in node.items()}
            elif node:
                lists[name] = lists.get(name, []) + list(node)
    every = list(params.get("experiments") or {})
    listed = {n for names in lists.values() for n in names}
    out = {study: [n for n in names if n in every] for study, names in lists.items()}
    out["other"] = [n for n in every if n not in listed]
    return out


def cmd_config_resolve(args) -> None:
    """Write `<out>/<experiment>.json` for every experiment, and `<out>/study-<KEY>.json` (the
    resolved configs of the experiments listed at KEY, in order) for each `--study KEY`; a KEY
    holding a mapping of lists gives one file per entry. These are the run stages' dependencies in
    dvc.yaml. Everything is resolved before anything is written."""
    import json

    from vlcp.config import load_params, resolved_experiments, with_profile
    from vlcp.utils import atomic_dir

    params = with_profile(load_params(args.params), args.profile)
    resolved = resolved_experiments(params)
    files = {f"{name}.json": cfg for name, cfg in resolved.items()}
    for key in args.study or []:
        node = _lookup(params, key, f"--study {key}", args.params)
        for at in [f"{key}.{k}" for k in node] if isinstance(node, dict) else [key]:
            names = _experiment_list(params, at, f"--study {at}", args.params)
            if missing := [e for e in names if e not in resolved]:
                raise VlcpError(f"--study {at}: " + unknown_name("experiment", missing[0], resolved,
                                                                 "`vlcp list` lists them"))
            files[f"study-{at}.json"] = {"experiments": names, "configs": {e: resolved[e] for e in names}}
    out = Path(args.out)
    with atomic_dir(out) as tmp:   # replaces only the files an earlier `config resolve` wrote there
        for name, obj in files.items():
            (tmp / name).write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(files)} resolved configs to {out}/")


def cmd_config_show(args) -> None:
    import json

    from vlcp.config import load_params, resolve_experiment, with_profile

    params = with_profile(load_params(args.params), args.profile)
    cfg = resolve_experiment(params, args.experiment, args.seed, args.set or [])
    print(json.dumps(cfg.to_dict(), indent=1))


def cmd_index(args) -> None:
    from vlcp.report.index import write_index

    path = write_index(args.reports)
    print(f"wrote {path}")


def cmd_metrics(args) -> None:
    from vlcp.config import load_params
    from vlcp.report.metrics import write_metrics

    paths = write_metrics(load_params(args.params), ".", args.out, args.plots, args.study)
    print(f"wrote {len(paths)} metrics files to {args.out}/ and their curves to {args.plots}/")


def cmd_render(args) -> None:
    from vlcp.report.render import render_notebook
    from vlcp.utils import check_folder

    import yaml

    parameters = {"reports_dir": args.reports}   # where the notebook writes its own files (its claims), beside its HTML
    for kv in args.param or []:
        key, sep, value = kv.partition("=")
        if not sep or not key:
            raise VlcpError(f"-p {kv!r}: expected KEY=VALUE (the value read as YAML: true, 3, [1, 2], text)")
        try:
            parameters[key] = yaml.safe_load(value)
        except yaml.YAMLError as e:
            problem = getattr(e, "problem", None) or "not valid YAML"
            raise VlcpError(f"-p {kv!r}: the value is not valid YAML ({problem}); quote a text, or write a list "
                            "whole: [1, 2]") from None
    check_folder(args.reports, f"--reports {args.reports}")
    nb, html = render_notebook(args.notebook, args.reports, parameters)
    print(f"wrote {nb} and {html}")


def _update_options(args) -> tuple[dict, dict, dict]:
    """(train, update, data) settings from `vlcp update`'s / `vlcp eval`'s options (only those given)."""
    train = {k: v for k, v in (("lr", getattr(args, "lr", None)), ("batch_size", getattr(args, "batch_size", None)),
                               ("device", args.device), ("precision", getattr(args, "precision", None)),
                               ("num_threads", args.threads)) if v is not None}
    given = {"holdout": args.holdout, "max_eval": args.max_eval, "layout": args.layout,
             "csv_img_key": args.csv_img_key, "csv_caption_key": args.csv_caption_key,
             "csv_separator": args.csv_separator, "image_root": args.image_root,
             "min_candidates": args.min_candidates, "templates": args.templates,
             "follow_links": args.follow_links or None}
    # only what was given: an update folder's own (history.json "read") or UpdateCfg's defaults fill the rest
    options = {k: v for k, v in given.items() if v is not None}
    options["check_images"] = not args.no_check_images
    for key in ("steps", "samples", "budget", "pretraining", "mixture"):
        if getattr(args, key, None) is not None:
            options[key] = getattr(args, key)
    if options.get("samples") and "budget" not in options:
        options["budget"] = "samples"
    data = {"workers": args.workers} if args.workers is not None else {}
    return train, options, data


def cmd_update(args) -> None:
    from vlcp.update import update

    train, options, data = _update_options(args)
    history = update(args.chunks, args.out, start=args.start, model=args.model, pretrained=args.pretrained,
                     keep=(args.keep or []) + _keep_sets(args.keep_sets), recipe=args.recipe, seed=args.seed, train=train, options=options, data=data,
                     candidates=[c.strip() for c in args.candidates.split(",")] if args.candidates else _auto_candidates(),
                     trial_fraction=args.trial_fraction, overrides=args.set or [], report=not args.no_report,
                     moved=args.moved or [])
    from vlcp.train.distributed import is_main
    if not is_main():
        return
    from vlcp.update import plus_minus
    last = history["updates"][-1]
    for u in history["updates"][-len(args.chunks):]:
        b, a = u["before"], u["after"]
        hb, ha = b.get("halfwidth", {}), a.get("halfwidth", {})
        print(f"update {u['update']} ({u['chunk']}, {u['recipe']}): "
              + ", ".join(f"{k} {plus_minus(b[k], hb.get(k))} -> {plus_minus(a[k], ha.get(k))}" for k in ("A_KA", "A_ZS", "GM"))
              + " (95 % sampling intervals)")
    print(f"wrote {Path(args.out) / 'model.pt'} and {Path(args.out) / 'history.json'} "
          f"({len(history['updates'])} updates; last: {last['chunk']})"
          + ("" if args.no_report else f"; report: {Path(args.out) / 'report.html'}"))


def _keep_sets(folder: str | None) -> list[str]:
    """`--keep-sets DIR`: every folder in DIR as a keep-set named after it."""
    if folder is None:
        return []
    root = Path(folder)
    if not root.is_dir():
        raise VlcpError(f"--keep-sets: {folder} is not a folder")
    sets = [f"{p.name}={p}" for p in sorted(root.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    if not sets:
        raise VlcpError(f"--keep-sets: {folder} holds no folder (each folder in it is one set to keep)")
    return sets


def _auto_candidates():
    from vlcp.update.recipes import AUTO_CANDIDATES
    return list(AUTO_CANDIDATES)


def cmd_eval(args) -> None:
    from vlcp.update import evaluate
    from vlcp.utils import write_json

    train, options, data = _update_options(args)
    if args.json and Path(args.json).exists() and not args.force:
        raise VlcpError(f"--json: {args.json} exists; name a new file, or add --force to replace it")
    if args.json:   # before scoring, not after the scores were printed
        from vlcp.utils import check_folder
        check_folder(Path(args.json).parent, f"--json {args.json}")
    row = evaluate(args.model, args.pretrained, args.folder, args.keep or [], args.chunk or [], options, data,
                   device=train.get("device", "auto"), moved=args.moved or [])
    if row.get("status"):
        print(f"note: {row['status']}; the scores are of its last finished update")
    from vlcp.update import plus_minus
    width = max((len(n) for n in row["datasets"]), default=0)
    half = row["halfwidth"]
    for name, value in row["datasets"].items():
        role = "accumulation (held-out slice)" if row["roles"][name] == "adaptation" else "retention (keep-set)"
        print(f"{name:<{width}}  {plus_minus(value, half['datasets'].get(name)):>12}  over {row['sizes'][name]}  {role}")
    print(f"A_KA {plus_minus(row['A_KA'], half['A_KA'])}  A_ZS {plus_minus(row['A_ZS'], half['A_ZS'])}  GM {plus_minus(row['GM'], half['GM'])}"
          "  (95 % sampling intervals)")
    if args.json:
        write_json(args.json, row)
        print(f"wrote {args.json}")


def _data_options(score, read, compute) -> None:
    """The options of `vlcp update` and `vlcp eval` that say how to score the sets, how to read the
    sources and where to compute, each added to its argument group."""
    # defaults None: an update folder's own settings (history.json "read"), else vlcp.config.UpdateCfg's
    score.add_argument("--holdout", type=float, default=None,
                       help="share of each chunk held out to score accumulation (default 0.1, or the update folder's)")
    score.add_argument("--max-eval", type=int, default=None,
                       help="at most this many images per evaluation set (default 500)")
    score.add_argument("--templates", choices=("simple", "openai"), default=None,
                       help="a class keep-set's prompts without its own templates.txt: open_clip's 7 simple ImageNet "
                            "templates, or CLIP's 80 (80 text encodings a class at every evaluation)")
    score.add_argument("--min-candidates", type=int, default=None,
                       help="score a set only over at least this many candidates (retrieval: also R@5 over at least "
                            "25); 0: every set")
    read.add_argument("--layout", default=None, choices=("auto", "folder", "csv", "wds", "coco", "karpathy"),
                      help="the sources' layout (auto: by path)")
    read.add_argument("--csv-img-key", default=None,
                      help="CSV/TSV: the image path column (as open_clip_train; default filepath)")
    read.add_argument("--csv-caption-key", default=None, help="CSV/TSV: the caption column (default title)")
    read.add_argument("--csv-separator", default=None, help="CSV/TSV: the separator (default: tab; comma for *.csv)")
    read.add_argument("--image-root", default=None,
                      help="where relative image paths of a CSV or captions JSON start (default: the file's folder); "
                           "folder chunks, shards and ImageFolders are read from where they are")
    read.add_argument("--no-check-images", action="store_true",
                      help="do not decode every image once first (an unreadable image then stops the run instead of "
                           "being skipped)")
    read.add_argument("--follow-links", action="store_true",
                      help="read images that resolve outside their chunk or set (a symlink, a ../ path); without it "
                           "they are refused")
    read.add_argument("--workers", type=int, default=None, help="worker processes decoding images (0: in this process)")
    compute.add_argument("--device", default=None, help="auto | cpu | cuda")
    compute.add_argument("--threads", type=int, default=None, help="torch CPU threads")


EXAMPLES = {   # command: (what it does, the command line), from the README and docs/; tests/test_cli.py parses each
    "data prepare": [("render the emoji benchmark into data.root", "vlcp data prepare"),
                     ("into another folder", "vlcp data prepare --out data/emoji")],
    "run": [("one run of one experiment", "vlcp run er --seed 0"),
            ("several, on two worker processes", "vlcp run ic4-er ic4-incclip --jobs 2 --out runs-incclip"),
            ("FoMo's studies but the spread's runs",
             "vlcp run --list report.fomo.studies --except report.fomo.spread.experiments")],
    "pretrain": [("train a base model by hand", "vlcp pretrain fomo-base --out models/fomo-base.pt"),
                 ("as the pipeline does", "vlcp pretrain cll-base --out models/cll-base.pt --skip-unread")],
    "list": [("every experiment, method, profile and model", "vlcp list"),
             ("the names containing teir", "vlcp list teir"),
             ("the models vlcp update can start from", "vlcp list 'ViT-B-*'")],
    "config resolve": [("the resolved configs the pipeline reads",
                        "vlcp config resolve --out configs --study report.cllclip.experiments "
                        "--study report.fomo.studies"),
                       ("on another profile", "vlcp config resolve --profile small --out configs-small")],
    "config show": [("the config a run would train", "vlcp config show er --set train.steps=200"),
                    ("on another profile", "vlcp config show er --profile small")],
    "report index": [("write reports/index.html", "vlcp report index")],
    "report metrics": [("one study's headline metrics and curves", "vlcp report metrics --study fomo")],
    "report render": [("execute a report's notebook, write its HTML", "vlcp report render notebooks/overview.ipynb")],
    "update": [("a first update of your own CLIP",
                "vlcp update data/2026-01 --out mymodel --model ViT-B-32 --pretrained ViT-B-32.pt "
                "--keep imagenet=data/imagenet-val --recipe auto"),
               ("next month, continue the folder", "vlcp update data/2026-02 --out mymodel")],
    "eval": [("score a model on a keep-set",
              "vlcp eval --model ViT-B-32 --pretrained ViT-B-32.pt --keep imagenet=data/imagenet-val"),
             ("an update folder's latest model", "vlcp eval mymodel")],
}


def examples(command: str) -> str | None:
    """The `examples:` epilog of `command` ("config show"); a group ("config", "" for vlcp itself) gets
    the first of each of its commands'."""
    rows = EXAMPLES.get(command) or [v[0] for k, v in EXAMPLES.items() if k.startswith(f"{command} ".lstrip())]
    return "examples:\n" + "\n".join(f"  # {what}\n  {line}" for what, line in rows) if rows else None


def build_parser() -> argparse.ArgumentParser:
    """The `vlcp` argument parser, every command documented (help texts, defaults, examples)."""
    p = argparse.ArgumentParser(prog="vlcp", description="vision-language continual pretraining")
    p.add_argument("--version", action="version", version=f"vlcp {__version__}")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error (also VLCP_DEBUG=1)")
    sub = p.add_subparsers(dest="command", required=True)

    data = sub.add_parser("data", help="benchmark data").add_subparsers(dest="data_command", required=True)
    prep = data.add_parser("prepare", help="render and split the embedded emoji benchmark")
    prep.add_argument("--params", default="params.yaml")
    prep.add_argument("--out", default=None, help="output directory (default: data.root)")
    prep.add_argument("--set", action="append", metavar="KEY=VALUE",
                      help="override a data.* field, as `vlcp run --set` does (e.g. data.seed=1)")
    prep.set_defaults(func=cmd_prepare)

    run = sub.add_parser("run", help="train and evaluate experiments (one or more) for one seed")
    run.add_argument("experiments", nargs="*", metavar="EXPERIMENT")
    run.add_argument("--list", metavar="KEY", help="also run the experiments listed at KEY (dotted path) in the params "
                     "file; a mapping of lists runs every list's")
    run.add_argument("--except", dest="skip", metavar="KEY",
                     help="leave out the experiments listed at KEY (e.g. those a seed subset already ran)")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--params", default="params.yaml")
    run.add_argument("--out", default="runs")
    run.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field")
    run.add_argument("--checkpoints", default="checkpoints", help="where per-task checkpoints go")
    run.add_argument("--no-resume", action="store_true", help="ignore an existing checkpoint")
    run.add_argument("--bad-checkpoint", choices=("error", "restart", "previous"), default="error",
                     help="a checkpoint that fails to load or verify: stop with a message (error), start over keeping "
                          "it as checkpoint.pt.bad (restart), or resume from checkpoint.prev.pt (previous)")
    run.add_argument("--jobs", type=int, default=1,
                     help="worker processes running the experiments in parallel (each with train.num_threads // JOBS "
                          "threads; with train.device cuda they share the one GPU)")
    run.set_defaults(func=cmd_run)

    pre = sub.add_parser("pretrain", help="train an experiment and save its final model as a weights file")
    pre.add_argument("experiment")
    pre.add_argument("--out", required=True, help="weights file to write, e.g. models/cll-base.pt")
    pre.add_argument("--seed", type=int, default=0)
    pre.add_argument("--params", default="params.yaml")
    pre.add_argument("--runs", default="runs-cllclip", help="where the training run's results.json goes")
    pre.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field")
    pre.add_argument("--checkpoints", default="checkpoints")
    pre.add_argument("--bad-checkpoint", choices=("error", "restart", "previous"), default="error",
                     help="as `vlcp run --bad-checkpoint`")
    pre.add_argument("--skip-unread", action="store_true", help="train only if an experiment of the active profile "
                     "loads --out; else write a one-line note there (and as the run's results.json) instead")
    pre.set_defaults(func=cmd_pretrain)

    lst = sub.add_parser("list", help="list experiments by study, methods and profiles")
    lst.add_argument("pattern", nargs="?", help="keep the names matching this glob or substring")
    lst.add_argument("--params", default="params.yaml")
    lst.set_defaults(func=cmd_list)

    conf = sub.add_parser("config", help="resolved experiment configs")
    conf = conf.add_subparsers(dest="config_command", required=True)
    res = conf.add_parser("resolve",
                          help="write every experiment's resolved config (active profile) to OUT/<name>.json")
    res.add_argument("--params", default="params.yaml")
    res.add_argument("--out", default="configs")
    res.add_argument("--study", action="append", metavar="KEY",
                     help="also write study-KEY.json: the resolved configs of the experiments listed at KEY (a list, "
                          "or a mapping of lists)")
    res.add_argument("--profile", default=None, help="resolve on this profile instead of params.yaml's `profile:`")
    res.set_defaults(func=cmd_config_resolve)
    show = conf.add_parser("show", help="print one experiment's resolved config")
    show.add_argument("experiment")
    show.add_argument("--seed", type=int, default=0)
    show.add_argument("--params", default="params.yaml")
    show.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field")
    show.add_argument("--profile", default=None,
                      help="resolve on this profile (e.g. small) instead of params.yaml's `profile:`")
    show.set_defaults(func=cmd_config_show)

    rep = sub.add_parser("report", help="reports").add_subparsers(dest="report_command", required=True)
    idx = rep.add_parser("index", help="write reports/index.html")
    idx.add_argument("--reports", default="reports")
    idx.set_defaults(func=cmd_index)
    met = rep.add_parser("metrics",
                         help="write each study's headline metrics (DVC metrics) and per-task curves (DVC plots)")
    met.add_argument("--params", default="params.yaml")
    met.add_argument("--out", default="metrics", help="folder of <study>.json metrics files")
    met.add_argument("--plots", default="plots",
                     help="folder of <study>.csv curves (and fomo/<experiment>.csv trajectories)")
    met.add_argument("--study", action="append", default=None,
                     help="only this study (repeatable; a registered study, vlcp/report/studies/<name>/; default every "
                          "one)")
    met.set_defaults(func=cmd_metrics)
    ren = rep.add_parser("render", help="execute a notebook (papermill) and write its HTML")
    ren.add_argument("notebook")
    ren.add_argument("--reports", default="reports", help="where the executed notebook, its HTML and its claims go")
    ren.add_argument("-p", "--param", action="append", metavar="KEY=VALUE",
                     help="set a notebook parameter (papermill), e.g. -p long=true for the long profile's report")
    ren.set_defaults(func=cmd_render)

    upd = sub.add_parser("update",
                         help="keep your own CLIP current: train it on new chunks of your data, see what it kept")
    source = upd.add_argument_group("what to train on")
    source.add_argument("chunks", nargs="+", metavar="CHUNK",
                        help="[NAME=]PATH of each new chunk, trained in order (a folder of images with same-name .txt "
                             "captions, a CSV/TSV, webdataset shards 'shards/{000..009}.tar', a COCO or Karpathy "
                             "captions JSON)")
    source.add_argument("--pretraining-data", dest="pretraining", default=None,
                        help="pretraining-like pairs to replay (FoMo-in-Flux's λP), in any chunk layout")
    source.add_argument("--mixture", type=float, nargs=3, default=None, metavar=("P", "D", "B"),
                        help="λP λD λB: shares of pretraining data, the chunk and earlier chunks in each batch "
                             "(default 0.33 0.34 0.33, an absent source's share to the chunk)")
    model = upd.add_argument_group("the model (of a new update folder)")
    model.add_argument("--from", dest="start", default=None, help="start from another update folder (left unchanged)")
    model.add_argument("--model", default=None, help="open_clip architecture of a new folder, e.g. ViT-B-32")
    model.add_argument("--pretrained", default=None,
                       help="its weights file (an open_clip tag downloads, and only with HF_HUB_OFFLINE=0)")
    recipe = upd.add_argument_group("the recipe")
    recipe.add_argument("--recipe", default=None, help="full | lora | locked-image | ema-merge | zs-merge | auto | "
                        "any vlcp method (vlcp list); default: the folder's last recipe, else full")
    recipe.add_argument("--candidates", default=None, help="--recipe auto: the recipes tried, comma-separated "
                        "(default: full,lora,ema-merge,zs-merge)")
    recipe.add_argument("--trial-fraction", type=float, default=0.25, help="--recipe auto: the trial's share of the "
                        "first chunk's training pairs and of its budget")
    train = upd.add_argument_group("training")
    train.add_argument("--steps", type=int, default=None,
                       help="steps per chunk (default 100; budget mafs: full fine-tuning's steps)")
    train.add_argument("--samples", type=int, default=None, help="samples per chunk (budget samples)")
    train.add_argument("--budget", choices=("steps", "samples", "mafs"), default=None,
                       help="steps, samples, or FoMo-in-Flux's memory-adjusted FLOPs of full fine-tuning's --steps")
    train.add_argument("--lr", type=float, default=None, help="peak learning rate (default 1e-5, FoMo-in-Flux's)")
    train.add_argument("--batch-size", type=int, default=None, help="batch size (default 128)")
    train.add_argument("--precision", choices=("fp32", "bf16"), default=None, help="bf16: autocast on GPU")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="override any config field (e.g. method.r=8)")
    keep = upd.add_argument_group("evaluation and keep-sets")
    keep.add_argument("--keep", action="append", metavar="[NAME=]PATH",
                      help="a set to keep: an ImageFolder of classes (zero-shot; classnames.txt / templates.txt "
                           "inside are used) or captions in any chunk layout (retrieval); repeatable; kept for every "
                           "later update")
    keep.add_argument("--keep-sets", default=None, metavar="DIR", help="every folder in DIR as a set to keep")
    read = upd.add_argument_group("reading the data")
    out = upd.add_argument_group("output and resume")
    out.add_argument("--out", required=True, help="the update folder (model.pt, history.json, report.html); an "
                     "existing update folder continues from its latest model")
    out.add_argument("--no-report", action="store_true", help="do not render report.html")
    out.add_argument("--moved", action="append", metavar="NAME=PATH",
                     help="where a chunk or keep-set of the folder's history is now, if it moved (repeatable)")
    _data_options(keep, read, train)
    upd.set_defaults(func=cmd_update)

    ev = sub.add_parser("eval", help="score a model on your sets (retention keep-sets, held-out slices of chunks)")
    model = ev.add_argument_group("the model")
    model.add_argument("folder", nargs="?", default=None,
                       help="an update folder: its latest model, keep-sets and chunks")
    model.add_argument("--model", default=None, help="open_clip architecture")
    model.add_argument("--pretrained", default=None, help="its weights file")
    sets = ev.add_argument_group("the sets to score")
    sets.add_argument("--keep", action="append", metavar="[NAME=]PATH", help="a set to keep (as vlcp update --keep)")
    sets.add_argument("--chunk", action="append", metavar="[NAME=]PATH", help="a chunk whose held-out slice is scored")
    sets.add_argument("--moved", action="append", metavar="NAME=PATH",
                      help="where a chunk or keep-set of the folder's history is now, if it moved (repeatable)")
    read = ev.add_argument_group("reading the data")
    compute = ev.add_argument_group("compute and output")
    compute.add_argument("--json", default=None, help="also write the scores to this JSON file (a new one)")
    compute.add_argument("--force", action="store_true", help="--json: replace the file if it exists")
    _data_options(sets, read, compute)
    ev.set_defaults(func=cmd_eval)

    document(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    debug = args.debug or os.environ.get("VLCP_DEBUG", "") not in ("", "0")
    try:
        args.func(args)
    except VlcpError as e:
        if debug:
            raise
        print(f"vlcp: error: {one_line(e)}", file=sys.stderr)
        return 2
    except BrokenPipeError:   # `vlcp list | head`: the reader left; nothing to report
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
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


COMMON_HELP = {   # options several commands share
    "--params": "the params file", "--seed": "the run's seed", "--set": "override a config field (repeatable)",
    "--out": "where the output goes", "--reports": "the reports folder", "--checkpoints": "where per-task checkpoints go",
    "experiment": "an experiment of the params file (vlcp list)", "notebook": "the notebook to execute",
    "experiments": "experiments of the params file (vlcp list)",
}


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default where it has one worth showing (not None or False), and the
    examples as written."""

    def _get_help_string(self, action):
        if action.default in (None, False) or action.default is argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)


def document(parser: argparse.ArgumentParser) -> None:
    """Every option of every command gets a help text (COMMON_HELP where it has none) and shows
    its default; every command gets its EXAMPLES."""
    parser.formatter_class = HelpFormatter
    parser.epilog = examples(parser.prog.removeprefix("vlcp").strip())
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                if "--debug" not in sub._option_string_actions:   # also after the command: `vlcp run ... --debug`
                    sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                                     help="show the traceback of an error (also VLCP_DEBUG=1)")
                document(sub)
        elif action.help is None:
            action.help = COMMON_HELP.get(next(iter(action.option_strings), action.dest), " ")


def one_line(e: BaseException) -> str:
    """An exception's message on one line."""
    return " ".join(str(e).split()) or type(e).__name__


if __name__ == "__main__":
    sys.exit(main())
