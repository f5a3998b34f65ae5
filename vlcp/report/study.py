"""A study as data: its registry entry (`studies/<name>/study.yaml`), its ledger as rows
(`claims.yaml`, judged by `vlcp.report.ledger.evaluate`) and its runs in one shape, `Runs`."""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping

from vlcp.errors import VlcpError
from vlcp.report.paper import read_yaml, reference_value, studies, studies_root
from vlcp.report.results import load_subset
from vlcp.utils import config_hash, read_results

Runs = dict[str, dict[int, dict]]   # {experiment: {seed: results}}
Measure = Callable[[dict], float]   # one run's results -> the number a claim compares


@dataclass(frozen=True)
class ComparisonSpec:
    """a − b on the claim's measure (`b` None: against 0); `effect`: the paper's, in its units.
    `measure`, `scale`, `floor`: this comparison's own ("": the row's)."""
    a: str
    b: str | None
    effect: float
    label: str
    measure: str = ""
    scale: str = ""
    floor: str = ""


@dataclass(frozen=True)
class ScaleSpec:
    """Our headroom H: `upper` − `lower` (None: 0) on `measure`, or `calibrated` (fixed on calibration
    seeds); `paper_headroom`: the same in the paper's units; `floor`: the noise below 2 seeds."""
    upper: str
    lower: str | None
    measure: str
    paper_headroom: float = 1.0
    calibrated: float | None = None
    floor: str = ""


@dataclass(frozen=True)
class ClaimSpec:
    """One row of a claims file; `kind`: a `vlcp.report.ledger.KINDS` or the study module's own;
    `options`: a custom kind's own fields."""
    id: str
    claim: str
    kind: str
    source: str = ""
    paper: str = ""
    measure: str = ""
    scale: str = ""
    comparisons: tuple[ComparisonSpec, ...] = ()
    why: str = ""                    # a claim that is not testable here: why
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Claims:
    """A claims file: `depth` (seeds per arm below which a comparison is exploratory) and the
    `calibration` its fixed headrooms were measured on (`calibrated_on`, `when`, `base_runs`)."""
    depth: int
    scales: Mapping[str, ScaleSpec]
    rows: tuple[ClaimSpec, ...]
    calibration: Mapping[str, Any] = field(default_factory=dict)


def _text(where: str, entry: Mapping, key: str, default: str | None = None) -> str:
    """entry[key], which must be text (or absent, with a `default`)."""
    if key not in entry and default is None:
        raise VlcpError(f"{where}: `{key}` is missing")
    v = entry.get(key, default)
    if not isinstance(v, str):
        raise VlcpError(f"{where}: `{key}` must be text, got {v!r}")
    return v


def paper_number(where: str, value: Any, root=None) -> float:
    """A number, a table reference (`{table, row, column}`; `columns`: their mean) or `{a, b}`: a − b."""
    if isinstance(value, Mapping) and set(value) == {"a", "b"}:
        return paper_number(f"{where}.a", value["a"], root) - paper_number(f"{where}.b", value["b"], root)
    if isinstance(value, Mapping) and "table" in value:
        label, _, field_ = where.partition(": ")
        value = reference_value(label, field_ or where, dict(value), root)
        if isinstance(value, tuple) and value and all(map(_is_number, value)):
            value = sum(value) / len(value)
    if not _is_number(value):
        raise VlcpError(f"{where}: expected a number, a table reference {{table, row, column}} or {{a, b}}, "
                        f"got {value!r}")
    return float(value)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _comparison(where: str, c: Any) -> ComparisonSpec:
    if not isinstance(c, Mapping):
        raise VlcpError(f"{where}: expected {{a, b, effect}}, got {c!r}")
    a = _text(where, c, "a")
    b = c.get("b")
    if b is not None and not isinstance(b, str):
        raise VlcpError(f"{where}: `b` must be an experiment (or absent: against 0), got {b!r}")
    if "effect" not in c:
        raise VlcpError(f"{where}: `effect` is missing")
    own = {k: _text(where, c, k, "") for k in ("measure", "scale", "floor")}
    label = str(c.get("label") or (f"{a} − {b}" if b else a))
    return ComparisonSpec(a, b, paper_number(f"{where}: effect", c["effect"]), label, **own)


def _scale(where: str, s: Any) -> ScaleSpec:
    if not isinstance(s, Mapping):
        raise VlcpError(f"{where}: expected {{upper, lower, measure, ...}}, got {s!r}")
    unknown = set(s) - {"upper", "lower", "measure", "paper_headroom", "calibrated", "floor"}
    if unknown:
        raise VlcpError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    ph = paper_number(f"{where}: paper_headroom", s.get("paper_headroom", 1.0))
    if not ph > 0:
        raise VlcpError(f"{where}: `paper_headroom` must be > 0, got {ph}")
    cal = s.get("calibrated")
    return ScaleSpec(_text(where, s, "upper"), s.get("lower"), _text(where, s, "measure"), ph,
                     None if cal is None else float(cal), str(s.get("floor", "")))


def parse_claims(data: Any, label: str) -> Claims:
    """A claims file's YAML as `Claims`; malformed: one line naming `label`, row and field."""
    if not isinstance(data, Mapping) or not isinstance(data.get("claims"), list):
        raise VlcpError(f"{label}: expected a mapping with a `claims:` list")
    scales = {name: _scale(f"{label}: scales.{name}", s) for name, s in (data.get("scales") or {}).items()}
    rows, seen, fields = [], set(), ClaimSpec.__dataclass_fields__
    for i, r in enumerate(data["claims"]):
        where = f"{label}: claims[{i}]"
        if not isinstance(r, Mapping):
            raise VlcpError(f"{where}: expected a mapping, got {r!r}")
        cid = _text(where, r, "id")
        where = f"{label}: claim {cid}"
        if cid in seen:
            raise VlcpError(f"{where}: the id is used twice")
        seen.add(cid)
        comps = tuple(_comparison(f"{where}: comparisons[{j}]", c) for j, c in enumerate(r.get("comparisons") or []))
        scale = r.get("scale", "")
        for name in (scale, *(c.scale for c in comps)):
            if name and name not in scales:
                raise VlcpError(f"{where}: scale {name!r} is not among `scales:` ({', '.join(scales) or 'none'})")
        rows.append(ClaimSpec(cid, _text(where, r, "claim"), _text(where, r, "kind"), str(r.get("source", "")),
                              str(r.get("paper", "")), str(r.get("measure", "")), scale, comps, str(r.get("why", "")),
                              MappingProxyType({k: v for k, v in r.items() if k not in fields or k == "options"})))
    depth = data.get("depth", 2)
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
        raise VlcpError(f"{label}: `depth` must be an integer ≥ 1, got {depth!r}")
    return Claims(depth, MappingProxyType(scales), tuple(rows), MappingProxyType(dict(data.get("calibration") or {})))


@dataclass(frozen=True)
class Study:
    """A registered study. `module`: its own `MEASURES` and `KINDS`, imported on use; `params`: its
    block under params.yaml's `report:`."""
    name: str
    title: str
    notebook: str
    params: str
    module: str = ""
    claims: Claims | None = None
    lists: tuple[str, ...] = ()      # params keys of the experiment lists it runs (`vlcp list`, dvc.yaml's --list)
    runs: str = "runs"               # its runs' folder where its params block names none
    order: int = 100                 # where listings put it (then by name)

    @property
    def claims_file(self) -> str:
        return f"{self.notebook}_claims.json"

    def block(self, params: Mapping) -> Mapping:
        return (params.get("report") or {}).get(self.params) or {}

    def runs_folder(self, params: Mapping) -> str:
        return str(self.block(params).get("runs", self.runs))

    def metric_sources(self, params: Mapping) -> dict:
        """What `vlcp report metrics` reads: {"runs", "claims" (None: the study has no claims file),
        "experiments" (None: every run), "seeds" (None: every seed)}; its module's
        `metric_sources(block, params)` may set the last two."""
        block, own = self.block(params), self.own("metric_sources")
        ledger = f"reports/{self.claims_file}" if self.claims is not None else None
        out = {"runs": self.runs_folder(params), "claims": ledger,
               "experiments": block.get("experiments"), "seeds": block.get("seeds", params.get("seeds"))}
        return out | (own(block, params) if callable(own) else {})

    def own(self, attr: str):
        """The study module's `attr` ({} without one)."""
        return getattr(importlib.import_module(self.module), attr, {}) if self.module else {}


def registered(root: str | Path | None = None) -> tuple[str, ...]:
    """The studies with a `study.yaml`, in their `order`, then by name."""
    names = [s for s in studies(root) if (studies_root(root) / s / "study.yaml").is_file()]
    return tuple(sorted(names, key=lambda s: (load_study(s, root).order, s)))


def load_study(name: str, root: str | Path | None = None) -> Study:
    folder = studies_root(root) / name
    label = f"vlcp/report/studies/{name}/study.yaml" if root is None else str(folder / "study.yaml")
    if not (folder / "study.yaml").is_file():
        raise VlcpError(f"{label}: no such study (registered: {', '.join(registered(root)) or 'none'})")
    data = read_yaml(folder / "study.yaml", label)
    if not isinstance(data, Mapping):
        raise VlcpError(f"{label}: expected a mapping")
    unknown = set(data) - {"title", "notebook", "params", "module", "lists", "runs", "order"}
    if unknown:
        raise VlcpError(f"{label}: unknown field(s) {', '.join(sorted(unknown))}")
    clabel = label.replace("study.yaml", "claims.yaml")
    claims = (parse_claims(read_yaml(folder / "claims.yaml", clabel), clabel)
              if (folder / "claims.yaml").is_file() else None)
    lists = data.get("lists") or []
    if not isinstance(lists, list) or not all(isinstance(k, str) for k in lists):
        raise VlcpError(f"{label}: `lists` must list params keys (report.<study>.experiments, ...), got {lists!r}")
    return Study(name, _text(label, data, "title"), _text(label, data, "notebook"),
                 str(data.get("params", name)), str(data.get("module", "")), claims, tuple(lists),
                 str(data.get("runs", "runs")), int(data.get("order", 100)))


def load_runs(runs_dir: str | Path | list[str | Path], experiments, seeds) -> Runs:
    """The runs found under `runs_dir` (or several folders); an experiment with none is absent."""
    return load_subset(runs_dir, experiments, seeds)[0]


def values(runs: Runs, experiment: str, measure: Measure) -> dict[int, float]:
    """{seed: measure(results)} of one experiment ({} when it did not run)."""
    return {s: float(measure(r)) for s, r in sorted((runs.get(experiment) or {}).items())}


def as_lists(runs: Runs) -> dict[str, list[dict]]:
    """{experiment: [results by seed]}: the shape some table functions take."""
    return {e: [by_seed[s] for s in sorted(by_seed)] for e, by_seed in runs.items()}


# A run's settings that change how it executes, not what it measures: not in its fingerprint.
EXECUTION_FIELDS = {
    "": ("seed",),
    "data": ("root", "workers", "max_bad_images", "ood_root"),
    "train": ("num_threads", "device", "progress", "checkpoint_every", "keep_task_checkpoints", "compile",
              "accum_freq", "grad_checkpointing", "ddp_timeout_minutes", "flops_every", "pass_flops_seeds"),
    "eval": ("batch_size", "downstream_root"),
    "fomo": ("pool_root",),
}


def calibration_fingerprint(config: dict) -> str:
    """12 hex digits of a run's `config` without its seed and `EXECUTION_FIELDS`, as `calibrated_on` records."""
    kept = {k: ({f: x for f, x in v.items() if f not in EXECUTION_FIELDS.get(k, ())} if isinstance(v, dict) else v)
            for k, v in config.items() if k not in EXECUTION_FIELDS[""]}
    return config_hash(kept)[:12]


def pretraining_runs(power_cfg: dict, where: str) -> dict[str, list[dict]]:
    """{experiment: [results]} of the θ0 pretraining runs of `calibrated_on` under `base_runs`
    ({} without it): a θ0's config is in its pretraining run, not in the runs starting from it."""
    folder = power_cfg.get("base_runs")
    if folder is None:
        return {}
    if not isinstance(folder, str):
        raise VlcpError(f"{where}.base_runs: expected a folder (e.g. runs-ctp-base), got {folder!r}")
    out = {e: [read_results(f) for f in sorted((Path(folder) / e).glob("seed*/results.json"))]
           for e in power_cfg.get("calibrated_on") or {}}
    return {e: rs for e, rs in out.items() if rs}


def calibration_mismatch(power_cfg: dict, runs: dict[str, list[dict]], where: str) -> str | None:
    """Why a calibrated headroom does not apply to `runs` ({experiment: [results]}): one of them (or its θ0,
    `pretraining_runs`) has another fingerprint than `calibrated_on` records; else None."""
    on = power_cfg.get("calibrated_on")
    if on is None:
        return None
    if not (isinstance(on, dict) and on and all(isinstance(v, str) for v in on.values())):
        raise VlcpError(f"{where}.calibrated_on: expected {{experiment: '<12 hex digits>'}}, got {on!r}")
    runs = pretraining_runs(power_cfg, where) | {e: rs for e, rs in runs.items() if rs}
    for e, calibrated in on.items():
        here = sorted({calibration_fingerprint(r["config"]) for r in runs.get(e) or [] if r.get("config")})
        if here and here != [calibrated]:
            return (f"{where} was calibrated on another configuration of {e} than its runs here (fingerprint "
                    f"{calibrated}, here {', '.join(here)}: another benchmark, profile, step count, split or θ0)")
    return None


def stale_calibration(study: Study, runs: Runs) -> str | None:
    """`calibration_mismatch` of the study's claims file for `runs`."""
    where = f"vlcp/report/studies/{study.name}/claims.yaml"
    return calibration_mismatch(study.claims.calibration, as_lists(runs), where)
