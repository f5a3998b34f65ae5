"""Typed, validated experiment configs.

An experiment resolves from `params.yaml` as `defaults` < `profiles[profile]` < `experiments[name]`
< CLI `--set key=value`; a profile's `model_aliases` map an experiment's model name to that
profile's model, with the alias's own `train:` / `data:` / `eval:` / `fomo:` settings and its
`method:` settings that follow the profile's scale (`alias_method_defaults`: only where the
method's Config has the field; never `name`). docs/architecture.md, "Experiments and
configuration", states the rules.

Every field is typed; an unknown field, a wrong type or an out-of-range value raises
`ConfigError` naming the field (`train.lr: ...`). A float field takes every usual number
notation (`_check_type` converts YAML 1.1's string `1e-3`), an int field an integral value; bools
are no numbers; NaN and infinity are rejected. Each numeric field declares its range with
`ranged(default, ge=/gt=/le=/lt=)` (read by `field_range`), checked by `build` and by
`check_ranges(self)` in a `__post_init__`; cross-field rules stay in each `__post_init__`.
Method-specific fields live under `method:`, validated by the method's own `Config`.
"""
from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from vlcp import registry
from vlcp.errors import ConfigError, unknown_name
from vlcp.fields import Range, check_range, check_ranges, check_values, field_range, ranged  # noqa: F401  (re-exported)

BENCHMARKS = ("emoji", "p9d", "mscoco36", "fomo", "cc", "user")   # all but emoji: vlcp.data.real (the real datasets the streams read); user: `update.chunks` (vlcp update)
REAL_STREAM = {"p9d": ("group",), "mscoco36": ("language",), "fomo": ("concepts",),
               "cc": ("class", "instance"), "user": ("user",)}   # the streams each real dataset runs
STYLES = ("twemoji", "openmoji", "noto-mono", "noto-color")
OPTIMIZERS = ("adamw", "lamb")   # train.optimizer (vlcp.train.optim.make_optimizer)
COMPILE_MODES = ("none", "default", "reduce-overhead", "max-autotune")   # train.compile (vlcp.train.loop.compiled)
SCHEDULES = ("cosine", "rsqrt", "autoregressive-cosine", "continued-cosine", "autoregressive-rsqrt", "continued-rsqrt",
             "peaks-match-rsqrt")   # train.schedule (vlcp.train.schedules.SCHEDULES, in its order)
TRANSFORMS = ("shift", "ctp", "fomo")   # data.transform: the Materializer's shift + vlcp.data.augment.TRANSFORMS
STREAMS = tuple(registry.STREAMS)   # data.stream: the kinds vlcp.run runs
SEED_MAX = 2**63 - 1   # seeds are 63-bit (torch.manual_seed, numpy's generators)


@dataclass
class SplitCfg:
    """Per-subgroup fractions of items; the rest is train. Gallery = the train items."""
    test: float = ranged(0.15, ge=0, lt=1)
    val: float = ranged(0.10, ge=0, lt=1)
    query: float = ranged(0.10, ge=0, lt=1)

    def __post_init__(self):
        check_ranges(self)
        if self.test + self.val + self.query >= 0.9:
            raise ConfigError("test + val + query: must leave at least 10% for train")


@dataclass
class DataCfg:
    benchmark: str = "emoji"
    root: str = "data/emoji"
    styles: list[str] = field(default_factory=lambda: ["twemoji", "noto-mono", "openmoji"])
    train_styles: list[str] = field(default_factory=lambda: ["twemoji", "noto-mono"])
    unseen_styles: list[str] = field(default_factory=lambda: ["openmoji"])
    image_size: int = ranged(32, ge=8)
    max_version: float = ranged(15.1, gt=0)   # the newest Emoji version rendered
    seed: int = ranged(0, ge=0, le=SEED_MAX)
    split: SplitCfg = field(default_factory=SplitCfg)
    tasks: list[str] = field(default_factory=list)  # groups to use; empty = all, in Unicode order
    stream: str = "group"            # group: one task per group | class: class chunks | instance: random chunks | language: one task per language (CLL-CLIP) | concepts: FoMo-in-Flux concept stream (see `fomo`)
    num_tasks: int = ranged(0, ge=0)  # class/instance streams: number of chunks (>= 2)
    class_chunks: str = "items"      # class stream: chunks about equal in items, or in classes (IncCLIP: 4 x 250 ImageNet classes)
    reverse: bool = False            # reverse the task order
    languages: list[str] = field(default_factory=list)  # language stream: CLDR codes in order; empty = en + the 35 others, seeded
    num_languages: int = ranged(0, ge=0)  # language stream: keep the first N of the order (0 = all); ignored by other streams
    captions_per_item: int = ranged(8, ge=1)
    workers: int = ranged(0, ge=0)   # real datasets: DataLoader worker processes decoding each batch's images (0 = in this process, the CPU default; the small and paper profiles set 8; the emoji benchmark is in memory)
    max_bad_images: int = ranged(100, ge=0)  # real datasets: unreadable images skipped (each replaced by the next readable item) before the run stops
    ood_root: str = ""               # mscoco36: the XM3600 directory, the out-of-domain test set ("" = none)
    transform: str = "shift"         # training augmentation (train.augment on): shift (±2 px) | ctp | fomo (vlcp.data.augment)
    max_pairs: int = ranged(0, ge=0)  # cc: the first N pairs of the shards (0 = all)
    labels: str = ""                 # cc, class stream: pseudo labels {"<sample key>": ImageNet class id} (data/README.md)

    def __post_init__(self):
        check_ranges(self)
        if self.benchmark not in BENCHMARKS:
            raise ConfigError(f"benchmark: unknown benchmark {self.benchmark!r}; known: {', '.join(BENCHMARKS)}")
        if self.benchmark != "emoji":
            if self.unseen_styles:
                raise ConfigError(f"unseen_styles: the {self.benchmark} benchmark has one image per item, no style "
                                  "to hold out; set data.unseen_styles: []")
            if self.stream not in REAL_STREAM[self.benchmark]:
                raise ConfigError(f"stream: the {self.benchmark} benchmark runs the "
                                  f"{' or '.join(REAL_STREAM[self.benchmark])} stream only, not {self.stream!r}")
        elif self.stream == "user":
            raise ConfigError("stream: the user stream trains on your own data (data.benchmark: user, `update.chunks`; "
                              "vlcp update), not on the emoji benchmark")
        elif self.ood_root:
            raise ConfigError("ood_root: only the mscoco36 benchmark has an out-of-domain directory (XM3600); "
                              "the emoji benchmark holds out data.unseen_styles")
        if self.class_chunks not in ("items", "classes"):
            raise ConfigError(f"class_chunks: must be 'items' or 'classes', got {self.class_chunks!r}")
        if self.transform not in TRANSFORMS:
            raise ConfigError(f"transform: unknown training transform {self.transform!r}; known: {', '.join(TRANSFORMS)}")
        for name in ("styles", "train_styles", "unseen_styles"):
            bad = [s for s in getattr(self, name) if s not in STYLES]
            if bad:
                raise ConfigError(f"{name}: unknown style {bad[0]!r}; known: {', '.join(STYLES)}")
        if not self.train_styles:
            raise ConfigError("train_styles: needs at least one style")
        for name in ("train_styles", "unseen_styles"):
            missing = [s for s in getattr(self, name) if s not in self.styles]
            if missing:
                raise ConfigError(f"{name}: style {missing[0]!r} is not in styles {self.styles}")
        if self.stream not in STREAMS:
            raise ConfigError(f"stream: unknown stream {self.stream!r}; known: {', '.join(STREAMS)}")
        if self.stream in ("class", "instance") and self.num_tasks < 2:
            raise ConfigError(f"num_tasks: the {self.stream} stream needs num_tasks >= 2, got {self.num_tasks}")
        if self.languages and self.stream != "language":
            raise ConfigError("languages: only the language stream has languages (set data.stream: language)")
        if self.stream == "group" and self.num_tasks:
            raise ConfigError("num_tasks: the group stream has one task per group; use data.tasks to pick groups")
        if self.num_languages == 1:
            raise ConfigError(f"num_languages: must be 0 (all) or >= 2, got {self.num_languages}")


@dataclass
class ModelCfg:
    name: str = "vlcp-tiny"          # any open_clip model name, or one of vlcp's tiny configs
    pretrained: str | None = None    # open_clip tag or local file; None = random init


@dataclass
class MethodCfg:
    """`name` picks the method; the other keys are that method's own Config fields."""
    name: str = "seqf"
    args: dict[str, Any] = field(default_factory=dict)


@dataclass
class TrainCfg:
    steps: int = ranged(600, ge=1)   # total steps over the stream, split across tasks
    steps_split: str = "size"        # "size" (∝ task's train pairs) or "equal"
    batch_size: int = ranged(128, ge=2, note="contrastive")
    lr: float = ranged(1e-3, gt=0)
    min_lr_ratio: float = ranged(0.01, ge=0, le=1)
    warmup_steps: int = ranged(10, ge=0)   # per task
    warmup_frac: float = ranged(0.0, ge=0, lt=1)   # > 0: warmup = ceil(frac × the task's steps), overriding warmup_steps (FoMo: 0.1)
    cooldown_frac: float = ranged(0.1, ge=0, lt=1)   # rsqrt schedules: linear cooldown over the last frac of each task
    schedule: str = "cosine"         # per task: cosine | rsqrt; meta (FoMo-in-Flux): autoregressive-cosine | continued-cosine | autoregressive-rsqrt | continued-rsqrt | peaks-match-rsqrt
    weight_decay: float = ranged(0.1, ge=0)
    beta2: float = ranged(0.98, ge=0, lt=1)   # Adam's second-moment decay (AdamW, LAMB and GaLore need [0, 1))
    adam_eps: float = ranged(1e-6, gt=0)   # Adam's ε (the loop's AdamW and LAMB); FoMo-in-Flux's code: torch's 1e-8
    decay_all: bool = False          # weight decay on every trainable parameter (FoMo-in-Flux's code); False: matrices only
    optimizer: str = "adamw"         # adamw | lamb (timm's LAMB: IncCLIP's); methods with their own optimizer (CLL-CLIP's TEIR, GaLore) need adamw
    grad_clip: float = ranged(1.0, ge=0)   # max gradient norm; 0 = no clipping
    num_threads: int = ranged(2, ge=1)
    device: str = "auto"             # auto | cpu | cuda
    precision: str = "fp32"          # fp32 | bf16 (autocast, in training and evaluation's encoders; on CUDA also TF32 and
    #   cudnn.benchmark for what runs outside autocast: vlcp.run.state.cuda_math)
    ddp_timeout_minutes: float = ranged(120, gt=0)   # under torchrun: how long a collective waits for the other ranks
    #   (evaluation runs on rank 0 while the others wait; NCCL's default of 10 minutes is shorter than a paper-scale one)
    augment: bool = True
    progress: bool = True
    checkpoint_every: int = ranged(1, ge=1, note="tasks")   # tasks between the per-task checkpoints (vlcp.run.state.checkpoint_due); the last
    #   task's and a stop's (stop_after_task) are always written. A tiny model's task takes about a second and
    #   a checkpoint 35-75 ms, so the small streams (CLL-CLIP's 36 tasks) write fewer
    keep_task_checkpoints: bool = False   # also keep every checkpoint written as task-<i>.pt (the model, method state and
    #   results after task i; vlcp.train.checkpoint.load_checkpoint reads it): with checkpoint_every 1, one per task
    compile: str = "none"            # none | default | reduce-overhead | max-autotune: the torch.compile mode of the step's forward,
    #   loss and (through AOTAutograd) backward (vlcp.train.loop.compiled); reduce-overhead: CUDA graphs on a GPU
    accum_freq: int = ranged(1, ge=1)   # micro-batches per step: batch_size is split into accum_freq parts whose features are
    #   cached, the contrastive loss taken over the whole batch (open_clip's --accum-freq; vlcp.train.loop.accumulate)
    grad_checkpointing: bool = False   # recompute the transformer blocks' activations in the backward (open_clip's
    #   set_grad_checkpointing): less memory, the same gradients
    flops_every: int = ranged(1, ge=1, note="tasks")   # tasks between FLOP counts (vlcp.run.state.counted_task: every k-th and the last); the
    #   others record None and report.results.flops_per_step averages the counted tasks. Counting a step takes
    #   ~1.6 of its time and a pass ~1.6 of the pass's, so the small streams (CLL-CLIP's 36 tasks) sample
    pass_flops_seeds: list[int] | None = ranged(None, ge=0, le=SEED_MAX)   # seeds whose runs count the method's per-task passes' FLOPs
    #   (vlcp.run.accounting.task_pass_flops: re-runs each pass on copies, ~1.6x the pass's time); None = every seed.
    #   The counts depend on shapes, not the seed (<0.1% apart), so one seed can stand for the others:
    #   report.results.fill_pass_flops

    def __post_init__(self):
        check_ranges(self)
        if self.steps_split not in ("size", "equal"):
            raise ConfigError(f"steps_split: must be 'size' or 'equal', got {self.steps_split!r}")
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"schedule: unknown schedule {self.schedule!r}; known: {', '.join(SCHEDULES)}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ConfigError(f"device: must be auto, cpu or cuda, got {self.device!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"optimizer: must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        if self.precision not in ("fp32", "bf16"):
            raise ConfigError(f"precision: must be fp32 or bf16, got {self.precision!r}")
        if self.compile not in COMPILE_MODES:
            raise ConfigError(f"compile: must be one of {', '.join(COMPILE_MODES)} (a torch.compile mode), got {self.compile!r}")
        if self.batch_size % self.accum_freq:
            raise ConfigError(f"accum_freq: batch_size {self.batch_size} does not split into {self.accum_freq} equal "
                              "micro-batches")

ORDERINGS = ("random", "easy-to-hard", "frequency", "similarity", "time", "dataset")
MIXTURE_SOURCES = ("pretraining", "update", "buffer")   # a mixture's λP, λD, λB (vlcp.data.mixtures.SOURCES)


def validate_mixture(lam_p: float, lam_d: float, lam_b: float, field: str = "data.mixture") -> None:
    """Each λ a number in [0, 1], summing to 1 (tolerance 1e-6, as FoMo asserts); ConfigError
    naming the field otherwise."""
    import numpy as np   # (numpy's scalars count as numbers; `import vlcp.config` loads no numpy)

    for name, lam in zip(MIXTURE_SOURCES, (lam_p, lam_d, lam_b)):
        if isinstance(lam, bool) or not isinstance(lam, (int, float, np.integer, np.floating)):
            raise ConfigError(f"{field}.{name}: λ must be a number, got {lam!r}")
        if not (0.0 <= lam <= 1.0):  # also rejects NaN
            raise ConfigError(f"{field}.{name}: λ = {lam:g}, must be in [0, 1]")
    total = float(lam_p) + float(lam_d) + float(lam_b)
    if abs(total - 1.0) >= 1e-6:
        raise ConfigError(f"{field}: λ sum to {total:g}, must be 1")


POOL_GROUPS = ["Smileys & Emotion", "People & Body", "Animals & Nature", "Food & Drink", "Flags"]


@dataclass
class FomoCfg:
    """FoMo-in-Flux's concept stream (data.stream: concepts; `vlcp.data.fomo`, `vlcp.run.streams.concepts`)."""
    pool_groups: list[str] = field(default_factory=lambda: list(POOL_GROUPS))  # pretraining pool P; the other groups adapt
    num_tasks: int = ranged(20, ge=0)   # tasks cut by concept count (ordering "dataset": 0 = one task per dataset)
    ordering: str = "random"         # random | easy-to-hard | frequency | similarity | time | dataset
    reverse: bool = False
    stream_file: str | None = None   # a `DATASET+++class` JSON stream to use instead of `ordering`
    # the seed of the concept order (and of easy-to-hard's difficulty probe): one order at every run seed,
    # as FoMo's code streams one shipped file (random_sequence_1.json) whatever the seed; None = the run's
    # seed, each seed its own order (the seeds' spread then holds the orders' too)
    order_seed: int | None = ranged(0, ge=0)
    mixture: list[float] = ranged(factory=lambda: [0.33, 0.34, 0.33], ge=0, le=1)   # λP, λD, λB
    steps_per_task: int = ranged(30, ge=1)   # full fine-tuning's steps per task; other methods get the same MAFs
    compute_scale: float = ranged(1.0, gt=0)   # × steps_per_task (compute scaling; joint = T × with num_tasks 1; a longer stream at equal compute)
    budget: str = "mafs"             # mafs: steps × (full FT's MAFs / the method's) | steps: equal steps
    temperature: float | None = ranged(None, gt=0, le=1)  # set τ (logit scale = 1/τ) before the first task; None keeps θ0's
    shapes_per_class: int = ranged(6, ge=2)   # training images per colour-shape class
    pool: str = "full"               # the replayed pool P: full | one-style | half | noisy (see vlcp.data.fomo.with_pool)
    # also score each adaptation group in data.unseen_styles (every item: the stream trains on the training
    # styles' images only) as adaptation datasets "<group>/<style>": about twice A_KA's test images (a power lever)
    adapt_unseen: bool = False
    state_memory: str = "offloaded"  # the MAFs memory of what a method keeps across tasks (EWC's F and θ*, SI's Ω and θ*, a merge's θ0):
    #   offloaded = on the CPU as the paper's implementation keeps it, not counted; device = counted (vlcp.run.accounting.step_cost)
    # data.benchmark: fomo (FoMo-in-Flux's info dicts under data.root; vlcp.data.real.fomo_data)
    datasets: list[str] = field(default_factory=list)    # adaptation datasets (A_KA): streamed concept by concept
    retention: list[str] = field(default_factory=list)   # eval-only classification datasets (A_ZS)
    retrieval: list[str] = field(default_factory=list)   # eval-only retrieval datasets (A_ZS; R@5 over every caption)
    adaptation_retrieval: list[str] = field(default_factory=lambda: ["fscoco"])   # of `datasets`, those scored by R@5 in A_KA, not zero-shot accuracy (FoMo's type: retrieval)
    pool_root: str = ""              # webdataset shards of the pool P that λP replays
    pool_size: int = ranged(10000, ge=1)   # pool pairs read (captions in memory; images read from the shards per batch)

    def __post_init__(self):
        check_ranges(self)
        if self.ordering not in ORDERINGS:
            raise ConfigError(f"ordering: unknown ordering {self.ordering!r}; known: {', '.join(ORDERINGS)}")
        if self.num_tasks == 0 and self.ordering != "dataset":
            raise ConfigError(f"num_tasks: must be >= 1 (0 only with ordering 'dataset'), got {self.num_tasks}")
        if len(self.mixture) != 3:
            raise ConfigError(f"mixture: expected [λP, λD, λB], got {self.mixture!r}")
        validate_mixture(*self.mixture, field="mixture")
        if self.budget not in ("mafs", "steps"):
            raise ConfigError(f"budget: must be 'mafs' or 'steps', got {self.budget!r}")
        if self.pool not in ("full", "one-style", "half", "noisy"):
            raise ConfigError(f"pool: unknown pool {self.pool!r}; known: full, one-style, half, noisy")
        if self.state_memory not in ("offloaded", "device"):
            raise ConfigError(f"state_memory: must be 'offloaded' or 'device', got {self.state_memory!r}")


@dataclass
class EvalCfg:
    batch_size: int = ranged(512, ge=1)
    ks: list[int] = ranged(factory=lambda: [1, 5, 10], ge=1)   # R@K for each K (distinct)
    zeroshot_templates: list[str] = field(default_factory=lambda: [
        "an emoji of {}.", "a {} emoji.", "an icon of {}.", "{}"])
    heldout: bool = False            # after each task, also the held-out suite (Evaluator.heldout; cc: the downstream sets)
    downstream_root: str = ""        # cc: a folder of FoMo-in-Flux-format datasets (data/README.md, "fomo/") for ...
    downstream: list[str] = field(default_factory=list)   # ... zero-shot classification on their test splits ...
    downstream_retrieval: list[str] = field(default_factory=list)   # ... and retrieval (every caption of an image a match)
    prompts: str = "single"          # downstream zero-shot templates: single (the dataset's own) | ensemble (CLIP's; vlcp.eval.zeroshot.prompt_templates)
    convergence: bool = False        # language stream: final training loss and empirical Fisher trace (CLL-CLIP Fig. 3)

    def __post_init__(self):
        check_ranges(self)
        if self.prompts not in ("single", "ensemble"):
            raise ConfigError(f"prompts: must be single or ensemble, got {self.prompts!r}")
        if not self.ks:
            raise ConfigError("ks: needs at least one K (R@K)")
        dup = [k for i, k in enumerate(self.ks) if k in self.ks[:i]]
        if dup:
            raise ConfigError(f"ks: {dup[0]} appears twice in {self.ks}")
        if not self.zeroshot_templates:
            raise ConfigError("zeroshot_templates: needs at least one template")
        for i, t in enumerate(self.zeroshot_templates):   # eval.zeroshot: t.format(class name)
            try:
                ok = "\0" in t.format("\0")
            except (IndexError, KeyError, ValueError):
                ok = False
            if not ok:
                raise ConfigError(f"zeroshot_templates[{i}]: {t!r} must hold one {{}} where the class name goes")


@dataclass
class UpdateCfg:
    """The user stream (`data.stream: user`, what `vlcp update` runs): your own caption data, one task
    per chunk, evaluated as FoMo-in-Flux evaluates (`vlcp.run.streams.user`). A source is
    `[NAME=]PATH` in any layout of `vlcp.data.formats.layouts` (a folder of images with same-name
    .txt captions, a CSV/TSV, webdataset shards, a COCO or Karpathy captions JSON; keep-sets also
    an ImageFolder of classes)."""
    chunks: list[str] = field(default_factory=list)    # trained, one task each, in order
    earlier: list[str] = field(default_factory=list)   # earlier updates' chunks: held-out slices scored (A_KA), training slices replayed (λB)
    keep: list[str] = field(default_factory=list)      # what to keep (A_ZS): ImageFolder class sets (zero-shot) or caption sets (retrieval)
    holdout: float = ranged(0.1, ge=0, lt=1)           # share of each chunk held out for A_KA (by key hash: the same slice on every read)
    max_eval: int = ranged(500, ge=1)                  # at most this many images per evaluation set (the first by key hash)
    pretraining: str = ""                              # pretraining-like pairs replayed (λP); "" = none
    mixture: list[float] | None = ranged(None, ge=0, le=1)   # λP, λD, λB; None: FoMo's 0.33/0.34/0.33, an absent source's share to D
    budget: str = "steps"                              # steps | samples | mafs (FoMo: full fine-tuning's MAFs of `steps`)
    steps: int = ranged(100, ge=1)                     # per chunk: steps (budget steps and mafs: full fine-tuning's)
    samples: int = ranged(0, ge=0)                     # per chunk, budget samples: steps = ceil(samples / batch size)
    layout: str = "auto"                               # the sources' layout (auto: by path; vlcp.data.formats.layouts)
    csv_img_key: str = "filepath"                      # CSV/TSV columns and separator (open_clip_train's options);
    csv_caption_key: str = "title"
    csv_separator: str = ""                            # "" = tab, or comma for *.csv
    image_root: str = ""                               # where a CSV's or captions JSON's relative image paths start ("" = its folder; not a folder's or shards')
    check_images: bool = True                          # decode every image once before training: unreadable ones skipped and counted
    follow_links: bool = False                         # read images that resolve outside their source (a symlink, a ../ path); else refused
    fraction: float = ranged(1.0, gt=0, le=1)         # share of each chunk's training pairs trained on (the first by key hash; auto's trial: a slice)
    export: str = ""                                   # write the final model here as an open_clip weights file ("" = not)
    prior_steps: list[int] = ranged(factory=list, ge=1)   # the earlier updates' steps per chunk: a meta-schedule (train.schedule) continues over them
    min_candidates: int = ranged(20, ge=0)             # a set is scored only over at least this many candidates (retrieval: also k <= a fifth of the pool); 0 = every set
    templates: str = "simple"                          # a class keep-set's prompts without its own templates.txt: simple (open_clip's 7) | openai (CLIP's 80)
    history: str = ""                                  # the history file whose chunks these are (a changed chunk's refusal names it)
    fingerprints: dict[str, Any] = field(default_factory=dict)   # {chunk: {"update": N, "fingerprint": ...}}: what each history chunk held when its update read it; a chunk that no longer does is refused

    def __post_init__(self):
        check_ranges(self)
        if len(self.csv_separator) > 1:
            raise ConfigError(f"csv_separator: one character (e.g. ',' or ';'; empty: tab, or a comma for *.csv), "
                              f"got {self.csv_separator!r}")
        if self.budget not in ("steps", "samples", "mafs"):
            raise ConfigError(f"budget: must be steps, samples or mafs, got {self.budget!r}")
        if self.templates not in ("simple", "openai"):
            raise ConfigError(f"templates: must be simple (open_clip's 7 ImageNet templates) or openai (CLIP's 80), "
                              f"got {self.templates!r}")
        if self.budget == "samples" and not self.samples:
            raise ConfigError("samples: budget 'samples' needs update.samples >= 1 (samples per chunk)")
        if self.mixture is not None:
            if len(self.mixture) != 3:
                raise ConfigError(f"mixture: expected [λP, λD, λB], got {self.mixture!r}")
            validate_mixture(*self.mixture, field="mixture")
            if self.mixture[0] and not self.pretraining:
                raise ConfigError(f"mixture: λP = {self.mixture[0]:g} replays pretraining data, but update.pretraining is empty")


@dataclass
class ExperimentCfg:
    name: str = "experiment"
    seed: int = ranged(0, ge=0, le=SEED_MAX)
    data: DataCfg = field(default_factory=DataCfg)
    model: ModelCfg = field(default_factory=ModelCfg)
    method: MethodCfg = field(default_factory=MethodCfg)
    train: TrainCfg = field(default_factory=TrainCfg)
    eval: EvalCfg = field(default_factory=EvalCfg)
    fomo: FomoCfg = field(default_factory=FomoCfg)
    update: UpdateCfg | None = None   # the user stream's (vlcp update); absent from the other streams' configs

    def __post_init__(self):
        check_ranges(self)
        if (self.data.stream == "user") != (self.update is not None):
            raise ConfigError("update: the user stream (data.stream: user) needs an update section, and only it has one")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["method"] = {"name": self.method.name, **self.method.args}
        if self.update is None:   # (so the studies' configs, and their hashes, are as before the user stream)
            del d["update"]
        return d


# --------------------------------------------------------------------------- building

_NUMBER = re.compile(r"[-+]?(\d(_?\d)*(\.(\d(_?\d)*)?)?|\.\d(_?\d)*)([eE][-+]?\d+)?")   # 1e-3, .5, 1_000, -1.5E+4
_NONFINITE = re.compile(r"[-+]?\.?(inf|infinity|nan)", re.IGNORECASE)                # .inf, -inf, .NaN


def _number(value: Any, tp: type, path: str) -> int | float:
    """`value` as a `tp` (int or float) number: a number literal in a string is read (YAML 1.1
    leaves `1e-3` a string), an integral float is an int; a bool is no number; NaN and ±inf
    are returned for the range check to reject."""
    raw = value
    if isinstance(value, str):
        text = value.strip()
        if _NONFINITE.fullmatch(text):
            value = float(text.replace(".", ""))          # "-.inf" -> -inf (rejected by the range check)
        elif _NUMBER.fullmatch(text):
            plain = text.replace("_", "")
            value = int(plain) if tp is int and not any(c in plain for c in ".eE") else float(plain)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{path}: expected {tp.__name__}, got {raw!r}")
    if tp is float:
        try:
            return float(value)
        except OverflowError:   # an int beyond float's range
            raise ConfigError(f"{path}: must be a finite number, got {raw!r}") from None
    if isinstance(value, float):
        if not (math.isfinite(value) and value.is_integer()):
            raise ConfigError(f"{path}: expected int, got {raw!r}")
        return int(value)
    return value


def _check_type(value: Any, tp: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        return _check_type(value, next(a for a in args if a is not type(None)), path)
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{path}: expected a list, got {value!r}")
        (item,) = typing.get_args(tp)
        return [_check_type(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict or tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        return build(tp, value, path)
    if tp in (int, float):
        return _number(value, tp, path)
    if not isinstance(value, tp):
        raise ConfigError(f"{path}: expected {tp.__name__}, got {value!r}")
    return value


def build(cls: type, data: dict | None, path: str = "") -> Any:
    """Build dataclass `cls` from a plain dict, checking names, types and ranges."""
    data = {} if data is None else data
    prefix = f"{path}." if path else ""
    if not isinstance(data, dict):
        raise ConfigError(f"{path or cls.__name__}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - fields, key=str)
    if unknown:
        raise ConfigError(f"{prefix}{unknown[0]}: unknown field (known: {', '.join(sorted(fields))})")
    kwargs = {k: _check_type(v, hints[k], f"{prefix}{k}") for k, v in data.items()}
    check_values(cls, kwargs, prefix)   # declared ranges, non-finite floats
    try:
        return cls(**kwargs)
    except ConfigError as e:
        raise ConfigError(f"{prefix}{e}") from None


def deep_merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in (over or {}).items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _section_type(key: list[str]) -> Any:
    """The config type at a dotted key of ExperimentCfg (None where the key leaves the schema)."""
    tp: Any = ExperimentCfg
    for part in key:
        if not dataclasses.is_dataclass(tp):
            return None
        hints = typing.get_type_hints(tp)
        if part not in hints:
            return None
        tp = hints[part]
    return tp


def parse_override(text: str) -> dict:
    """`train.lr=1e-3` -> {"train": {"lr": "1e-3"}} (value parsed as YAML; `build` reads the number)."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected key=value")
    key, raw = text.split("=", 1)
    parts = key.strip().split(".")
    if parts[0] == "profile":   # params.yaml's `profile:` picks the layer under the experiment: no config field
        raise ConfigError(f"--set {text!r}: the profile is no config field; pick it with --profile {raw.strip() or 'NAME'} "
                          "(vlcp config show / resolve), or with `profile:` in params.yaml (dvc exp run -S profile=NAME)")
    if not all(p.strip() for p in parts):
        raise ConfigError(f"--set {text!r}: empty part in the key {key.strip()!r} (expected e.g. train.lr=0.001)")
    try:
        value: Any = yaml.safe_load(raw)
    except yaml.YAMLError as e:
        raise ConfigError(f"--set {text!r}: the value is not valid YAML ({e.__class__.__name__})") from None
    section = _section_type(parts)
    if dataclasses.is_dataclass(section) and value is not None and not isinstance(value, dict):
        raise ConfigError(f"{'.'.join(parts)}: is a section, not a value (--set {text!r}); set one of its "
                          f"fields, e.g. --set {'.'.join(parts)}.FIELD=VALUE")
    for part in reversed(parts):
        value = {part: value}
    return value


SECTIONS = ("data", "model", "method", "train", "eval", "fomo")   # an experiment's sections (mappings)
ALIAS_SECTIONS = ("train", "data", "eval", "fomo", "method")       # what a model alias may carry (method: alias_method_defaults)


def _mapping(node: Any, key: str, source: str = "") -> dict:
    """`node` (None = empty) if it is a mapping, else a ConfigError naming `key` (and the file)."""
    if node is None:
        return {}
    if not isinstance(node, dict):
        kind = "a list" if isinstance(node, list) else repr(node)
        raise ConfigError(f"{key}: expected a mapping, got {kind}" + (f" (in {source})" if source else ""))
    return node


def _check_sections(layer: dict, key: str, source: str, sections=SECTIONS) -> None:
    for s in sections:
        if s in layer:
            _mapping(layer[s], f"{key}.{s}" if key else s, source)
    if isinstance(layer.get("data"), dict) and "split" in layer["data"]:
        _mapping(layer["data"]["split"], f"{key}.data.split" if key else "data.split", source)


def check_params(params: Any, source: str = "") -> dict:
    """The structure of params.yaml content: mappings where mappings belong (`defaults`, each
    profile, each experiment and their sections), or a one-line ConfigError naming the key."""
    where = f" (in {source})" if source else ""
    if not isinstance(params, dict):
        kind = "a list" if isinstance(params, list) else f"the scalar {params!r}"
        raise ConfigError(f"{source or 'params'}: the top level must be a mapping (profile, defaults, profiles, "
                          f"experiments), got {kind}")
    if not isinstance(params.get("profile", "tiny"), str):
        raise ConfigError(f"profile: expected a profile name, got {params['profile']!r}{where}")
    _check_sections(_mapping(params.get("defaults"), "defaults", source), "defaults", source)
    for name, profile in _mapping(params.get("profiles"), "profiles", source).items():
        profile = _mapping(profile, f"profiles.{name}", source)
        _check_sections(profile, f"profiles.{name}", source)
        for alias, target in _mapping(profile.get("model_aliases"), f"profiles.{name}.model_aliases", source).items():
            at = f"profiles.{name}.model_aliases.{alias}"
            if not isinstance(target, (str, dict)):
                raise ConfigError(f"{at}: expected a model name or a mapping, got {target!r}{where}")
            if isinstance(target, dict):
                if not isinstance(target.get("name"), str):
                    raise ConfigError(f"{at}.name: a model alias needs a model name, got {target.get('name')!r}{where}")
                _check_sections(target, at, source, ALIAS_SECTIONS)
    for name, exp in _mapping(params.get("experiments"), "experiments", source).items():
        _check_sections(_mapping(exp, f"experiments.{name}", source), f"experiments.{name}", source)
    return params


def load_params(path: str | Path = "params.yaml") -> dict:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: params file not found")
    try:
        params = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML ({e.__class__.__name__})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: unreadable ({e.__class__.__name__})") from None
    return check_params({} if params is None else params, str(path))


def _profile(params: dict) -> dict:
    profile = params.get("profile", "tiny")
    profiles = params.get("profiles") or {}
    if profile not in profiles:
        raise ConfigError(f"profile: unknown profile {profile!r}; known: {', '.join(profiles) or 'none'}")
    return profiles[profile] or {}


def with_profile(params: dict, profile: str | None) -> dict:
    """`params` with `profile` active instead of its own `profile:` (None: as they are): what
    `vlcp config show EXP --profile small` resolves, without editing params.yaml."""
    if profile is None:
        return params
    known = list(params.get("profiles") or {})
    if profile not in known:
        raise ConfigError(f"--profile {profile}: unknown profile; known: {', '.join(known) or 'none'}")
    return {**params, "profile": profile}


def resolve_data(params: dict, overrides: list[str] = ()) -> DataCfg:
    """The data config shared by all experiments (defaults < profile < `--set data.*` overrides):
    what `vlcp data prepare` prepares."""
    check_params(params)
    layers = []
    for text in overrides:
        layer = parse_override(text)
        other = [k for k in layer if k != "data"]
        if other:
            raise ConfigError(f"{text.split('=', 1)[0].strip()}: `vlcp data prepare` takes data.* keys only "
                              f"(--set {text!r})")
        layers.append(layer["data"])
    raw = deep_merge((params.get("defaults") or {}).get("data") or {}, _profile(params).get("data") or {})
    for layer in layers:
        raw = deep_merge(raw, layer)
    return build(DataCfg, raw, "data")


def resolve_experiment(params: dict, name: str, seed: int = 0, overrides: list[str] = ()) -> ExperimentCfg:
    """Resolve an experiment from params.yaml content (see module docstring)."""
    check_params(params)
    experiments = params.get("experiments") or {}
    if name not in experiments:
        raise ConfigError("experiment: " + unknown_name("experiment", name, experiments, "`vlcp list` lists them"))
    profile = dict(_profile(params))
    aliases = profile.pop("model_aliases", None) or {}
    base = deep_merge(params.get("defaults") or {}, profile)
    on_top = [experiments[name] or {}] + [parse_override(o) for o in overrides] + [{"name": name, "seed": seed}]

    def merged(*layers):
        raw = base
        for layer in layers:
            raw = deep_merge(raw, layer)
        return raw

    raw = merged(*on_top)
    model = dict(raw.get("model") or {})   # a copy: the params stay as they were
    if "arch_of" in model:   # the alias's architecture only: no weights file, no train settings
        arch = model.pop("arch_of")
        if not isinstance(arch, str) or arch not in aliases:
            raise ConfigError(f"model.arch_of: {arch!r} is no model alias of profile {params.get('profile')!r}; "
                              f"known: {', '.join(aliases) or 'none'}")
        alias = aliases[arch]
        raw["model"] = {**model, "name": alias["name"] if isinstance(alias, dict) else alias}
        return experiment_from_dict(raw)
    if isinstance(model.get("name"), str) and model["name"] in aliases:   # e.g. "resnet": the profile's modified-ResNet CLIP
        alias = aliases[model["name"]]   # a model name, or {name, pretrained[, train][, data][, eval][, fomo][, method]}
        alias = dict(alias) if isinstance(alias, dict) else {"name": alias}
        settings = {k: alias.pop(k) for k in ALIAS_SECTIONS if k in alias}
        method_defaults = settings.pop("method", None)
        if settings:   # the profile's training and data settings for this model, under the experiment's own
            raw = merged(settings, *on_top)
        method = raw.get("method") or {}
        if method_defaults and isinstance(method, dict):   # (a bad method section: experiment_from_dict says so)
            at = f"profiles.{params.get('profile', 'tiny')}.model_aliases.{model['name']}.method"
            raw["method"] = {**alias_method_defaults(method_defaults, method.get("name", "seqf"), at), **method}
        cli = {}   # `--set model.pretrained=...` wins over the alias's own weights (CLI > experiment > profile)
        for layer in on_top[1:-1]:
            cli = deep_merge(cli, layer.get("model") if isinstance(layer.get("model"), dict) else {})
        raw["model"] = {**model, **alias, **{k: v for k, v in cli.items() if k != "name"}}
    return experiment_from_dict(raw)


def alias_method_defaults(defaults: dict, method_name: Any, at: str) -> dict:
    """The entries of a model alias's `method:` section (`at` names it in errors) that are Config
    fields of the method `method_name`: the profile's scale for the methods that have the setting
    (buffer_size for the memory-buffer methods, queue_size for CTP's), nothing for the others. A
    key no registered method has, or `name`, is an error."""
    if "name" in defaults:
        raise ConfigError(f"{at}.name: an alias's method settings cannot pick the method (set method.name "
                          "in the experiment)")
    known = {f.name for m in registry.method_names() for f in dataclasses.fields(registry.load_method(m).Config)}
    unknown = sorted(set(defaults) - known, key=str)
    if unknown:
        raise ConfigError(f"{at}.{unknown[0]}: no method has this field")
    if not isinstance(method_name, str):
        return {}   # experiment_from_dict names the bad method.name
    fields = {f.name for f in dataclasses.fields(registry.load_method(method_name).Config)}
    return {k: v for k, v in defaults.items() if k in fields}


def resolved_experiments(params: dict) -> dict[str, dict]:
    """Every experiment of `params` resolved on its active profile, as plain dicts without the seed
    (`vlcp config resolve` writes them one file each: what a run stage of dvc.yaml depends on, so
    that DVC checks one small file per run instead of re-parsing params.yaml for each stage)."""
    out = {}
    for name in params.get("experiments") or {}:
        d = resolve_experiment(params, name).to_dict()
        d.pop("seed")
        out[name] = d
    return out


def weights_readers(params: dict, path: str | Path) -> list[str]:
    """The experiments of `params` that load the weights file `path` on the active profile (their
    resolved `model.pretrained`). None: a pretraining stage writing `path` (`vlcp pretrain
    --skip-unread`) would train for no run of this profile (the `paper` profile's runs start
    from the papers' weights, not from the emoji bases)."""
    target = Path(path)
    return [name for name in params.get("experiments") or {}
            if (p := resolve_experiment(params, name).model.pretrained) and Path(p) == target]


def experiment_from_dict(raw: dict) -> ExperimentCfg:
    raw = dict(_mapping(raw, "experiment"))
    method = dict(_mapping(raw.pop("method", None), "method"))
    cfg = build(ExperimentCfg, raw)
    name = method.pop("name", "seqf")
    if not isinstance(name, str):
        raise ConfigError(f"method.name: expected str, got {name!r}")
    method_cls = registry.load_method(name)   # validates the name (the method's own fields: below)
    args = dataclasses.asdict(build(method_cls.Config, method, "method"))
    cfg.method = MethodCfg(name=name, args=args)
    return cfg
