"""Can a study see an effect of the paper's size? Its power table (headroom H, noise σ_d, H/σ_d, the MDE
at its seeds, the tasks that teach) and the levers measured to raise it (`benchmarks/power_levers.py`)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from vlcp.report import stats as st
from vlcp.utils import read_json


def sigma_interval(sigma_d: float, dof: int, level: float = st.LEVEL) -> tuple[float, float]:
    """The chi-square `level` interval of an sd estimated as `sigma_d` on `dof` degrees of freedom."""
    if dof < 1:
        raise ValueError(f"sigma_interval: dof must be >= 1, got {dof}")
    a = 1 - level
    return (sigma_d * math.sqrt(dof / stats.chi2.ppf(1 - a / 2, dof)),
            sigma_d * math.sqrt(dof / stats.chi2.ppf(a / 2, dof)))


@dataclass(frozen=True)
class StudyPower:
    """A study's power table: its headline metric's headroom H and noise σ_d (on `sigma_dof`; None:
    not known), and how many of its fine-tune baseline's tasks teach (`vlcp.report.teach`)."""
    metric: str
    headroom: float
    sigma_d: float
    tasks_teaching: int
    tasks: int
    seeds: int
    headroom_from: str = ""     # e.g. "JointT − SeqF, final Rm"
    noise_from: str = ""        # e.g. "paired by seed (3 seeds)"
    sigma_dof: int | None = None
    teaching_from: str = ""     # the pool the tasks' gains are read on, when not their test pools

    @property
    def headroom_over_noise(self) -> float:
        return self.headroom / self.sigma_d if self.sigma_d > 0 else math.inf

    def headroom_over_noise_interval(self, level: float = st.LEVEL) -> tuple[float, float] | None:
        """H/σ_d's interval from σ_d's (H taken as known); None without σ_d's dof."""
        if not self.sigma_dof or not self.sigma_d > 0:
            return None
        lo, hi = sigma_interval(self.sigma_d, self.sigma_dof, level)
        return self.headroom / hi, self.headroom / lo

    def mde(self) -> float:
        """The MDE of one comparison paired at the table's seeds (one seed: σ_d known)."""
        if not self.sigma_d > 0:
            return 0.0 if self.sigma_d == 0 else math.nan
        return st.mde(self.sigma_d, self.seeds, self.seeds - 1 if self.seeds >= 2 else None)

    def goals(self, goal: float = 10.0, teach_share: float = 2 / 3) -> tuple[bool, bool]:
        """(H/σ_d ≥ `goal`, the fine-tune baseline teaching on ≥ `teach_share` of its tasks)."""
        return self.headroom_over_noise >= goal, self.tasks > 0 and self.tasks_teaching >= teach_share * self.tasks

    def to_dict(self) -> dict:
        """The claims file's "power" entry."""
        return {"metric": self.metric, "headroom": self.headroom, "sigma_d": self.sigma_d,
                "headroom_over_noise": self.headroom_over_noise, "tasks_teaching": self.tasks_teaching,
                "tasks": self.tasks, "seeds": self.seeds, "mde": self.mde(),
                "headroom_from": self.headroom_from, "noise_from": self.noise_from, "sigma_dof": self.sigma_dof,
                "headroom_over_noise_interval": self.headroom_over_noise_interval(),
                "teaching_from": self.teaching_from}


def power_frame(powers: dict[str, StudyPower]):
    """The power table at the top of a report: one row per study (or setting)."""
    def row(k: str, p: StudyPower) -> dict:
        m, ci = p.mde(), p.headroom_over_noise_interval()
        return {"study": k, "metric": p.metric, "H": p.headroom, "σ_d": p.sigma_d, "H/σ_d": p.headroom_over_noise,
                "H/σ_d 95 % interval": f"{ci[0]:.1f}–{ci[1]:.1f}" if ci else "—",
                "tasks that teach": f"{p.tasks_teaching}/{p.tasks}",
                "seeds": p.seeds, "MDE": m, "MDE / H": m / p.headroom if p.headroom > 0 else math.nan,
                "H is": p.headroom_from, "σ_d from": p.noise_from}

    return pd.DataFrame([row(k, p) for k, p in powers.items()])


def study_power(metric: str, upper: list[float], lower: list[float], gains, *, headroom_from: str,
                sigma_d: float | None = None, noise_from: str = "", sigma_dof: int | None = None,
                teaching_from: str = "") -> StudyPower:
    """A study's power table: H = mean(`upper`) − mean(`lower`) (per-seed values of `metric`); σ_d
    the given `sigma_d` (on `sigma_dof`), else the sd of the per-seed differences (≥ 2 seeds paired);
    `gains`: the fine-tune baseline's `teach.task_gains` frame, None without per-task scores."""
    up, lo = np.asarray(upper, float), np.asarray(lower, float)
    seeds = int(min(len(up), len(lo)))
    if sigma_d is None:
        if len(up) != len(lo) or seeds < 2:
            raise ValueError(f"study_power: σ_d of {metric} needs ≥ 2 seeds paired (got {len(up)} and {len(lo)}), "
                             "or a sigma_d measured elsewhere")
        sigma_d, sigma_dof = float((up - lo).std(ddof=1)), seeds - 1
        noise_from = noise_from or f"sd of the per-seed differences ({seeds} seeds)"
    teaching, tasks = (0, 0) if gains is None else (int(gains["teaches"].sum()), len(gains))
    return StudyPower(metric, float(up.mean() - lo.mean()), float(sigma_d), teaching, tasks, seeds, headroom_from,
                      noise_from, sigma_dof, teaching_from)


def spread_sigma(spread: dict | None, metric: str) -> tuple[float | None, str]:
    """σ_d of `metric` from a seed subset's `stats.seed_spread` and where it comes from, or (None, why)."""
    m = ((spread or {}).get("metrics") or {}).get(metric)
    if not m:
        return None, f"no seed subset measured {metric}"
    return float(m["difference_spread"]), f"seed subset: √2 × pooled seed std, {m['dof']} dof"


def spread_dof(spread: dict | None, metric: str) -> int | None:
    """The degrees of freedom of `spread_sigma`'s σ_d; None when not measured."""
    m = ((spread or {}).get("metrics") or {}).get(metric)
    return int(m["dof"]) if m else None


def power_line(p: StudyPower, goal: float = 10.0, teach_share: float = 2 / 3) -> str:
    """The sentence under a power table: whether the study meets the power goals, and its MDE."""
    ok_h, ok_t = p.goals(goal, teach_share)
    short = [x for x, ok in ((f"H/σ_d ≥ {goal:g}", ok_h), (f"teaching on ≥ {teach_share:.0%} of its tasks", ok_t))
             if not ok]
    verdict = "falls short of " + " and ".join(short) if short else "meets both power goals"
    m, ci = p.mde(), p.headroom_over_noise_interval()
    return (f"**Power.** H = {p.headroom:.2f} ({p.headroom_from}), σ_d = {p.sigma_d:.2f} ({p.noise_from}): "
            f"H/σ_d = {p.headroom_over_noise:.1f}"
            + (f" (95 % interval {ci[0]:.1f}–{ci[1]:.1f} from σ_d's {p.sigma_dof} degrees of freedom)" if ci else "")
            + "; "
            + (f"the fine-tune baseline teaches on {p.tasks_teaching} of {p.tasks} tasks"
               + (f" (read on {p.teaching_from})" if p.teaching_from else "") if p.tasks
               else "no per-task scores to tell whether the stream teaches")
            + f"; at {p.seeds} seed{'s' if p.seeds != 1 else ''} the smallest effect the ledger confirms with 80 % "
            f"power is {m:.2f}" + (f" ({m / p.headroom:.2f} H)" if p.headroom > 0 else " (no headroom)")
            + f". The study {verdict}.")


LEVERS_FILE = "benchmarks/results/power_levers.json"   # benchmarks/power_levers.py's rows


def lever_rows(path: str = LEVERS_FILE) -> list[dict]:
    """The levers measured so far, none when the file is absent."""
    return read_json(path)["rows"] if Path(path).exists() else []


def _lever_values(r: dict, metric: str | None) -> dict | None:
    return r["values"] if metric is None or metric == r["metric"] else (r.get("more_values") or {}).get(metric)


def _lever_teaches(r: dict, teach_on: str | None) -> list[bool] | None:
    """The lower run's per-task "teaches", on its test pools (None) or on the pool `teach_on`."""
    return r.get("teaches") if teach_on is None else (r.get("more_teaches") or {}).get(teach_on)


def lever_powers(rows: list[dict], study: str, metric: str | None = None,
                 teach_on: str | None = None) -> dict[str, StudyPower]:
    """A power table row per lever measured on `study`, paired by seed on `metric` (None: each row's headline)."""
    def power(r: dict, values: dict) -> StudyPower:
        vals, t = [values[str(s)] for s in r["seeds"]], _lever_teaches(r, teach_on)
        return study_power(metric or r["metric"], [u for u, _ in vals], [lo for _, lo in vals],
                           None if t is None else pd.DataFrame({"teaches": t}),
                           headroom_from=f"{r['upper']} − {r['lower']}", teaching_from=teach_on or "")

    return {r["label"]: power(r, v) for r in rows
            if r["study"] == study and (v := _lever_values(r, metric)) is not None}


def levers_intro(what: str = "", goal: float = 10.0, teach_share: float = 2 / 3) -> str:
    """The sentence above a report's lever table: where its rows come from (and `what` they measure), how
    their σ_d is read."""
    return ("**Levers measured** (`benchmarks/power_levers.py`: the upper and lower bound at calibration seeds, "
            "never the ledger's" + (f"; {what}" if what else "") + "; σ_d is the sd of their per-seed differences, "
            "paired by seed, which can differ from the power table's above (its \"σ_d from\" names it); the goal: "
            f"H/σ_d ≥ {goal:g} with ≥ {teach_share:.0%} of the tasks teaching):")


def levers_frame(rows: list[dict], study: str, metric: str | None = None, goal: float = 10.0,
                 teach_share: float = 2 / 3, teach_on: str | None = None):
    """The levers tried on `study`, a row per setting (empty: none): the power table's columns, the lower run's
    training seconds, whether it meets the goal, when and where measured."""
    powers = lever_powers(rows, study, metric, teach_on)
    if not powers:
        return pd.DataFrame()
    df = power_frame(powers).rename(columns={"study": "setting"}).drop(columns=["σ_d from"])   # σ_d: paired by seed
    mine = [r for r in rows if r["study"] == study and _lever_values(r, metric) is not None]
    if teach_on is not None:   # the reading on `teach_on` first; the test pools' beside it
        df["tasks that teach"] = [f"{sum(t)}/{len(t)}" if (t := _lever_teaches(r, teach_on)) is not None
                                  else "not recorded" for r in mine]
        df.insert(list(df.columns).index("tasks that teach") + 1, "on the test pools",
                  [f"{sum(r['teaches'])}/{len(r['teaches'])}" if r.get("teaches") is not None else "—" for r in mine])
    df["seeds used"] = [", ".join(map(str, r["seeds"])) for r in mine]
    df["lower's training s"] = [float(np.mean(r["lower_train_seconds"])) for r in mine]
    df["meets the goal"] = [all(p.goals(goal, teach_share)) for p in powers.values()]
    df["measured"] = [f"{r['date']} at {r['commit']}" for r in mine]
    return df
