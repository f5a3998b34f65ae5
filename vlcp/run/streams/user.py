"""The user stream (`data.stream: user`; what `vlcp update` runs): your own image–caption data,
one task per chunk (`update.chunks`), evaluated as FoMo-in-Flux evaluates a model, so every
update answers the practitioner's question: how much did I gain on my new data, how much did I
lose elsewhere?

- Accumulation (A_KA): retrieval (mean of TR@5 and IR@5) on a held-out slice of every chunk, the
  new ones and the earlier updates' (`update.earlier`); a chunk's slice is picked by key hash
  (`update.holdout`), so re-reading the chunk in a later update gives the same slice.
- Retention (A_ZS): the keep-sets (`update.keep`): zero-shot top-1 on an ImageFolder of classes
  (with its prompt ensemble), retrieval on a caption set in any layout.
- GM = √(A_KA · A_ZS). The starting model is scored on every set before the first step.

Batches mix, as FoMo-in-Flux's λP/λD/λB: pretraining-like pairs (`update.pretraining`), the
chunk, and the buffer (the earlier chunks' training slices and this call's earlier chunks).
Images are decoded from the files on access (a chunk larger than memory works); with
`update.check_images` every image is decoded once first and unreadable ones are skipped and
counted (`results["data"]`).
"""
from __future__ import annotations

import errno
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from vlcp.config import ExperimentCfg, UpdateCfg
from vlcp.data.augment import train_transform
from vlcp.data.fomo import EvalSet
from vlcp.data.formats import ImageFiles, Record
from vlcp.data.formats.layouts import (CsvOptions, SourceStats, byte_twins, fingerprint, fingerprint_change,
                                       first_by_hash, holdout_mask, image_size_bytes, is_image_folder, read_checked,
                                       read_image_folder, read_source, reads_image_root)
from vlcp.data.mixtures import mixture_sizes, sample_mixture
from vlcp.data.pairs import PairSet
from vlcp.errors import ConfigError, VlcpError
from vlcp.eval import continual
from vlcp.eval.encode import MemoTokenizer
from vlcp.eval.fomo import score_sets
from vlcp.methods.base import Method, TaskContext
from vlcp.methods.seqf import SeqF
from vlcp.models import create_model
from vlcp.run.accounting import mafs_steps, measure_step_seconds, step_cost
from vlcp.run.stream import Stream
from vlcp.train.distributed import is_main
from vlcp.train.loop import Materializer
from vlcp.utils import check_free_space, derive_seed

FOMO_MIXTURE = (0.33, 0.34, 0.33)   # FoMo-in-Flux's default λP, λD, λB
RETRIEVAL_K = 5                      # a caption set's score is R@5 (vlcp.eval.fomo.score)


@dataclass(frozen=True)
class Source:
    name: str
    path: str


def parse_source(spec: str, field: str = "update.chunks") -> Source:
    """`[NAME=]PATH` -> Source; without a name, the path's own name (a file's stem, a folder's name,
    a shard pattern's folder)."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"{field}: expected [NAME=]PATH, got {spec!r}")
    name, sep, path = spec.partition("=")
    if not sep or not name or "/" in name or "{" in name:   # no name given ('=' inside a path)
        name, path = "", spec
    if not name:
        pattern = "{" in path or "*" in path
        p = Path(path)
        name = (p.parent.name if pattern else p.name if p.is_dir() else p.stem) or str(path)
    return Source(name, path)


def user_sources(cfg: UpdateCfg) -> tuple[list[Source], list[Source], list[Source]]:
    """(earlier, chunks, keep) with unique names (they key the scores)."""
    earlier = [parse_source(s, "update.earlier") for s in cfg.earlier]
    chunks = [parse_source(s, "update.chunks") for s in cfg.chunks]
    keep = [parse_source(s, "update.keep") for s in cfg.keep]
    names = [s.name for s in earlier + chunks + keep]
    dup = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if dup is not None:
        raise ConfigError(f"update: two sources are named {dup!r}; name them (NAME=PATH) so each set has its own name")
    return earlier, chunks, keep


def record_pairs(records: list[Record], image_size: int, workers: int, max_captions: int) -> PairSet:
    """The records as a PairSet: one item per image, every item with as many captions as the one
    with the most (cycling its own, at most `max_captions`), images decoded on access."""
    most = min(max((len(r.captions) for r in records), default=1), max_captions)
    n = len(records)
    return PairSet(images=ImageFiles.of_records(records, image_size, workers), image_text=torch.arange(n),
                   texts=[r.captions[0] for r in records],
                   captions=[[r.captions[k % len(r.captions)] for k in range(most)] for r in records],
                   labels=torch.zeros(n, dtype=torch.long), tasks=torch.zeros(n, dtype=torch.long),
                   items=torch.arange(n))


STEP_TIMES = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "update_step.json"   # the repository's


def measured_step(model: str, path: str | Path = STEP_TIMES) -> dict | None:
    """`model`'s step as benchmarks/update_step.py measured it (its JSON: seconds a step at its batch
    size, and the machine it ran on, e.g. "2 threads, 2 CPUs, AMD EPYC"), or None where the file or
    the model is not there (an installed package without the repository's benchmarks)."""
    try:
        bench = json.loads(Path(path).read_text())
        row = bench["models"][model]
        machine = ", ".join(f"{bench[k]} {unit}".strip() for k, unit in (("threads", "threads"), ("cpus", "CPUs"),
                                                                          ("processor", "")) if bench.get(k))
        return {"seconds_per_step": float(row["seconds_per_step"]), "batch_size": int(row["batch_size"]),
                "machine": machine}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def scaled_seconds(step: dict, steps: int, batch_size: int) -> float:
    """A measured step (`measured_step`) scaled to `steps` steps at `batch_size`: linear in both, an estimate."""
    return step["seconds_per_step"] * batch_size / step["batch_size"] * steps


def duration(seconds: float) -> str:
    """Seconds as a person reads them: s, min or h."""
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def plan(steps: list[int], batch_size: int, sets: list[EvalSet], parameters: int, model: str = "",
         step_times: str | Path = STEP_TIMES) -> str:
    """`vlcp update`'s plan, printed before training: the steps, the evaluations and the text
    encodings each costs (a class set: classes × templates; a caption set: its captions), the
    disk it writes (fp32 weights: the model once, model.pt being a link to it, and while it runs a
    checkpoint of the model and AdamW's two moments), and, where benchmarks/update_step.py measured
    `model`, its step there scaled to these steps and batch."""
    prompts = sum(len(s.classes) * len(s.templates or [None]) if s.pairs is None else len(s.pairs.texts) for s in sets)
    model_mb = parameters * 4 / 2 ** 20
    step = measured_step(model, step_times) if model else None
    if step is None:
        bench = "(per-step times of two models: docs/update.md, 'Costs')"
    else:
        on = f" ({step['machine']})" if step["machine"] else ""
        bench = (f"(benchmarks/update_step.py measured {model} at {step['seconds_per_step']:.2f} s a step at batch "
                 f"{step['batch_size']}{on}: about {duration(scaled_seconds(step, sum(steps), batch_size))} for "
                 f"{sum(steps)} step(s) at batch {batch_size}, linear in batch; docs/update.md, 'Costs')")
    return (f"vlcp update: plan: {len(steps)} chunk(s) × {steps[0] if steps else 0} steps at batch {batch_size} "
            f"({sum(steps) * batch_size} samples); {len(steps) + 1} evaluations of {len(sets)} set(s), "
            f"{prompts} text encodings each; disk about {model_mb:.0f} MB kept (the model) and {3 * model_mb:.0f} MB "
            f"more while it runs (a checkpoint with AdamW's moments); the time: a step is measured next {bench}")


def time_estimate(step_seconds: float, steps: int, evaluations: int) -> str:
    """`vlcp update`'s time line: a measured step's forward and backward scaled to the steps left."""
    return (f"vlcp update: time: one training step measured at {step_seconds:.2f} s here, so about "
            f"{duration(step_seconds * steps)} of training for {steps} step(s), plus {evaluations} evaluation(s)")


def source_root(path: str, image_root: str = "") -> Path:
    """Where a source's images belong: `image_root` when given, else the folder (a folder source)
    or the file's folder."""
    if image_root:
        return Path(image_root)
    p = Path(path)
    return p if p.is_dir() else p.parent


def outside_images(records: list[Record], path: str, image_root: str = "") -> list[str]:
    """The records' image files that resolve outside the source's root (`source_root`): a symlink
    out of the chunk, a CSV row `../../x.jpg`. Shard members are inside their shards."""
    root = source_root(path, image_root).resolve()
    out = []
    for r in records:
        if isinstance(r.image, Path):
            real = real_path(r.image)
            if real != root and root not in real.parents:
                out.append(str(r.image))
    return out


def real_path(image: Path) -> Path:
    """The file `image` resolves to (a missing one: its resolved path, said when it is read); a
    symlink loop is a VlcpError naming it."""
    try:
        return Path(os.path.realpath(image, strict=True))
    except OSError as e:
        if e.errno != errno.ELOOP:   # ELOOP: `a -> b -> a`, or a link to itself
            return image.resolve()
        raise VlcpError(f"{image}: a symlink loop (it never reaches a file), not an image: remove it (or read without "
                        f"--no-check-images, which skips it and counts it as a missing image)") from None


def check_same_chunk(src: Source, now: dict, known: dict[str, dict], history: str) -> None:
    """Refuse a chunk of the history whose contents are not what its update read (`known`:
    `UpdateCfg.fingerprints`; `now`: its `fingerprint` as read): one line naming it, the history
    file, what changed and what to do."""
    if src.name not in known:
        return
    change = fingerprint_change(known[src.name]["fingerprint"], now)
    if change:
        raise VlcpError(f"{src.name}: {src.path} is not the data update {known[src.name]['update']} read as this "
                        f"chunk ({change}; {history}): restore it, or point --moved {src.name}=PATH at the original data")


def auto_mixture(has_pretraining: bool) -> tuple[float, float, float]:
    """FoMo-in-Flux's default mixture, without pretraining data its λP moved to the chunk (λD)."""
    p, d, b = FOMO_MIXTURE
    return (p, d, b) if has_pretraining else (0.0, d + p, b)


class UserStream(Stream):
    provides = frozenset({"pixels", "replay"})

    @classmethod
    def check(cls, cfg: ExperimentCfg, method_cls: type[Method]) -> None:
        if cfg.update is None or not cfg.update.chunks:
            raise ConfigError("update.chunks: the user stream needs at least one chunk of data to train on")
        user_sources(cfg.update)

    def _read(self, src: Source) -> tuple[list[Record], dict]:
        u, d = self.cfg.update, self.cfg.data
        csv = CsvOptions(u.csv_img_key, u.csv_caption_key, u.csv_separator or None)
        image_root = u.image_root if reads_image_root(src.path, u.layout) else ""   # not a folder's, nor shards'
        if u.check_images:
            records, stats = read_checked(src.path, u.layout, csv, image_root, d.image_size, d.workers,
                                          progress=self.cfg.train.progress)
        else:
            stats = SourceStats()
            records = list(read_source(src.path, u.layout, csv, image_root, stats))
        out = {"read": stats.read, "skipped": dict(stats.skipped), "examples": list(stats.examples)}
        outside = outside_images(records, src.path, image_root)
        if outside and not u.follow_links:
            raise VlcpError(f"{src.name}: {len(outside)} image(s) resolve outside {source_root(src.path, image_root)} "
                            f"(a symlink or a ../ path; e.g. {outside[0]}): give --follow-links to read them")
        if outside:
            out["outside"] = len(outside)
            if is_main():
                print(f"vlcp: {src.name}: {len(outside)} image(s) are read from outside {source_root(src.path, image_root)} "
                      f"(a symlink or a ../ path; e.g. {outside[0]})", flush=True)
        return records, out

    def load_sets(self, train: bool = True) -> list[tuple[str, list[Record]]]:
        """Read every source: the evaluation sets (`sets`: each chunk's held-out slice, the keep-sets)
        and what was read and skipped (`data`); returns the training parts [(role, records)] (role:
        pretraining, earlier, chunk), or none with `train=False` (scoring only)."""
        u = self.cfg.update
        earlier, chunks, keep = user_sources(u)
        self.chunk_names = [s.name for s in chunks]
        self.data: dict[str, dict] = {}
        parts: list[tuple[str, list[Record]]] = []
        self.sets: list[EvalSet] = []
        self.text_cache: dict = {}   # class weights of the sets across evaluation rounds (a text tower that did not change)
        if u.pretraining and train:
            src = parse_source(u.pretraining, "update.pretraining")
            records, self.data[src.name] = self._read(src)
            parts.append(("pretraining", records))
        for role, src in [("earlier", s) for s in earlier] + [("chunk", s) for s in chunks]:
            records, stats = self._read(src)
            sizes = [image_size_bytes(r.image) for r in records]
            stats["fingerprint"] = fingerprint(records, sizes)
            check_same_chunk(src, stats["fingerprint"], u.fingerprints, u.history)
            held = holdout_mask([r.key for r in records], u.holdout)
            twins = self._held_twins(src, records, sizes, held)   # trained on, not scored: see _held_twins
            held = [h and i not in twins for i, h in enumerate(held)]
            rest = [r for r, h in zip(records, held) if not h]
            if role == "chunk" and u.fraction < 1:
                rest = first_by_hash(rest, max(1, math.ceil(u.fraction * len(rest))))
            test = first_by_hash([r for r, h in zip(records, held) if h], u.max_eval)
            self.data[src.name] = {**stats, "train": len(rest), "heldout": sum(held), "evaluated": len(test),
                                   "duplicates": len(twins)}
            if train and not rest and role == "chunk":
                raise ConfigError(f"update.chunks: {src.path}: no training pairs left after the held-out slice "
                                  f"({len(records)} readable, update.holdout {u.holdout:g})")
            parts.append((role, rest))
            if test:
                self.sets.append(EvalSet(src.name, "adaptation",
                                         pairs=record_pairs(test, self.cfg.data.image_size, self.cfg.data.workers, 1)))
        self.sets += [self._keep_set(src) for src in keep]
        self.sets = [s for s in self.sets if self._in_range(s)]
        return parts if train else []

    def _held_twins(self, src: Source, records: list[Record], sizes: list[int], held: list[bool]) -> set[int]:
        """The held-out records whose image bytes equal a training record's of the chunk (`byte_twins`),
        said when there are any. They move to the training part: scoring a model on an image it was
        trained on (under another name) would measure memory, not accumulation."""
        hi, ti = [i for i, h in enumerate(held) if h], [i for i, h in enumerate(held) if not h]
        twins = byte_twins([records[i] for i in hi], [sizes[i] for i in hi], [records[i] for i in ti],
                           [sizes[i] for i in ti])
        if twins and is_main():
            i, key = next(iter(twins.items()))
            print(f"vlcp: {src.name}: {len(twins)} of its {len(hi)} held-out image(s) have the same bytes as a "
                  f"training image (e.g. {records[hi[i]].key} = {key}): they are trained on, not scored "
                  f"(data: duplicates)", flush=True)
        return {hi[i] for i in twins}

    def _in_range(self, s: EvalSet) -> bool:
        """Whether set `s` can be scored with range: a keep-set of one class is an error (every image is
        right); a set over fewer than `update.min_candidates` candidates, or a retrieval slice whose
        pool is under 5 × the k of its R@k, is left out (its score would barely move), and said."""
        if s.pairs is None and len(s.classes) < 2:
            raise ConfigError(f"update.keep: {s.name}: an ImageFolder keep-set needs at least 2 classes (with "
                              f"{len(s.classes)} every image is classified right: A_ZS would be 100 whatever the model)")
        least = self.cfg.update.min_candidates
        if not least:
            return True
        n = s.size
        need = least if s.pairs is None else max(least, 5 * RETRIEVAL_K)
        if n >= need:
            return True
        what = (f"zero-shot over {n} images" if s.pairs is None else
                f"R@{RETRIEVAL_K} over {n} candidates (k must be at most a fifth of the pool)")
        how = ("add images to it" if s.role == "retention"
               else f"raise --holdout (now {self.cfg.update.holdout:g}) or add pairs to the chunk")
        self.data.setdefault(s.name, {})["refused"] = f"{what}: needs {need}"
        if is_main():
            print(f"vlcp: {s.name} is not scored: {what} cannot move enough to mean anything (needs {need}; "
                  f"update.min_candidates {least}); {how}, or set update.min_candidates 0 to score it anyway", flush=True)
        return False

    def create_model(self):
        cfg = self.cfg
        return create_model(cfg.model.name, cfg.model.pretrained, self.device, cfg.data.image_size)

    def use_model(self, model, tokenizer) -> None:
        """The model the stream trains and scores (scoring only: `vlcp.update.evaluate`)."""
        self.model, self.tokenizer, self.eval_tokenizer = model, tokenizer, MemoTokenizer(tokenizer)

    def build(self, method: Method) -> None:
        cfg, d = self.cfg, self.cfg.data
        with self.loading():
            parts = self.load_sets()
            train = record_pairs([r for _, part in parts for r in part], d.image_size, d.workers, d.captions_per_item)
        ids, start = {"pretraining": [], "earlier": [], "chunk": []}, 0
        for role, part in parts:
            ids[role].append(torch.arange(start, start + len(part)))
            start += len(part)
        none = torch.empty(0, dtype=torch.long)
        self.pretraining, self.earlier = torch.cat(ids["pretraining"] or [none]), torch.cat(ids["earlier"] or [none])
        self.task_ids = ids["chunk"]

        model, tokenizer = self.create_model()
        self.use_model(model, tokenizer)
        corpus = [c for caps in train.captions for c in caps]
        tokens = tokenizer(corpus).view(len(train.captions), -1, tokenizer.context_length)
        self.materializer = Materializer(train.images, train.image_text, tokens, self.device, cfg.train.augment,
                                         transform=train_transform(d.transform))
        self.plain = Materializer(train.images, train.image_text, tokens, self.device, augment=False)
        self.train = train

    def _keep_set(self, src: Source) -> EvalSet:
        d, u = self.cfg.data, self.cfg.update
        if is_image_folder(src.path):
            folder = read_image_folder(src.path, ensemble=u.templates)
            keep = first_by_hash([Record(image=p, captions=("",), split="test", key=str(p)) for p in folder.images],
                                 u.max_eval)
            chosen = {r.key for r in keep}
            rows = [(p, y) for p, y in zip(folder.images, folder.labels) if str(p) in chosen]
            self.data[src.name] = {"read": len(folder.images), "evaluated": len(rows), "classes": len(folder.classes)}
            return EvalSet(src.name, "retention", images=ImageFiles([p for p, _ in rows], d.image_size, d.workers),
                           labels=torch.tensor([y for _, y in rows], dtype=torch.long), classes=folder.classes,
                           templates=folder.templates)
        records, stats = self._read(src)
        test = first_by_hash(records, u.max_eval)
        self.data[src.name] = {**stats, "evaluated": len(test)}
        return EvalSet(src.name, "retention", pairs=record_pairs(test, d.image_size, d.workers, 1))

    def ready(self) -> None:
        if is_main():
            print(plan(self.steps, self.cfg.train.batch_size, self.sets,
                       sum(p.numel() for p in self.model.parameters()), self.cfg.model.name), flush=True)
            if self.cfg.update.export:   # the update's folder: the model it keeps (fp32), and a checkpoint with AdamW's moments
                check_free_space(Path(self.cfg.update.export).parent,
                                 4 * 4 * sum(p.numel() for p in self.model.parameters()),
                                 "this update (the model it keeps, and its checkpoint while it runs)")

    def before_training(self, model, method: Method, ctx, steps_left: int) -> None:
        """The plan's time: one step measured here, scaled to the steps left."""
        seconds = measure_step_seconds(model, method, ctx, self.cfg, self.device)
        if is_main():
            print(time_estimate(seconds, steps_left, len(self.steps) + 1), flush=True)

    def reference_cost(self) -> None:
        if self.cfg.update.budget == "mafs":   # full fine-tuning's step: the budget's reference, before adapters
            self.full_ft = step_cost(self.model, SeqF(), self.context(0), self.cfg, self.device)

    def budget(self, method: Method) -> list[int]:
        u = self.cfg.update
        self.cost = None
        if u.budget == "samples":
            steps = math.ceil(u.samples / self.cfg.train.batch_size)
        elif u.budget == "mafs":
            own = step_cost(self.model, method, self.context(0), self.cfg, self.device, self.probe_context(method))
            steps, self.cost = mafs_steps(u.steps, self.full_ft, own)
        else:
            steps = u.steps
        self.steps = [steps] * self.num_tasks
        return self.steps

    def prior_steps(self) -> list[int]:
        return list(self.cfg.update.prior_steps)

    def header(self) -> dict:
        head = {"tasks": self.chunk_names, "task_sizes": [len(i) for i in self.task_ids],
                "steps_per_task": self.steps, "data": self.data}
        if self.cost is not None:
            head["budget"] = self.cost
        return head

    def environment(self) -> dict:
        return {"datasets": {s.name: {"role": s.role, "n": s.size}
                             for s in self.sets}}

    def records(self) -> dict:
        return {"trajectory": []}

    def _scores(self, model) -> dict:
        scores = score_sets(model, self.eval_tokenizer, self.sets, self.device, self.cfg.eval.batch_size,
                            self.cfg.train.progress, self.text_cache)
        return continual.trade_off(scores, [s.name for s in self.sets if s.role == "adaptation"],
                                   [s.name for s in self.sets if s.role == "retention"])

    def zero_shot(self, model) -> dict:
        return self._scores(model)

    def context(self, t: int) -> TaskContext:
        cfg, u = self.cfg, self.cfg.update
        gen = torch.Generator().manual_seed(derive_seed(cfg.seed, "task", t))
        ctx = TaskContext(task=t, num_tasks=self.num_tasks, train_set=self.train, task_ids=self.task_ids,
                          pool=self.task_ids[t], materialize=lambda ids, g=gen: self.materializer(ids, g), generator=gen,
                          materialize_plain=lambda ids, g=torch.Generator().manual_seed(derive_seed(cfg.seed, "plain", t)):
                          self.plain(ids, g))
        buffer = torch.cat([self.earlier, *self.task_ids[:t]])
        if len(self.pretraining) or len(buffer):
            lam = tuple(u.mixture) if u.mixture is not None else auto_mixture(bool(len(self.pretraining)))
            sizes = lambda b: mixture_sizes(b, *lam, first_task=not len(buffer), field="update.mixture")  # noqa: E731
            # D is drawn from ctx.pool: the chunk, or what a method makes of it
            ctx.sampler = lambda b, g: sample_mixture((self.pretraining, ctx.pool, buffer), sizes(b), g)[0]
        return ctx

    def task_label(self, t: int) -> str:
        return self.chunk_names[t]

    def evaluate(self, model, t: int) -> dict:
        return self._scores(model)

    def record(self, results: dict, t: int, row: dict | None) -> None:
        if row:
            results["trajectory"].append(row)

    def finish(self, model, results: dict) -> None:
        if self.cfg.update.export and is_main():
            from vlcp.models.export import save_open_clip
            save_open_clip(model, self.cfg.update.export, self.cfg.model.name)

    def progress(self, row: dict) -> str:
        fmt = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
        return f"A_KA {fmt(row['A_KA'])} A_ZS {fmt(row['A_ZS'])} GM {fmt(row['GM'])}"
