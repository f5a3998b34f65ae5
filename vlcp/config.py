"""Typed, validated experiment configs.

An experiment is resolved from `params.yaml` as `defaults` < `profiles[profile]` <
`experiments[name]` < CLI `--set key=value` overrides. A profile's `model_aliases` map a model
name an experiment uses (e.g. `resnet`) to that profile's model (a tiny config on CPU, RN50 at
paper scale), so one experiment definition serves every profile; an alias may also carry `train:`
`data:` (and `eval:`, `fomo:`) settings for that model in that profile (they sit under the
experiment's own settings and `--set`): the `paper` profile's CTP model brings P9D with it, its
CLL-CLIP model CLFM's MSCOCO36 corpus, its FoMo-in-Flux model FoMo's datasets, its IncCLIP model
CC2M and the downstream suite.
`model: {arch_of: fomo, pretrained: null}` names only an alias's architecture (what a pretraining
stage trains from random init for the alias's `pretrained` file). Every field is typed; an unknown field,
a wrong type or an out-of-range value raises `ConfigError` naming the field (`train.lr: ...`).
Method-specific fields live under `method:` and are validated by the method's own `Config`.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from vlcp.errors import ConfigError

BENCHMARKS = ("emoji", "p9d", "mscoco36", "fomo", "cc")   # all but emoji: vlcp.data.real (the real datasets the runners stream)
REAL_STREAM = {"p9d": ("group",), "mscoco36": ("language",), "fomo": ("concepts",),
               "cc": ("class", "instance")}   # the streams each real dataset runs
STYLES = ("twemoji", "openmoji", "noto-mono", "noto-color")
OPTIMIZERS = ("adamw", "lamb")   # train.optimizer (vlcp.train.optim.make_optimizer)
TRANSFORMS = ("shift", "ctp", "fomo")   # data.transform: the Materializer's shift + vlcp.data.augment.TRANSFORMS
STREAMS = ("group", "class", "instance", "language", "concepts")


@dataclass
class SplitCfg:
    """Per-subgroup fractions of items; the rest is train. Gallery = the train items."""
    test: float = 0.15
    val: float = 0.10
    query: float = 0.10

    def __post_init__(self):
        for f in ("test", "val", "query"):
            if not 0 <= getattr(self, f) < 1:
                raise ConfigError(f"{f}: must be in [0, 1), got {getattr(self, f)}")
        if self.test + self.val + self.query >= 0.9:
            raise ConfigError("test + val + query: must leave at least 10% for train")


@dataclass
class DataCfg:
    benchmark: str = "emoji"
    root: str = "data/emoji"
    styles: list[str] = field(default_factory=lambda: ["twemoji", "noto-mono", "openmoji"])
    train_styles: list[str] = field(default_factory=lambda: ["twemoji", "noto-mono"])
    unseen_styles: list[str] = field(default_factory=lambda: ["openmoji"])
    image_size: int = 32
    max_version: float = 15.1
    seed: int = 0
    split: SplitCfg = field(default_factory=SplitCfg)
    tasks: list[str] = field(default_factory=list)  # groups to use; empty = all, in Unicode order
    stream: str = "group"            # group: one task per group | class: class chunks | instance: random chunks | language: one task per language (CLL-CLIP) | concepts: FoMo-in-Flux concept stream (see `fomo`)
    num_tasks: int = 0               # class/instance streams: number of chunks (>= 2)
    class_chunks: str = "items"      # class stream: chunks about equal in items, or in classes (IncCLIP: 4 x 250 ImageNet classes)
    reverse: bool = False            # reverse the task order
    languages: list[str] = field(default_factory=list)  # language stream: CLDR codes in order; empty = en + the 35 others, seeded
    num_languages: int = 0           # language stream: keep the first N of the order (0 = all); ignored by other streams
    captions_per_item: int = 8
    workers: int = 4                 # real datasets: threads decoding each batch's images (the emoji benchmark is in memory)
    ood_root: str = ""               # mscoco36: the XM3600 directory, the out-of-domain test set ("" = none)
    transform: str = "shift"         # training augmentation (train.augment on): shift (±2 px) | ctp | fomo (vlcp.data.augment)
    max_pairs: int = 0               # cc: the first N pairs of the shards (0 = all)
    labels: str = ""                 # cc, class stream: pseudo labels {"<sample key>": ImageNet class id} (data/README.md)

    def __post_init__(self):
        if self.benchmark not in BENCHMARKS:
            raise ConfigError(f"benchmark: unknown benchmark {self.benchmark!r}; known: {', '.join(BENCHMARKS)}")
        if self.benchmark != "emoji":
            if self.unseen_styles:
                raise ConfigError(f"unseen_styles: the {self.benchmark} benchmark has one image per item, no style "
                                  "to hold out; set data.unseen_styles: []")
            if self.stream not in REAL_STREAM[self.benchmark]:
                raise ConfigError(f"stream: the {self.benchmark} benchmark runs the "
                                  f"{' or '.join(REAL_STREAM[self.benchmark])} stream only, not {self.stream!r}")
        elif self.ood_root:
            raise ConfigError("ood_root: only the mscoco36 benchmark has an out-of-domain directory (XM3600); "
                              "the emoji benchmark holds out data.unseen_styles")
        if self.workers < 1:
            raise ConfigError(f"workers: must be >= 1, got {self.workers}")
        if self.max_pairs < 0:
            raise ConfigError(f"max_pairs: must be >= 0 (0 = all), got {self.max_pairs}")
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
        missing = [s for s in self.train_styles + self.unseen_styles if s not in self.styles]
        if missing:
            raise ConfigError(f"train_styles/unseen_styles: style {missing[0]!r} is not in styles")
        if self.image_size < 8:
            raise ConfigError(f"image_size: must be >= 8, got {self.image_size}")
        if self.stream not in STREAMS:
            raise ConfigError(f"stream: unknown stream {self.stream!r}; known: {', '.join(STREAMS)}")
        if self.stream in ("class", "instance") and self.num_tasks < 2:
            raise ConfigError(f"num_tasks: the {self.stream} stream needs num_tasks >= 2, got {self.num_tasks}")
        if self.languages and self.stream != "language":
            raise ConfigError("languages: only the language stream has languages (set data.stream: language)")
        if self.stream == "group" and self.num_tasks:
            raise ConfigError("num_tasks: the group stream has one task per group; use data.tasks to pick groups")
        if self.num_languages < 0 or self.num_languages == 1:
            raise ConfigError(f"num_languages: must be 0 (all) or >= 2, got {self.num_languages}")
        if self.captions_per_item < 1:
            raise ConfigError(f"captions_per_item: must be >= 1, got {self.captions_per_item}")


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
    steps: int = 600                 # total steps over the stream, split across tasks
    steps_split: str = "size"        # "size" (∝ task's train pairs) or "equal"
    batch_size: int = 128
    lr: float = 1e-3
    min_lr_ratio: float = 0.01
    warmup_steps: int = 10           # per task
    warmup_frac: float = 0.0         # > 0: warmup = ceil(frac × the task's steps), overriding warmup_steps (FoMo: 0.1)
    cooldown_frac: float = 0.1       # rsqrt schedules: linear cooldown over the last frac of each task
    schedule: str = "cosine"         # per task: cosine | rsqrt; meta (FoMo-in-Flux): autoregressive-cosine | continued-cosine | autoregressive-rsqrt | continued-rsqrt | peaks-match-rsqrt
    weight_decay: float = 0.1
    beta2: float = 0.98
    optimizer: str = "adamw"         # adamw | lamb (timm's LAMB: IncCLIP's); methods with their own optimizer (CLL-CLIP's TEIR, GaLore) need adamw
    grad_clip: float = 1.0
    num_threads: int = 2
    device: str = "auto"             # auto | cpu | cuda
    precision: str = "fp32"          # fp32 | bf16 (autocast on GPU)
    augment: bool = True
    progress: bool = True
    checkpoint_every: int = 1        # tasks between the per-task checkpoints (runner.checkpoint_due); the last
    #   task's and a stop's (stop_after_task) are always written. A tiny model's task takes about a second and
    #   a checkpoint 35-75 ms, so the small streams (CLL-CLIP's 36 tasks) write fewer
    compile: str = ""                # "" = off; else a torch.compile backend for the model's forward (nn.Module.compile):
    #   inductor on GPUs; aot_eager / eager trace it without code generation (how the tests check it)
    flops_every: int = 1             # tasks between FLOP counts (runner.counted_task: every k-th and the last); the
    #   others record None and report.results.flops_per_step averages the counted tasks. Counting a step takes
    #   ~1.6 of its time and a pass ~1.6 of the pass's, so the small streams (CLL-CLIP's 36 tasks) sample
    pass_flops_seeds: list[int] | None = None   # seeds whose runs count the method's per-task passes' FLOPs
    #   (runner.task_pass_flops: re-runs each pass on copies, ~1.6x the pass's time); None = every seed.
    #   The counts depend on shapes, not the seed (<0.1% apart), so one seed can stand for the others:
    #   report.results.fill_pass_flops

    def __post_init__(self):
        if self.steps < 1:
            raise ConfigError(f"steps: must be >= 1, got {self.steps}")
        if self.steps_split not in ("size", "equal"):
            raise ConfigError(f"steps_split: must be 'size' or 'equal', got {self.steps_split!r}")
        if self.batch_size < 2:
            raise ConfigError(f"batch_size: must be >= 2 (contrastive), got {self.batch_size}")
        if not self.lr > 0:
            raise ConfigError(f"lr: must be > 0, got {self.lr}")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ConfigError(f"min_lr_ratio: must be in [0, 1], got {self.min_lr_ratio}")
        for f in ("checkpoint_every", "flops_every"):
            if getattr(self, f) < 1:
                raise ConfigError(f"{f}: must be >= 1 (tasks), got {getattr(self, f)}")
        for f in ("warmup_steps", "weight_decay", "grad_clip"):
            if getattr(self, f) < 0:
                raise ConfigError(f"{f}: must be >= 0, got {getattr(self, f)}")
        for f in ("warmup_frac", "cooldown_frac"):
            if not 0 <= getattr(self, f) < 1:
                raise ConfigError(f"{f}: must be in [0, 1), got {getattr(self, f)}")
        from vlcp.train.schedules import SCHEDULES
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"schedule: unknown schedule {self.schedule!r}; known: {', '.join(SCHEDULES)}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ConfigError(f"device: must be auto, cpu or cuda, got {self.device!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"optimizer: must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        if self.precision not in ("fp32", "bf16"):
            raise ConfigError(f"precision: must be fp32 or bf16, got {self.precision!r}")
        if self.compile:
            import torch._dynamo
            backends = torch._dynamo.list_backends(exclude_tags=())
            if self.compile not in backends:
                raise ConfigError(f"compile: unknown torch.compile backend {self.compile!r}; known: {', '.join(backends)}")


ORDERINGS = ("random", "easy-to-hard", "frequency", "similarity", "time", "dataset")
POOL_GROUPS = ["Smileys & Emotion", "People & Body", "Animals & Nature", "Food & Drink", "Flags"]


@dataclass
class FomoCfg:
    """FoMo-in-Flux's concept stream (data.stream: concepts; `vlcp.data.fomo`, `vlcp.runner_fomo`)."""
    pool_groups: list[str] = field(default_factory=lambda: list(POOL_GROUPS))  # pretraining pool P; the other groups adapt
    num_tasks: int = 20              # tasks cut by concept count (ordering "dataset": 0 = one task per dataset)
    ordering: str = "random"         # random | easy-to-hard | frequency | similarity | time | dataset
    reverse: bool = False
    stream_file: str | None = None   # a `DATASET+++class` JSON stream to use instead of `ordering`
    mixture: list[float] = field(default_factory=lambda: [0.33, 0.34, 0.33])   # λP, λD, λB
    steps_per_task: int = 30         # full fine-tuning's steps per task; other methods get the same MAFs
    compute_scale: float = 1.0       # × steps_per_task (compute scaling; joint = T × with num_tasks 1; a longer stream at equal compute)
    budget: str = "mafs"             # mafs: steps × (full FT's MAFs / the method's) | steps: equal steps
    temperature: float | None = None  # set τ (logit scale = 1/τ) before the first task; None keeps θ0's
    shapes_per_class: int = 6        # training images per colour-shape class
    pool: str = "full"               # the replayed pool P: full | one-style | half | noisy (see vlcp.data.fomo.with_pool)
    # data.benchmark: fomo (FoMo-in-Flux's info dicts under data.root; vlcp.data.real.fomo_data)
    datasets: list[str] = field(default_factory=list)    # adaptation datasets (A_KA): streamed concept by concept
    retention: list[str] = field(default_factory=list)   # eval-only classification datasets (A_ZS)
    retrieval: list[str] = field(default_factory=list)   # eval-only retrieval datasets (A_ZS; R@5 over every caption)
    adaptation_retrieval: list[str] = field(default_factory=lambda: ["fscoco"])   # of `datasets`, those scored by R@5 in A_KA, not zero-shot accuracy (FoMo's type: retrieval)
    pool_root: str = ""              # webdataset shards of the pool P that λP replays
    pool_size: int = 10000           # pool pairs read (captions in memory; images read from the shards per batch)

    def __post_init__(self):
        from vlcp.data.mixtures import validate_mixture
        if self.ordering not in ORDERINGS:
            raise ConfigError(f"ordering: unknown ordering {self.ordering!r}; known: {', '.join(ORDERINGS)}")
        if self.num_tasks < 0 or (self.num_tasks == 0 and self.ordering != "dataset"):
            raise ConfigError(f"num_tasks: must be >= 1 (0 only with ordering 'dataset'), got {self.num_tasks}")
        if len(self.mixture) != 3:
            raise ConfigError(f"mixture: expected [λP, λD, λB], got {self.mixture!r}")
        validate_mixture(*self.mixture, field="mixture")
        if self.steps_per_task < 1:
            raise ConfigError(f"steps_per_task: must be >= 1, got {self.steps_per_task}")
        if not self.compute_scale > 0:
            raise ConfigError(f"compute_scale: must be > 0, got {self.compute_scale}")
        if self.budget not in ("mafs", "steps"):
            raise ConfigError(f"budget: must be 'mafs' or 'steps', got {self.budget!r}")
        if self.temperature is not None and not 0 < self.temperature <= 1:
            raise ConfigError(f"temperature: must be in (0, 1], got {self.temperature}")
        if self.pool not in ("full", "one-style", "half", "noisy"):
            raise ConfigError(f"pool: unknown pool {self.pool!r}; known: full, one-style, half, noisy")
        if self.shapes_per_class < 2:
            raise ConfigError(f"shapes_per_class: must be >= 2, got {self.shapes_per_class}")
        if self.pool_size < 1:
            raise ConfigError(f"pool_size: must be >= 1, got {self.pool_size}")


@dataclass
class EvalCfg:
    batch_size: int = 512
    ks: list[int] = field(default_factory=lambda: [1, 5, 10])
    zeroshot_templates: list[str] = field(default_factory=lambda: [
        "an emoji of {}.", "a {} emoji.", "an icon of {}.", "{}"])
    heldout: bool = False            # after each task, also the held-out suite (Evaluator.heldout; cc: the downstream sets)
    downstream_root: str = ""        # cc: a folder of FoMo-in-Flux-format datasets (data/README.md, "fomo/") for ...
    downstream: list[str] = field(default_factory=list)   # ... zero-shot classification on their test splits ...
    downstream_retrieval: list[str] = field(default_factory=list)   # ... and retrieval (every caption of an image a match)
    convergence: bool = False        # language stream: final training loss and empirical Fisher trace (CLL-CLIP Fig. 3)


@dataclass
class ExperimentCfg:
    name: str = "experiment"
    seed: int = 0
    data: DataCfg = field(default_factory=DataCfg)
    model: ModelCfg = field(default_factory=ModelCfg)
    method: MethodCfg = field(default_factory=MethodCfg)
    train: TrainCfg = field(default_factory=TrainCfg)
    eval: EvalCfg = field(default_factory=EvalCfg)
    fomo: FomoCfg = field(default_factory=FomoCfg)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["method"] = {"name": self.method.name, **self.method.args}
        return d


# --------------------------------------------------------------------------- building

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
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, tp) or (tp in (int, float) and isinstance(value, bool)):
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
    unknown = sorted(set(data) - fields)
    if unknown:
        raise ConfigError(f"{prefix}{unknown[0]}: unknown field (known: {', '.join(sorted(fields))})")
    kwargs = {k: _check_type(v, hints[k], f"{prefix}{k}") for k, v in data.items()}
    try:
        return cls(**kwargs)
    except ConfigError as e:
        raise ConfigError(f"{prefix}{e}") from None


def deep_merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in (over or {}).items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def parse_override(text: str) -> dict:
    """`train.lr=1e-3` -> {"train": {"lr": 0.001}} (value parsed as YAML)."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected key=value")
    key, raw = text.split("=", 1)
    value: Any = yaml.safe_load(raw)
    for part in reversed(key.strip().split(".")):
        value = {part: value}
    return value


def load_params(path: str | Path = "params.yaml") -> dict:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: params file not found")
    try:
        params = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML ({e.__class__.__name__})") from None
    return params


def _profile(params: dict) -> dict:
    profile = params.get("profile", "tiny")
    profiles = params.get("profiles") or {}
    if profile not in profiles:
        raise ConfigError(f"profile: unknown profile {profile!r}; known: {', '.join(profiles) or 'none'}")
    return profiles[profile] or {}


def resolve_data(params: dict) -> DataCfg:
    """The data config shared by all experiments (defaults < profile)."""
    raw = deep_merge((params.get("defaults") or {}).get("data") or {}, _profile(params).get("data") or {})
    return build(DataCfg, raw, "data")


def resolve_experiment(params: dict, name: str, seed: int = 0, overrides: list[str] = ()) -> ExperimentCfg:
    """Resolve an experiment from params.yaml content (see module docstring)."""
    experiments = params.get("experiments") or {}
    if name not in experiments:
        raise ConfigError(f"experiment: unknown experiment {name!r}; known: {', '.join(experiments) or 'none'}")
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
    model = raw.get("model") or {}
    if "arch_of" in model:   # the alias's architecture only: no weights file, no train settings
        arch = model.pop("arch_of")
        if arch not in aliases:
            raise ConfigError(f"model.arch_of: {arch!r} is no model alias of profile {params.get('profile')!r}; "
                              f"known: {', '.join(aliases) or 'none'}")
        alias = aliases[arch]
        raw["model"] = {**model, "name": alias["name"] if isinstance(alias, dict) else alias}
        return experiment_from_dict(raw)
    if model.get("name") in aliases:   # e.g. "resnet": the profile's modified-ResNet CLIP
        alias = aliases[model["name"]]   # a model name, or {name, pretrained[, train][, data][, eval][, fomo]}
        alias = dict(alias) if isinstance(alias, dict) else {"name": alias}
        settings = {k: alias.pop(k) for k in ("train", "data", "eval", "fomo") if k in alias}
        if settings:   # the profile's training and data settings for this model, under the experiment's own
            raw = merged(settings, *on_top)
        raw["model"] = {**model, **alias}
    return experiment_from_dict(raw)


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


def experiment_from_dict(raw: dict) -> ExperimentCfg:
    raw = dict(raw)
    method = dict(raw.pop("method", None) or {})
    cfg = build(ExperimentCfg, raw)
    name = method.pop("name", "seqf")
    if not isinstance(name, str):
        raise ConfigError(f"method.name: expected str, got {name!r}")
    from vlcp.methods import get_method  # validates the name and the method's own fields

    method_cls = get_method(name)
    args = dataclasses.asdict(build(method_cls.Config, method, "method"))
    cfg.method = MethodCfg(name=name, args=args)
    return cfg
