"""Keep your own CLIP current: `vlcp update` (train on new chunks of your data, see what the model
kept) and `vlcp eval` (score a model on your sets), on the continual loop's user stream
(`vlcp.run.streams.user`).

An update folder `DIR` holds `model.pt` (the latest model, an open_clip weights file),
`history.json` (`vlcp.update.history`), `report.html`, `runs/NNN/` (each update's run and model,
`runs/NNN/trial/<recipe>/` for `--recipe auto`) and, while an update has not finished,
`pending.json`: the same command resumes it; `history.json` never holds an unfinished update
(docs/update.md, "The update folder"). An update starts from `--model NAME [--pretrained FILE]`,
from the folder's own latest model (`--out DIR`), or from another folder (`--from PREV --out NEW`:
NEW gets PREV's history plus this update; PREV is left as it is).
"""
from __future__ import annotations

import contextlib
import math
import os
import shutil
from pathlib import Path
from typing import Sequence

from vlcp.errors import ConfigError, VlcpError
from vlcp.eval import continual
from vlcp.update.history import NAME as HISTORY
from vlcp.update.history import (PENDING, anchor, begin, entries, finish, fingerprints, halfwidths, load_history,
                                 load_pending, new_history, pending_line, resolve, write_history)
from vlcp.update.recipes import AUTO_CANDIDATES, FOMO_TRAIN, RECIPES, method_section, pick

REPORT = "update_report.ipynb"


def _model_config(model: str) -> dict:
    """open_clip's config of the architecture (vlcp's own included)."""
    import open_clip

    from vlcp.models.clip import register_configs
    register_configs()
    cfg = open_clip.get_model_config(model)
    if cfg is None:
        raise ConfigError(f"--model: unknown open_clip model {model!r}")
    return cfg


def _image_size(model: str) -> int:
    """The image size the architecture was built for (open_clip's model config)."""
    size = _model_config(model)["vision_cfg"].get("image_size", 224)
    return size[0] if isinstance(size, (list, tuple)) else int(size)


def _latest_model(folder: Path, history: dict) -> str:
    """The update folder's latest model: its last run's own file (which no later update replaces),
    else the folder's model.pt."""
    ups = history["updates"]
    own = folder / ups[-1]["run"] / "model.pt" if ups else None
    return str(own if own is not None and own.exists() else folder / "model.pt")


def _start(out: Path, start: str | Path | None, model: str | None,
           pretrained: str | None) -> tuple[dict, str | None]:
    """(the history this update extends, the weights it starts from). `out` must be new, empty, an
    update folder to continue (without `start`), or a folder whose first update did not finish
    (`_check_pending`)."""
    here = load_history(out)
    if start is not None and here is not None and Path(start).resolve() != out.resolve():
        raise VlcpError(f"--out: {out} is an update folder already; continue it without --from, or name a new folder")
    if start is not None:
        prev, folder = load_history(start), Path(start)
        if prev is None:
            raise VlcpError(f"--from: {start} is not an update folder (no history.json)")
    else:
        prev, folder = here, out
    if prev is not None:
        if model is not None and model != prev["model"]["name"]:
            raise ConfigError(f"--model: {model!r}, but the update folder's model is {prev['model']['name']!r}")
        if pretrained is not None:
            raise ConfigError("--pretrained: an update folder continues from its own latest model (model.pt)")
        weights = _latest_model(folder, prev)
        if not Path(weights).exists():
            raise VlcpError(f"{weights}: the update folder's model is missing")
        return prev, weights
    if model is None:
        raise ConfigError("--model: name the open_clip architecture to start from (and --pretrained FILE for its "
                          "weights), or continue an update folder (--out DIR, --from DIR)")
    return new_history(model, pretrained), pretrained


def _foreign(out: Path) -> bool:
    """`out` exists and is neither empty nor an update folder (vlcp writes nothing into it)."""
    from vlcp.train.checkpoint import LOCK

    if load_history(out) is not None or (out / PENDING).exists() or not out.exists():
        return False
    return not out.is_dir() or any(p.name != LOCK for p in out.iterdir())


def _running(out: Path) -> str | None:
    """The refusal while an update of `out` runs now: the live holder of the folder's lock (held
    for a whole update) or of its unfinished update's run folders; None when none is running."""
    from vlcp.train.checkpoint import LOCK, live_holder

    pending = load_pending(out)
    run = out / "runs" / f"{pending.get('update', 0):03d}" if pending else None
    locks = [out / LOCK] + ([run / LOCK, *sorted(run.glob(f"trial/*/{LOCK}"))] if run else [])
    for lock in locks:
        who = live_holder(lock)
        if who is not None:
            return (f"{out}: an update of this folder is running now (pid {who.get('pid', '?')} on "
                    f"{who.get('host', '?')}, since {who.get('since', '?')}; {lock}); wait for it to finish, then "
                    "run this command")
    return None


def _check_pending(out: Path, pending: dict | None, k: int, command: dict) -> dict | None:
    """The folder's unfinished update this `command` resumes (its `pending.json`), None when it
    starts update `k` afresh; a different command is refused, saying how to finish or drop it
    without losing what it trained. A `pending.json` whose update is in the history already
    (a kill between the history's write and its removal) is that finished update's leftover."""
    if pending is None or pending.get("update", 0) < k:
        return None
    if pending.get("command") == command and pending.get("update") == k:
        return pending
    unfinished = out / "runs" / f"{pending.get('update', 0):03d}"
    differ = sorted(c for c in set(command) | set(pending.get("command", {}))
                    if command.get(c) != pending.get("command", {}).get(c))
    raise VlcpError(pending_line(out, pending) + f"; this command differs in {', '.join(differ) or 'update'}. Finish "
                    f"that update first, then run this one; or, to drop it, move {unfinished} aside (it keeps what "
                    f"that update trained) and delete {out / PENDING}")


def _recipe(given: str | None, history: dict) -> tuple[str, str]:
    """(the recipe of this update, where it comes from): the one `given` ("given"), else the one
    the folder's last update used ("kept"), else `full` ("default")."""
    if given is not None:
        return given, "given"
    if history["updates"]:
        return history["updates"][-1]["recipe"], "kept"
    return "full", "default"


def _first_rank() -> bool:
    """This process is torchrun's rank 0, or alone (before the process group is joined)."""
    return int(os.environ.get("RANK", "0")) == 0


def _folder_lock(out: Path):
    """The folder's own lock (`DIR/.lock`), held for a whole update, so two updates of one folder
    never overlap. Under torchrun rank 0 holds it (the other ranks have not joined the group yet)."""
    from vlcp.train.checkpoint import run_lock

    return run_lock({out: ()}, "vlcp update") if _first_rank() else contextlib.nullcontext()


def _moved(specs: Sequence[str]) -> dict[str, str]:
    """`--moved NAME=PATH` (and --keep NAME=PATH naming a source of the history): {NAME: PATH}."""
    from vlcp.run.streams.user import parse_source

    out = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise ConfigError(f"--moved: expected NAME=PATH (a source of the folder's history and where it is now), "
                              f"got {spec!r}")
        out[parse_source(spec).name] = path
    return out


def _sources(history: dict, folder: Path, moved: dict[str, str]) -> tuple[list[str], list[str]]:
    """The history's (chunks, keep-sets) as "NAME=PATH" that exist now (`history.resolve`)."""
    rel = history.get("relative", {})
    return ([resolve(c, folder, rel, moved, "chunk") for c in history["chunks"]],
            [resolve(k, folder, rel, moved, "keep-set") for k in history["keep"]])


def _experiment(history: dict, weights: str | None, chunks: Sequence[str], keep: list[str], recipe_method: dict,
                seed: int, train: dict, options: dict, data: dict, name: str, overrides: Sequence[str] = ()):
    from vlcp.config import deep_merge, experiment_from_dict, parse_override

    model = history["model"]["name"]
    prior = [u["steps"] for u in history["updates"]]
    raw = {"name": name, "seed": seed, "method": recipe_method,
           "data": {"benchmark": "user", "stream": "user", "unseen_styles": [], "image_size": _image_size(model),
                    "transform": "fomo", **data},
           "model": {"name": model, "pretrained": weights},
           "train": {**FOMO_TRAIN, **train},
           "update": {**options, "chunks": list(chunks), "earlier": list(history["chunks"]), "keep": keep,
                      "prior_steps": prior}}
    for o in overrides:   # --set KEY=VALUE, over everything (method.r=8, train.warmup_frac=0)
        raw = deep_merge(raw, parse_override(o))
    return experiment_from_dict(raw)


# how an update reads and scores its sources: kept in history.json ("read"), so a continued update and
# `vlcp eval DIR` score the same held-out slices and sets unless told otherwise
READ_OPTIONS = ("holdout", "max_eval", "layout", "csv_img_key", "csv_caption_key", "csv_separator", "image_root",
                "min_candidates", "templates", "follow_links")


def update(chunks: Sequence[str], out: str | Path, *, start: str | Path | None = None, model: str | None = None,
           pretrained: str | None = None, keep: Sequence[str] = (), recipe: str | None = None,
           candidates: Sequence[str] = AUTO_CANDIDATES, trial_fraction: float = 0.25, seed: int = 0,
           train: dict | None = None, options: dict | None = None, data: dict | None = None,
           overrides: Sequence[str] = (), report: bool = True, moved: Sequence[str] = ()) -> dict:
    """Train the model on `chunks` (one task each, in order) and return the updated history.

    `keep`: `[NAME=]PATH` sets to keep (added to the folder's own); `recipe`: a name of
    `vlcp.update.recipes.RECIPES`, any vlcp method, or `auto` (a trial of `candidates` on
    `trial_fraction` of the first chunk's training pairs, with that share of the budget; the highest
    GM wins, `recipes.pick`), or None: the recipe of the folder's last update, else `full`; `train`,
    `options`, `data`: the experiment's `train:`, `update:`, `data:` settings (e.g. {"lr": 1e-5,
    "batch_size": 256}, {"steps": 500, "budget": "mafs"}); `overrides`:
    `KEY=VALUE` over all of them (as `vlcp run --set`); `moved`: `NAME=PATH` of the folder's chunks
    and keep-sets that are no longer where its history says (a `keep` of the same name also
    replaces it). An update that did not finish (`pending.json`) resumes when the same call runs
    again."""
    from vlcp.run.requirements import check_config
    from vlcp.train.distributed import is_main

    if not chunks:
        raise ConfigError("update: name at least one chunk of data")
    out = Path(out)
    # rank 0 alone judges the folder: under torchrun a later rank would see the folder rank 0 just made
    if _first_rank() and _foreign(out):
        raise VlcpError(f"--out: {out} exists and is not an update folder (no history.json); name a new folder "
                        "(vlcp writes nothing into a folder it did not make)")
    if _first_rank() and (running := _running(out)):
        raise VlcpError(running)
    created = not out.exists()
    if is_main():
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise VlcpError(f"--out: cannot create the update folder {out}: {e.strerror or e}") from None
    run_dir, began = None, False
    with _folder_lock(out):
        try:
            history, weights = _start(out, start, model, pretrained)
            k = len(history["updates"]) + 1
            run_dir = out / "runs" / f"{k:03d}"
            recipe, source = _recipe(recipe, history)
            new = [anchor(c, out) for c in chunks]
            mine = [anchor(x, out) for x in keep]
            command = {"model": model, "pretrained": pretrained and str(Path(pretrained).resolve()),
                       "from": start and str(Path(start).resolve()), "chunks": [a for a, _ in new], "recipe": recipe,
                       "seed": seed}
            if _check_pending(out, load_pending(out), k, command) is None and is_main():
                begin(out, k, command)
                began = True
            named = {a.partition("=")[0] for a, _ in mine}
            moved = {**_moved(moved or ()), **{a.partition("=")[0]: a.partition("=")[2] for a, _ in mine}}
            earlier, kept = _sources(history, Path(start) if start is not None else out, moved)
            earlier = [anchor(c, out) for c in earlier]                       # absolute, and relative to this folder
            kept = [anchor(c, out) for c in kept if c.partition("=")[0] not in named] + mine
            keep_all = [a for a, _ in kept]
            history = {**history, "chunks": [a for a, _ in earlier], "keep": keep_all,
                       "relative": {a.partition("=")[0]: r for a, r in earlier + kept + new if r}}
            train, data = dict(train or {}), dict(data or {})
            options = {**history.get("read", {}), **(options or {})}   # how the folder read its sources, unless given
            history["read"] = {key: options[key] for key in READ_OPTIONS if key in options}
            options.update(history=str((Path(start) if start is not None else out).resolve() / HISTORY),
                           fingerprints=fingerprints(history))   # what its chunks held

            def experiment(method: dict, chunk_list, name: str, extra: dict):
                cfg = _experiment(history, weights, chunk_list, keep_all, method, seed, train, {**options, **extra},
                                  data, name, overrides)
                check_config(cfg)
                return cfg

            return _train(out, history, k, run_dir, [a for a, _ in new], recipe, source, command, candidates,
                          trial_fraction, options, report, experiment)
        except VlcpError:
            # refused before any training was kept (a source, a set too small, a bad option, a trial that moved
            # nothing): the folder this call made goes again, or the pending.json and run folder it began, so a
            # refusal writes nothing; later, its checkpoints let the same command resume
            if is_main() and not (run_dir is not None and any(run_dir.rglob("*.pt"))):
                if created:
                    shutil.rmtree(out, ignore_errors=True)
                elif began and (load_pending(out) or {}).get("command") == command:
                    finish(out)
                    shutil.rmtree(run_dir, ignore_errors=True)
            raise


def _train(out: Path, history: dict, k: int, run_dir: Path, chunks: list[str], recipe: str, source: str,
           command: dict, candidates, trial_fraction: float, options: dict, report: bool, experiment) -> dict:
    """`update`'s work once its folder is there: the `auto` trial, the update, and, while the
    folder's `pending.json` is still this `command`'s, the model and the history it publishes."""
    from vlcp.registry import method_names
    from vlcp.run import run_experiment
    from vlcp.train.distributed import barrier, broadcast_object, is_main

    trial = None
    if recipe == "auto":
        if not 0 < trial_fraction <= 1:
            raise ConfigError(f"--trial-fraction: must be in (0, 1], got {trial_fraction}")
        bad = [c for c in candidates if c not in RECIPES]
        if bad:
            raise ConfigError(f"--candidates: {bad[0]!r} is not a recipe ({', '.join(RECIPES)})")
        from vlcp.config import UpdateCfg
        steps = options.get("steps", UpdateCfg.steps)
        trial_opts = {"fraction": trial_fraction, "steps": max(1, math.ceil(steps * trial_fraction))}
        if options.get("samples"):
            trial_opts["samples"] = max(1, math.ceil(options["samples"] * trial_fraction))
        trial, pairs = [], None
        for c in candidates:
            cfg = experiment(method_section(c, method_names()), list(chunks[:1]), f"trial-{c}", trial_opts)
            r = run_experiment(cfg, run_dir / "trial" / c)
            if is_main():   # (evaluations happen on the main rank)
                trial.append(_trial_row(c, r))
                pairs = r["data"].get(r["tasks"][0], {}).get("train")
        hint = still_advice(cfg.train.lr, steps, pairs, trial_opts["steps"])
        recipe, why = broadcast_object(_pick_or_refusal(trial, hint) if is_main() else None)
        if recipe is None:   # no candidate moved: the trial's runs are of no use (and `update` drops its folder)
            if is_main():
                shutil.rmtree(run_dir / "trial", ignore_errors=True)
            raise VlcpError(why)
        source = "trial"
        if is_main():
            print(f"vlcp update: the trial picks {recipe!r}: {why} ("
                  + ", ".join(f"{t['recipe']} GM {plus_minus(t['GM'], t['GM_halfwidth'])}" for t in trial) + ")", flush=True)

    cfg = experiment(method_section(recipe, method_names()), chunks, f"update-{k:03d}",
                     {"export": str(run_dir / "model.pt")})
    results = run_experiment(cfg, run_dir)
    taken = broadcast_object(_taken_over(out, k, command, run_dir) if is_main() else None)
    if taken:
        raise VlcpError(taken)
    if not is_main():
        barrier()
        return history
    history = {**history, "chunks": list(history["chunks"]) + list(cfg.update.chunks)}
    history["updates"] = list(history["updates"]) + [
        {**e, "recipe_source": source, "lr": cfg.train.lr}
        for e in entries(results, k, recipe, str(run_dir.relative_to(out)), trial)]
    _publish(run_dir / "model.pt", out / "model.pt")
    _open_clip_folder(out, history["model"]["name"])
    write_history(out, history)
    finish(out)
    _drop_checkpoints(run_dir)
    still = [u for u in history["updates"][-len(chunks):] if u["after"]["datasets"] and not moved_scores(u)]
    if still:
        print(f"vlcp update: no score of update {', '.join(str(u['update']) for u in still)} moved beyond its sampling "
              "interval: " + still_advice(cfg.train.lr, cfg.update.steps,
                                          ", ".join(str(u["data"].get("train", "?")) for u in still)), flush=True)
    if report:
        render_report(out)
    barrier()
    return history


def _trial_row(recipe: str, r: dict) -> dict:
    """A trial candidate's row from its run's results: its scores after the trial, their noise, its
    cost, and `moved` (the sets whose score moved beyond its sampling interval; None when no set
    was scored)."""
    before, after, row = r["zero_shot"], r["trajectory"][0], r["train"][0]
    half = halfwidths(after, r["datasets"])
    moved = moved_scores({"before": {**before, "halfwidth": halfwidths(before, r["datasets"])},
                          "after": {**after, "halfwidth": half}})
    return {"recipe": recipe, "A_KA": after["A_KA"], "A_ZS": after["A_ZS"], "GM": after["GM"],
            "GM_halfwidth": half["GM"], "before_GM": before["GM"], "moved": moved if after["datasets"] else None,
            "steps": row["steps"], "seconds": row["seconds"],
            "flops": row["flops_per_step"] * row["steps"] + row["task_pass_flops"]}


def _pick_or_refusal(trial: list[dict], hint: str) -> tuple[str | None, str]:
    """`recipes.pick`'s (recipe, why), or (None, its refusal) when no candidate moved, so that every
    rank can raise it."""
    try:
        return pick(trial, hint)
    except VlcpError as e:
        return None, str(e)


def still_advice(lr: float | None, steps, pairs, trial_steps: int | None = None) -> str:
    """What to try when an update (or a trial) moved no score beyond its sampling interval, and the
    likely cause."""
    ran = f"; the trial ran {trial_steps}" if trial_steps is not None else ""
    now = "?" if lr is None else format(lr, "g")
    return (f"try a higher --lr (now {now}), more --steps (now {steps}{ran}), or more data "
            f"({'?' if pairs is None else pairs} training pairs); the likely cause is a learning rate or a number "
            "of steps too small for these data")


def _taken_over(out: Path, k: int, command: dict, run_dir: Path) -> str | None:
    """The refusal to publish update `k` when the folder's `pending.json` is gone or names another
    update or command (the folder was taken over while this one trained), else None."""
    pending = load_pending(out)
    if pending is not None and pending.get("update") == k and pending.get("command") == command:
        return None
    chunks = ", ".join(x.partition("=")[0] for x in (pending or {}).get("command", {}).get("chunks", []))
    now = "is gone" if pending is None else f"now names update {pending.get('update')} ({chunks}) of another command"
    return (f"{out / PENDING}: {now}, not this update {k}: the folder was taken over while it trained, so it "
            f"publishes nothing (model.pt and history.json are as they were; its model is {run_dir / 'model.pt'})")


def moved_scores(u: dict) -> list[str]:
    """The sets of a history entry whose score changed beyond its sampling noise (`continual.differs`)."""
    b, a = u["before"], u["after"]
    hb, ha = b.get("halfwidth", {}).get("datasets", {}), a.get("halfwidth", {}).get("datasets", {})
    return [n for n in a["datasets"] if n in b["datasets"]
            and continual.differs(a["datasets"][n], ha.get(n), b["datasets"][n], hb.get(n))]


def plus_minus(value: float | None, half: float | None) -> str:
    """A score with its 95 % sampling half-width: "41.2 ± 6.3", "41.2", or "-"."""
    if value is None:
        return "-"
    return f"{value:.1f}" + (f" ± {half:.1f}" if half is not None else "")


def _publish(src: Path, dst: Path) -> None:
    """`dst` becomes `src`'s file, atomically: a hard link (one copy of the weights on disk), or a
    copy where the file system has none."""
    from vlcp.utils import atomic_path

    with atomic_path(dst) as tmp:
        try:
            os.link(src, tmp)
        except OSError:
            shutil.copyfile(src, tmp)


def _open_clip_folder(out: Path, model: str) -> None:
    """Make the folder loadable by plain open_clip, any architecture (vlcp's own included):
    `open_clip.create_model_and_transforms("local-dir:DIR")` reads `open_clip_config.json` (the
    architecture's config) and `open_clip_pytorch_model.bin` (a hard link to model.pt)."""
    from vlcp.utils import write_json

    write_json(out / "open_clip_config.json", {"model_cfg": _model_config(model), "preprocess_cfg": {}})
    _publish(out / "model.pt", out / "open_clip_pytorch_model.bin")


def _drop_checkpoints(run_dir: Path) -> None:
    """A finished update's checkpoints (its own and its trial's): the history and model.pt hold
    what they were for."""
    for f in run_dir.rglob("checkpoint*.pt"):
        f.unlink()


def report_notebook() -> Path:
    """notebooks/update_report.ipynb of this checkout."""
    path = Path(__file__).resolve().parents[2] / "notebooks" / REPORT
    if not path.exists():
        raise VlcpError(f"{path}: the update report notebook is missing (it ships with the vlcp repository)")
    return path


def render_report(folder: str | Path) -> Path:
    """DIR/report.html (and DIR/report.ipynb, executed) from the folder's history."""
    from vlcp.report.render import render_notebook

    folder = Path(folder).resolve()
    _, html = render_notebook(report_notebook(), folder, {"history": str(folder / "history.json")},
                              cwd=folder, name="report")
    return html


def evaluate(model: str | None = None, pretrained: str | None = None, folder: str | Path | None = None,
             keep: Sequence[str] = (), chunks: Sequence[str] = (), options: dict | None = None,
             data: dict | None = None, batch_size: int = 512, device: str = "auto", moved: Sequence[str] = ()) -> dict:
    """Score a model on sets: `keep` (retention: ImageFolder zero-shot, caption-set retrieval) and the
    held-out slices of `chunks` (accumulation); from an update folder, its latest model on its own
    keep-sets and chunks plus these (`moved` / a `keep` or `chunk` of the same name: where one of
    them is now). Returns {"datasets", "A_KA", "A_ZS", "GM", "roles", "status"} (`status`: a line
    when the folder's last update has not finished, else None)."""
    from vlcp.config import experiment_from_dict
    from vlcp.run.streams.user import UserStream

    status = None
    if folder is not None:
        h, pending = load_history(folder), load_pending(folder)
        if h is None:
            raise VlcpError(pending_line(folder, pending) + " (it has no model yet)" if pending is not None
                            else f"{folder}: is not an update folder (no history.json)")
        status = pending_line(folder, pending) if pending is not None else None
        options = {**h.get("read", {}), **(options or {}),   # the held-out slices and sets its updates scored
                   "history": str(Path(folder).resolve() / HISTORY), "fingerprints": fingerprints(h)}   # and what its chunks held
        if model is not None and model != h["model"]["name"]:
            raise ConfigError(f"--model: {model!r}, but the update folder's model is {h['model']['name']!r}")
        model, pretrained = h["model"]["name"], str(Path(folder) / "model.pt")
        mine = {x.partition("=")[0]: x.partition("=")[2] for x in (*keep, *chunks) if "=" in x}
        old_chunks, old_keep = _sources(h, Path(folder), {**_moved(moved), **mine})
        names = lambda xs: {x.partition("=")[0] for x in xs}  # noqa: E731
        keep = old_keep + [k for k in keep if "=" not in k or k.partition("=")[0] not in names(old_keep)]
        chunks = old_chunks + [c for c in chunks if "=" not in c or c.partition("=")[0] not in names(old_chunks)]
    if model is None:
        raise ConfigError("--model: name the open_clip architecture (and --pretrained FILE), or an update folder")
    if not keep and not chunks:
        raise ConfigError("eval: name at least one set (--keep PATH or --chunk PATH)")
    cfg = experiment_from_dict({
        "name": "eval", "data": {"benchmark": "user", "stream": "user", "unseen_styles": [],
                                 "image_size": _image_size(model), **(data or {})},
        "model": {"name": model, "pretrained": pretrained}, "eval": {"batch_size": batch_size},
        "train": {"device": device},
        "update": {**(options or {}), "chunks": list(chunks), "earlier": [], "keep": list(keep)}})
    from vlcp.run.state import pick_device
    stream = UserStream(cfg, pick_device(cfg.train.device))
    stream.load_sets(train=False)
    stream.use_model(*stream.create_model())
    row = stream.zero_shot(stream.model)
    sets = stream.environment()["datasets"]   # {name: {"role", "n"}}, as a run's results.json holds them
    return {**row, "halfwidth": halfwidths(row, sets), "sizes": {n: d["n"] for n, d in sets.items()},
            "roles": {n: d["role"] for n, d in sets.items()}, "data": stream.data, "status": status}


__all__ = ["update", "evaluate", "render_report", "RECIPES", "AUTO_CANDIDATES"]
