"""The language stream (CLL-CLIP's continual language learning).

The model is `CLLText` over a frozen base CLIP and training never touches pixels: the base CLIP's
image features and English text features are computed once (cached teacher features, memoised
per process for the next run of the same data and base model: `stream_inputs`), and a batch is
(image feature, English feature, foreign caption tokens). Data: `vlcp.data.languages`
(the emoji benchmark's CLDR captions, or MSCOCO36 and XM3600). Each task's languages come from
`method.plan`. After every task every learned language is evaluated (`vlcp.eval.language`);
methods that need the task identity (†) are evaluated with the oracle language and, as
`<set>_no_id`, with the latest task's modules. Checkpoints are atomic and per task; a resume
rebuilds the grown model by replaying the finished tasks' `before_task` (`rebuild_model`).

Under torchrun every rank keeps its slice of each global batch; the model is not wrapped in DDP
(its embedding grows at every task): the loop averages the gradients; the vocabs are trained on
rank 0 and broadcast; rank 0 evaluates and writes.
"""
from __future__ import annotations

import copy
import json
import weakref
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tqdm import tqdm

from vlcp.config import ExperimentCfg
from vlcp.data.bpe import Vocab, train_bpe
from vlcp.data.languages import Examples
from vlcp.data.load import load_language_data
from vlcp.errors import ConfigError, VlcpError
from vlcp.eval.encode import normalise_images
from vlcp.eval.language import LanguageEvaluator
from vlcp.methods.base import Method, TaskContext
from vlcp.methods.cllclip import CLLCLIP, TextBatch
from vlcp.models.clip import create_clip
from vlcp.models.token_embedding import CLLText
from vlcp.run.stream import Stream
from vlcp.train import budget
from vlcp.train.distributed import (all_reduce_max, all_reduce_mean, broadcast_object, is_main, local_slice,
                                    rank_and_size)
from vlcp.utils import derive_seed

ORACLE_FACTOR = 20   # oracle vocab size / per-language size (the paper: 200K vs 10K)


@torch.no_grad()
def encode_images(clip, images, device, batch_size: int = 512, desc: str = "") -> torch.Tensor:
    """Normalised image features [N, D] of uint8 images [N, S, S, 3] (array, tensor or `ImageFiles`)."""
    starts = range(0, len(images), batch_size)
    return torch.cat([clip.encode_image(normalise_images(torch.as_tensor(images[s:s + batch_size])).to(device),
                                        normalize=True).float().cpu()
                      for s in tqdm(starts, desc=desc, unit="batch", disable=len(starts) < 20 or not is_main())])


@torch.no_grad()
def encode_texts(clip, tokenizer, texts: list[str], device, batch_size: int = 512, desc: str = "") -> torch.Tensor:
    """The frozen CLIP's (unnormalised) text features [N, D], as CLFM's teacher caches."""
    starts = range(0, len(texts), batch_size)
    return torch.cat([clip.encode_text(tokenizer(texts[s:s + batch_size]).to(device)).float().cpu()
                      for s in tqdm(starts, desc=desc, unit="batch", disable=len(starts) < 20 or not is_main())])


class TextMaterializer:
    """Global example ids -> this rank's TextBatch: a random training style's cached image
    feature, the cached English feature of the example's row, and its caption under the
    model's current vocab. The styles are drawn for the whole global batch, then sliced (as
    `vlcp.train.loop.Materializer`), so the batches do not depend on the world size."""

    def __init__(self, examples: Examples, images: torch.Tensor, english: torch.Tensor, model: CLLText, device):
        self.examples, self.images, self.english = examples, images, english   # images [styles, items, D]
        self.model, self.device = model, device

    def __call__(self, ids: torch.Tensor, generator: torch.Generator) -> TextBatch:
        ex = self.examples
        style = torch.randint(0, len(self.images), (len(ids),), generator=generator)
        sl = local_slice(len(ids))
        ids, style = ids[sl], style[sl]
        item = ex.item[ids]
        tokens, eot = self.model.encode(ex.texts(ids))
        width = all_reduce_max(tokens.shape[1], self.device)   # the global batch's longest: one process's shapes
        tokens = F.pad(tokens, (0, width - tokens.shape[1]))
        return TextBatch(self.images[style, item].to(self.device), self.english[ex.row[ids]].to(self.device),
                         tokens, eot, ids, item.to(self.device), [ex.languages[i] for i in ex.lang[ids].tolist()])


@dataclass(frozen=True)
class InputsKey:
    """What the frozen teacher's features and the vocabs of a run depend on: the data config, the
    base model (name, weights file and its stamp) and the device and its thread count, compared by
    value. The data config and weak references to the run's base CLIP and tokenizer ride along
    uncompared (they load and encode on a miss; the memo keeps no model alive: a ViT-B/16 on a GPU)."""
    data: str
    model: tuple
    device: str
    threads: int        # matmul results may differ in their last bits between thread counts
    cfg: Any = field(compare=False)
    clip: Any = field(compare=False)
    tokenizer: Any = field(compare=False)

    @classmethod
    def of(cls, cfg: ExperimentCfg, device, clip, tokenizer) -> "InputsKey":
        path = Path(cfg.model.pretrained or "")
        stamp = (path.stat().st_mtime_ns, path.stat().st_size) if cfg.model.pretrained and path.is_file() else None
        return cls(json.dumps(asdict(cfg.data), sort_keys=True), (cfg.model.name, cfg.model.pretrained, stamp),
                   str(device), torch.get_num_threads(), cfg.data, weakref.ref(clip), weakref.ref(tokenizer))


@lru_cache(maxsize=1)
def stream_inputs(key: InputsKey) -> tuple:
    """(LanguageData, training image features [styles, items, D], English text features [rows, D],
    {set: (image features, image items)}, the base CLIP's `Vocab`), the same for every run of one
    data config and base model: memoised, so the runs of a study in one process (`vlcp run
    --list`, each `--jobs` worker) load the corpus and encode the images once (~4 s a 36-language
    run on 2 cores), and grow their vocabs from one base `Vocab` (so they share each merged vocab's
    tokenizer and ids: `Vocab.merge`). The last key's inputs stay in memory until the next key's
    replace them. Uses no random numbers."""
    clip, device = key.clip(), key.device
    data = load_language_data(key.cfg)
    train_img = torch.stack([encode_images(clip, im, device, desc=f"image features ({len(im)} training images)")
                             for im in data.train_images])
    english = encode_texts(clip, key.tokenizer(), data.english, device, desc="English text features")
    image_sets = {name: (encode_images(clip, s.images, device, desc=f"image features ({name})"), s.image_items)
                  for name, s in data.eval_sets.items()}
    return data, train_img, english, image_sets, Vocab.from_open_clip(key.tokenizer())


@lru_cache(maxsize=2)
def stream_vocabs(key: InputsKey, size: int, oracle: bool) -> dict:
    """`train_vocabs` on the key's data, memoised like `stream_inputs` (BPE training is
    deterministic: a study's runs share one set of vocabs; ~0.1 s a language). Read-only."""
    data = stream_inputs(key)[0]
    return train_vocabs(data.examples, data.languages, size, oracle)


def train_vocabs(examples: Examples, languages: list[str], size: int, oracle: bool) -> dict:
    """Each language's own BPE vocab from its training captions (+ the oracle vocab from all),
    trained on rank 0 and broadcast (every rank must merge the same vocab)."""
    bpe = None
    if is_main():
        bpe = {lang: train_bpe(examples.texts(examples.of_language(lang)), size) for lang in languages}
        if oracle:
            bpe["oracle"] = train_bpe(examples.texts(torch.arange(len(examples))), size * ORACLE_FACTOR)
    return broadcast_object(bpe)


@lru_cache(maxsize=2)
def zero_shot(key: InputsKey, ks: tuple[int, ...], batch_size: int) -> dict:
    """The curves' start: the base CLIP with its English vocab, on every language of the stream,
    encoded as plain CLL-CLIP does (no method has a module before its first task). It depends on
    the key's data and base model only, so a study's runs in one process (36 evaluations each,
    ~1 s a 36-language run on one thread) share it, like `stream_inputs`. Read-only."""
    data, _, _, image_sets, base_vocab = stream_inputs(key)
    model = CLLText(key.clip(), base_vocab).to(key.device)
    return evaluate(model, CLLCLIP(), language_evaluator(data, image_sets, ks, batch_size),
                    data.languages, set(data.languages))


def language_evaluator(data, image_sets: dict, ks, batch_size: int, progress: bool = False) -> LanguageEvaluator:
    """The stream's test sets: each set's captions per language against its encoded images."""
    return LanguageEvaluator({name: s.captions for name, s in data.eval_sets.items()}, image_sets, ks, batch_size,
                             progress)


def vocabs_from_json(text: str) -> dict:
    """The checkpoint's vocabs: {language: (token -> id, merges as tuples)}."""
    return {lang: (vocab, [tuple(m) for m in merges]) for lang, (vocab, merges) in json.loads(text).items()}


def rebuild_model(model: CLLText, method_cls, cfg: ExperimentCfg, plan: list[list[str]], done: int, bpe: dict,
                  examples: Examples, task_ids: list[torch.Tensor]) -> None:
    """Grow `model` (fresh: the base CLIP with its English vocab) in place to the structure it
    had after task `done`: the vocab merges, new embedding rows, per-language adapters, prefixes,
    LoRA layers and prompt pools that the method's `before_task` added for tasks 0..`done`,
    replayed by a throwaway method of the run's config. The values (random rows and modules)
    are placeholders for the checkpoint's state dict; the draws they take from torch's global
    generator (nn.Linear's and peft's LoRA init) are undone by the checkpoint's `rng`."""
    replay = method_cls(method_cls.Config(**cfg.method.args), seed=derive_seed(cfg.seed, "method"))
    for t in range(done + 1):
        replay.before_task(model, TaskContext(task=t, num_tasks=len(plan), train_set=examples, task_ids=task_ids,
                                              pool=task_ids[t], materialize=None, generator=torch.Generator(),
                                              extras={"languages": plan[t], "bpe": bpe}))


def evaluate(model, method, evaluator: LanguageEvaluator, languages, learned, oracle=True) -> dict:
    model.eval()
    out = evaluator(lambda lang, texts: method.encode_eval(model, lang, texts, oracle), languages, learned)
    model.train()
    return out


def convergence(model, method, ctx: TaskContext, batches: int = 16, batch_size: int = 128,
                per_batch: int = 8) -> dict:
    """CLL-CLIP Fig. 3: the final model's mean training loss and the trace of the empirical
    Fisher, the mean over training pairs of the squared norm of each pair's loss gradient w.r.t.
    the trainable parameters (the paper's per-sample trace; pair i's loss is row i of the CLL-CLIP
    objective, `CLLCLIP.sample_losses`, scored against its batch's negatives), on a seeded sample
    of every language's training examples: the loss over `batches` batches, the trace over the
    first `per_batch` pairs of each (one backward pass a pair). Under DDP every rank holds its
    slice of each batch: the loss is averaged over ranks, and each pair's gradient is its owner's
    row differentiated on every rank (the others differentiate 0 through the same graph, so the
    features' all-gather runs backward on all) and summed over ranks: the one-process values."""
    gen = torch.Generator().manual_seed(0)
    params = [p for p in model.parameters() if p.requires_grad]
    rank, world = rank_and_size()
    losses, traces = [], []
    for _ in range(batches):
        ids = ctx.pool[torch.randint(0, len(ctx.pool), (batch_size,), generator=gen)]
        batch = ctx.materialize(ids, gen)
        rows = CLLCLIP.sample_losses(method, model, batch, ctx)
        losses.append(all_reduce_mean(rows.mean().detach()).item())
        for g in range(min(per_batch, len(rows) * world)):
            owner, i = divmod(g, len(rows))
            target = rows[i] if owner == rank else rows.sum() * 0
            grads = torch.autograd.grad(target, params, retain_graph=True, allow_unused=True, materialize_grads=True)
            flat = torch.cat([x.reshape(-1).float() for x in grads])
            if world > 1:
                torch.distributed.all_reduce(flat)
            traces.append(float(flat.pow(2).sum()))
    return {"loss": sum(losses) / batches, "fisher_trace": sum(traces) / len(traces), "batches": batches,
            "batch_size": batch_size, "fisher_pairs": len(traces)}


class LanguageStream(Stream):
    start_passes = False   # before_task grows vocabularies, embeddings, adapters and prompts: no matrix products
    wraps_ddp = False      # the embedding grows every task; train_task averages the gradients

    provides = frozenset({"languages", "token_table", "replay"})

    @classmethod
    def check(cls, cfg: ExperimentCfg, method_cls: type[Method]) -> None:
        if cfg.train.compile != "none":
            raise ConfigError("train.compile: the language stream's model grows its token embedding every task "
                              "(a recompile each task); run it uncompiled")

    def build(self, method: Method) -> None:
        cfg, device = self.cfg, self.device
        clip, tokenizer = create_clip(cfg.model.name, cfg.model.pretrained, device, cfg.data.image_size)
        clip.eval()
        self.clip = clip   # alive until `ready` (the key holds weak references: the memo keeps no model)
        self.key = InputsKey.of(cfg, device, clip, tokenizer)
        with self.loading():   # the corpus, and the base CLIP's image and English features (memoised)
            data, train_img, english, image_sets, base_vocab = stream_inputs(self.key)
        self.data, self.examples, self.method = data, data.examples, method
        self.plan = method.plan(data.languages)
        self.names = ["+".join(p) if len(p) < 4 else f"all {len(p)} languages" for p in self.plan]
        self.evaluator = language_evaluator(data, image_sets, cfg.eval.ks, cfg.eval.batch_size,
                                            cfg.train.progress and is_main())
        self.model = CLLText(clip, base_vocab).to(device)
        self.task_ids = [torch.cat([self.examples.of_language(lang) for lang in langs]) for langs in self.plan]
        self.mat = TextMaterializer(self.examples, train_img, english, self.model, device)

    def budget(self, method: Method) -> list[int]:
        self.steps = budget.allocate_steps(self.cfg.train.steps, [len(i) for i in self.task_ids],
                                           self.cfg.train.steps_split)
        return self.steps

    def header(self) -> dict:
        return {"stream": "language", "languages": self.data.languages, "tasks": self.names,
                "task_languages": self.plan, "task_sizes": [len(i) for i in self.task_ids],
                "steps_per_task": self.steps, "benchmark": self.cfg.data.benchmark, "coverage": self.data.coverage,
                "needs_task_id": self.method.needs_task_id}

    def records(self) -> dict:
        return {"matrix": {}, "vocab_sizes": []}

    def restore(self, state: dict | None, method: Method) -> None:
        """A resume rebuilds the grown model from the checkpoint's own vocabs (not trained again:
        immune to a tokenizers upgrade); a fresh run takes the stream's (memoised) vocabs."""
        if state is None:
            self.bpe = stream_vocabs(self.key, method.cfg.vocab_size, method.cfg.oracle_vocab)
        else:
            self.bpe = vocabs_from_json(state["bpe"])
            rebuild_model(self.model, type(method), self.cfg, self.plan, state["task"], self.bpe, self.examples,
                          self.task_ids)
            if len(self.model.vocab) != state["vocab_size"]:
                raise VlcpError(f"{state['path']}: its vocabs rebuild a vocab of {len(self.model.vocab)} tokens, not "
                                f"the {state['vocab_size']} it was written with; run again with `--no-resume` to start over")
        self.bpe_json = json.dumps(self.bpe, ensure_ascii=False)   # one string per checkpoint: pickling the ~100K
        #                                                             small objects of 36 vocabs took 0.12 s a task

    def checkpoint_extras(self) -> dict:
        return {"bpe": self.bpe_json, "vocab_size": len(self.model.vocab)}

    def zero_shot(self, model) -> dict:
        """The base CLIP with its English vocab, on every language (memoised per process)."""
        return copy.deepcopy(zero_shot(self.key, tuple(self.cfg.eval.ks), self.cfg.eval.batch_size))

    def ready(self) -> None:
        self.clip = None   # (zero_shot builds its model from it through the key)

    def context(self, t: int) -> TaskContext:
        gen = torch.Generator().manual_seed(derive_seed(self.cfg.seed, "task", t))
        return TaskContext(task=t, num_tasks=len(self.plan), train_set=self.examples, task_ids=self.task_ids,
                           pool=self.task_ids[t], materialize=lambda ids, g=gen: self.mat(ids, g), generator=gen,
                           extras={"languages": self.plan[t], "bpe": self.bpe})

    def task_label(self, t: int) -> str:
        return self.names[t]

    def evaluate(self, model, t: int) -> dict:
        """Every learned language; methods that need the task identity (†) also as `<set>_no_id`, with
        the latest task's modules."""
        learned = {lang for p in self.plan[: t + 1] for lang in p}
        rows = {"": evaluate(model, self.method, self.evaluator, self.data.languages, learned, oracle=True)}
        if self.method.needs_task_id:
            rows["_no_id"] = evaluate(model, self.method, self.evaluator, self.data.languages, learned, oracle=False)
        return rows

    def record(self, results: dict, t: int, rows: dict | None) -> None:
        for suffix, row in (rows or {}).items():
            for name, metrics in row.items():
                for m, vals in metrics.items():
                    results["matrix"].setdefault(name + suffix, {}).setdefault(m, []).append(vals)
        results["vocab_sizes"].append(len(self.model.vocab))

    def progress(self, rows: dict) -> str:
        return f"vocab {len(self.model.vocab)} tokens"

    def finish(self, model, results: dict) -> None:
        if self.cfg.eval.convergence and "convergence" not in results:
            every = torch.cat([self.examples.of_language(lang) for lang in self.data.languages])
            ctx = TaskContext(task=len(self.plan) - 1, num_tasks=len(self.plan), train_set=self.examples,
                              task_ids=self.task_ids, pool=every, materialize=self.mat,
                              generator=torch.Generator().manual_seed(0))
            results["convergence"] = convergence(model, self.method, ctx)
