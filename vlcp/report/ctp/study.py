"""CTP's study: its definitions (experiments, labels, the paper's anchors) and per-run quantities."""
from __future__ import annotations

import copy
import math
import sys
from pathlib import Path

import numpy as np
import yaml

from vlcp.config import load_params
from vlcp.eval.continual import ctp_bwt
from vlcp.report.paper import paper_data, paper_table, studies_root
from vlcp.report.results import (MAP, MAP_STD, RETRIEVAL, fill_pass_flops, final_metrics, flops_per_step,
                                 mean_std as sample_mean_std)


FINAL = RETRIEVAL + MAP + MAP_STD          # the final row: TR/IR@1/5/10, Rm, mAP@1/5/10 (hits and standard)
ABLATION = ["TR@1", "IR@1", "Rm", "mAP@1"]  # the columns of Tables 2-3 and supp. Table 2
GROUPS = ("memory-free", "memory-buffer", "upper bound")
COMPONENTS = ("L_CMC", "L_c", "L_s", "ER")  # Table 2's switches (its first columns)
SWITCH_INDEX = " ".join(COMPONENTS)
# Table 2's row keys in the paper's order: its switches as "✓ × × ×"
TABLE2_KEYS = [" ".join("✓" if s == "yes" else "×" for s in row)
               for row in paper_table("ctp_table2")[list(COMPONENTS)].itertuples(index=False)]

# method key (experiment "ctp-<key>", reversed order "ctp-rev-<key>") -> the paper's row name in Table 1
LABELS = {m.lower().replace("+", "-"): m for m in paper_table("ctp_table1")["method"]}
PREFIX, REV_PREFIX = "ctp-", "ctp-rev-"

# the paper's hours (studies/ctp/paper.yaml: values and sources)
PAPER_SEQF_HOURS, PAPER_CTP_HOURS = (paper_data("ctp")[k] for k in ("seqf_hours", "ctp_hours"))
PAPER_TIME_TARGET = round(PAPER_CTP_HOURS / PAPER_SEQF_HOURS, 2)   # 1.18

DEFAULT_STUDY = {**yaml.safe_load((studies_root() / "ctp" / "defaults.yaml").read_text(encoding="utf-8")),
                 "time_target": PAPER_TIME_TARGET}


def study_config(params_file: str | Path | None = "params.yaml", **overrides) -> dict:
    """DEFAULT_STUDY updated by `params_file`'s `report.ctp` (where it exists), then by the non-None `overrides`."""
    study = copy.deepcopy(DEFAULT_STUDY)
    if params_file and Path(params_file).exists():
        study.update((load_params(params_file).get("report") or {}).get("ctp") or {})
    study.update({k: v for k, v in overrides.items() if v is not None})
    study["momentum"] = {float(k): v for k, v in study["momentum"].items()}
    return study


def with_long(study: dict) -> dict:
    """The long profile's study: `report.ctp.long`'s seeds joined to its own, its runs read beside (`more_runs`)."""
    lg = study["long"]
    return {**study, **{k: list(dict.fromkeys([*study[k], *lg[k]])) for k in ("seeds", "ablation_seeds")},
            "more_runs": [*study.get("more_runs", []), lg["runs"]]}


def table1_experiments(study: dict) -> list[str]:
    return [e for g in GROUPS for e in study["table1"].get(g, [])]


def single_seed_experiments(study: dict) -> list[str]:
    """Every experiment of Tables 2-3 and supp. Tables 2-3 (run with `ablation_seeds`)."""
    exps = list(study["table2"]) + list(study["table3"].values()) + list(study["momentum"].values())
    return list(dict.fromkeys(exps + [REV_PREFIX + m for m in study["reversed"]]))


def list_mismatch(study: dict) -> str:
    """What params.yaml's flat run lists (`experiments`; `ablation_experiments`, beside Table 1's) lack
    or add compared with the tables' ("" if none)."""
    t1 = table1_experiments(study)
    wants = {"experiments": t1, "ablation_experiments": [e for e in single_seed_experiments(study) if e not in t1]}
    have = {key: study.get(key, want) for key, want in wants.items()}
    gaps = {k: ([e for e in w if e not in have[k]], [e for e in have[k] if e not in w]) for k, w in wants.items()}
    return "; ".join(f"`{key}` lacks {', '.join(lack) or 'nothing'} and adds {', '.join(extra) or 'nothing'}"
                     for key, (lack, extra) in gaps.items() if lack or extra)


def missing_seeds(runs: dict[str, dict], experiments, seeds) -> dict[str, list[int]]:
    """{experiment: its `seeds` not in `runs` ({experiment: {seed: results}})}, for those missing some."""
    missing = {e: [s for s in seeds if s not in runs.get(e, {})] for e in dict.fromkeys(experiments)}
    return {e: m for e, m in missing.items() if m}


def describe_missing(missing: dict[str, list[int]], experiments=None) -> str:
    """'a (seeds 1, 2); b (seed 0)' for `experiments` (all when None)."""
    keep = [e for e in (experiments if experiments is not None else missing) if e in missing]
    return "; ".join(f"{e} (seed{'s' if len(missing[e]) > 1 else ''} {', '.join(map(str, missing[e]))})"
                     for e in dict.fromkeys(keep))


def method_label(exp: str) -> str:
    """'ctp-ctp-er' -> 'CTP+ER', 'ctp-rev-lwf' -> 'LWF'; other names are returned unchanged."""
    for prefix in (REV_PREFIX, PREFIX):
        if exp.startswith(prefix) and exp[len(prefix):] in LABELS:
            return LABELS[exp[len(prefix):]]
    return exp


def final_row(r: dict, metrics=FINAL) -> dict[str, float]:
    """The model after the last task on the whole stream's pools."""
    cell = final_metrics(r)
    return {m: float(cell[m]) for m in metrics if m in cell}


def mean_std(values) -> tuple[float, float]:
    """Mean and sample std (ddof 1; 0 for one value; NaN, NaN for none) of the values not None or NaN."""
    v = [x for x in values if x is not None and not np.isnan(x)]
    return sample_mean_std(v) if v else (math.nan, math.nan)


def values(rs: list[dict], metric: str) -> list[float]:
    """The final `metric` of every seed."""
    return [final_row(r)[metric] for r in rs]


def by_seed(rs: list[dict]) -> dict:
    return {r.get("seed", i): r for i, r in enumerate(rs)}


def seconds_ratio(a: dict, b: dict) -> dict[int, float]:
    """{seed: total training seconds of a's run / b's} over the seeds both ({seed: results}) have."""
    ta, tb = ({s: float(sum(t["seconds"] for t in r["train"])) for s, r in x.items()} for x in (a, b))
    return {s: ta[s] / tb[s] for s in ta if s in tb and tb[s] > 0}


def time_ratios(rs: list[dict], ref: list[dict]) -> list[float]:
    return list(seconds_ratio(by_seed(rs), by_seed(ref)).values())


def flop_ratios(rs: list[dict], ref: list[dict]) -> list[float]:
    a, b = by_seed(fill_pass_flops(rs)), by_seed(fill_pass_flops(ref))
    return [flops_per_step(a[s]) / flops_per_step(b[s]) for s in a if s in b]


def run_bwt(r: dict, metric: str = "Rm") -> float:
    """CTP's eval.py "BWT" on cumulative pools (positive = forgetting)."""
    return ctp_bwt([c["test"][metric] for c in r["cumulative"]], [c[metric] for c in r["final_cumulative"]])


def table3_rows(table3: dict[str, str]) -> dict[str, str]:
    """{the paper's label: experiment} in Table 3's row order."""
    p = paper_table("ctp_table3")
    return {label: table3[k] for k, label in zip(p["row"], p["label"]) if k in table3}


def momentum_rows(momentum: dict[float, str], table3: dict[str, str]) -> dict[str, str]:
    """supp. Table 2's rows: the single-way updates, then m = ... (0.9 is CTP's default)."""
    rows = {"only θ(t-1)": table3.get("only_prev"), "only θt": table3.get("only_cur")}
    rows |= {f"m={m:g}": e for m, e in sorted(momentum.items())}
    return {k: v for k, v in rows.items() if v}


def reversed_rows(study: dict) -> dict[tuple, str]:
    """{(group, label): ctp-rev-<m>} in Table 1's order."""
    return {(g, method_label(e)): REV_PREFIX + e.removeprefix(PREFIX) for g in GROUPS
            for e in study["table1"].get(g, []) if e.removeprefix(PREFIX) in study["reversed"]}


def setting(runs: dict[str, list[dict]], study: dict) -> dict:
    """Model, budget and buffer size as the runs recorded them (first run found)."""
    r = next((rs[0] for rs in runs.values() if rs), None)
    if r is None:
        return {}
    cfg, train = r.get("config", {}), r.get("config", {}).get("train", {})
    methods = [runs[e][0].get("config", {}).get("method", {}) for e in study["table1"].get("memory-buffer", [])
               if runs.get(e)]
    buffer = next((m[k] for m in methods for k in ("buffer_size", "memory_size", "memory") if k in m), None)
    out = {"model": cfg.get("model", {}).get("name"), "steps": train.get("steps"),
           "batch size": train.get("batch_size"), "lr": train.get("lr"), "tasks": len(r.get("tasks", [])),
           "buffer size (pairs)": buffer, "training pairs": sum(r.get("task_sizes", [])) or None,
           "device": r.get("device")}
    return {k: "—" if v is None else str(v) for k, v in out.items()}


def method_notes(keys) -> dict[str, str]:
    """Each method's module docstring (first paragraph), or why there is none."""
    from vlcp.methods import get_method

    out = {}
    for k in keys:
        try:
            cls = get_method(k)
            doc = (sys.modules[cls.__module__].__doc__ or cls.__doc__ or "").strip()
            out[k] = " ".join(doc.split("\n\n")[0].split()) or "(no docstring)"
        except Exception as e:  # noqa: BLE001 - a method not (yet) registered is shown, not fatal
            out[k] = f"(not available: {str(e).split(';')[0]})"
    return out
