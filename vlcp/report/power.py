"""Power: can a study see an effect of the paper's size? The numbers every power table carries
(headroom H, noise σ_d, H/σ_d, MDE, seeds to decide) and `power_verdict`.

H is the headline metric's upper bound minus its lower bound (e.g. JointT − SeqF on final Rm); σ_d
the sd of the difference of two single runs. A paper's effect is carried over as its share of the
paper's headroom times ours (`scaled_effect`). The MDE is the smallest true effect that the confirm
rule (the 95 % interval's low end above 0: a one-sided test at 2.5 % per comparison) confirms with
80 % power at the seeds used: noncentral t on the seeds' degrees of freedom (paired by seed), or the
normal with a known σ_d for one run each. A claim of k comparisons that must all hold ("beats every
baseline") is confirmed when every interval clears 0 (an intersection-union test: its false-confirm
rate stays at most 2.5 % one-sided, with no correction), so each comparison needs power 0.8^(1/k)
(`mde(comparisons=k)`); it is refuted when one comparison's Bonferroni interval (level 1 − 0.05/k)
lies below the scaled effect (at most 2.5 % one-sided over the k).

`power_verdict`: **confirmed** (every interval clears 0); **refuted** (the refuting interval's high
end is below the scaled effect); **underpowered** (the MDE at these seeds exceeds the scaled effect;
`seeds_to_decide` says how many seeds would); **inconclusive** otherwise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

LEVEL = 0.95
POWER = 0.8
MAX_SEEDS = 100


def scaled_effect(paper_effect: float, paper_headroom: float, headroom: float) -> float:
    """The paper's effect carried to our scale: its share of the paper's headroom times ours."""
    if not paper_headroom > 0:
        raise ValueError(f"scaled_effect: the paper's headroom must be > 0, got {paper_headroom}")
    return paper_effect / paper_headroom * headroom


def _critical(level: float, dof: float | None) -> float:
    q = 1 - (1 - level) / 2
    return stats.norm.ppf(q) if dof is None else stats.t.ppf(q, dof)


def detection_power(effect: float, sigma_d: float, n: int = 1, *, level: float = LEVEL, dof: float | None = None,
                    paired: bool = True) -> float:
    """The probability that the ledger's rule confirms a true effect `effect` (> 0) of one comparison:
    the `level` interval's low end above 0. `n` runs per arm, `sigma_d` the sd of one single-run
    difference. Paired by seed with n ≥ 2: noncentral t on n − 1 degrees of freedom (the seed spread
    is estimated); otherwise (n = 1, or `paired=False`) the interval uses a known σ_d (normal), or
    Student's t on `dof` when σ_d was estimated on that few."""
    if not sigma_d > 0:
        raise ValueError(f"detection_power: sigma_d must be > 0, got {sigma_d}")
    if paired and n >= 2:
        dof = n - 1
    se = sigma_d / math.sqrt(n)    # a mean of n runs per arm minus another: variance σ_d² (1/n + 1/n) / 2
    crit = _critical(level, dof)
    nc = effect / se
    return float(stats.norm.sf(crit - nc) if dof is None else stats.nct.sf(crit, dof, nc))


def mde(sigma_d: float, n: int = 1, *, level: float = LEVEL, power: float = POWER, comparisons: int = 1,
        dof: float | None = None, paired: bool = True) -> float:
    """The minimum detectable effect: the smallest true effect that the ledger's rule confirms with
    probability `power` (each of `comparisons` must, so each gets power^(1/comparisons))."""
    if comparisons < 1:
        raise ValueError(f"mde: comparisons must be >= 1, got {comparisons}")
    target = power ** (1 / comparisons)
    f = lambda d: detection_power(d, sigma_d, n, level=level, dof=dof, paired=paired) - target  # noqa: E731
    hi = sigma_d
    while f(hi) < 0:
        hi *= 2
    return float(optimize.brentq(f, 0.0, hi, xtol=1e-9 * sigma_d))


def seeds_to_decide(effect: float, sigma_d: float, *, level: float = LEVEL, power: float = POWER,
                    comparisons: int = 1, max_seeds: int = MAX_SEEDS) -> int | None:
    """The fewest seeds per arm (paired by seed, ≥ 2) at which `effect` is detectable with `power`;
    None when even `max_seeds` are not enough (or the effect is not positive)."""
    if not effect > 0:
        return None
    for n in range(2, max_seeds + 1):
        if mde(sigma_d, n, level=level, power=power, comparisons=comparisons) <= effect:
            return n
    return None


def equivalence_mde(sigma_d: float, n: int = 1, *, dof: float | None = None, paired: bool = True,
                    power: float = POWER) -> float:
    """The smallest equivalence margin that two one-sided tests at 5 % each (the 90 % interval
    inside ±margin) confirm with probability `power` when the true difference is 0. `n` runs per
    arm, `sigma_d` the sd of one single-run difference (se = σ_d/√n). With a known sd (dof None):
    (z_0.95 + z_((1+power)/2)) × se. With an estimated one (paired by seed with n ≥ 2: n − 1 dof,
    else `dof`): the probability averaged over the sd's chi-square law, solved for the margin."""
    if not sigma_d > 0:
        raise ValueError(f"equivalence_mde: sigma_d must be > 0, got {sigma_d}")
    if paired and n >= 2:
        dof = n - 1
    se = sigma_d / math.sqrt(n)
    if dof is None:
        return float((stats.norm.ppf(0.95) + stats.norm.ppf((1 + power) / 2)) * se)
    t = stats.t.ppf(0.95, dof)

    root = np.sqrt(stats.chi2.ppf((np.arange(400) + 0.5) / 400, dof) / dof)   # s/σ at 400 equal-mass quantiles

    def shown(m: float) -> float:   # P(|mean| + t·s/√n < m) at a true difference 0, s the estimated sd
        return float(np.mean(np.clip(2 * stats.norm.cdf((m - t * se * root) / se) - 1, 0.0, None)))

    hi = 4 * se * t
    while shown(hi) < power:
        hi *= 2
    return float(optimize.brentq(lambda m: shown(m) - power, 0.0, hi, xtol=1e-9 * se))


def seeds_to_show_equivalence(margin: float, sigma_d: float, *, max_seeds: int = MAX_SEEDS) -> int | None:
    """The fewest seeds per arm (paired, ≥ 2) at which `margin` is within `equivalence_mde`; None
    when even `max_seeds` are not enough (the MDE shrinks with n: a bisection)."""
    if not margin > 0 or equivalence_mde(sigma_d, max_seeds) > margin:
        return None
    lo, hi = 1, max_seeds          # the MDE at lo is above the margin (or lo < 2), at hi within it
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if mid >= 2 and equivalence_mde(sigma_d, mid) <= margin else (mid, hi)
    return hi


def bonferroni_level(comparisons: int, level: float = LEVEL) -> float:
    """The per-comparison interval level that keeps a family of `comparisons` at `level`."""
    return 1 - (1 - level) / comparisons


def sigma_interval(sigma_d: float, dof: int, level: float = LEVEL) -> tuple[float, float]:
    """The `level` confidence interval of a standard deviation estimated as `sigma_d` on `dof`
    degrees of freedom (chi-square): with 3 seeds (2 dof) it spans 0.52-6.3 × the estimate, with 5
    (4 dof) 0.60-2.9 ×. A study's H/σ_d from so few seeds is that uncertain."""
    if dof < 1:
        raise ValueError(f"sigma_interval: dof must be >= 1, got {dof}")
    a = 1 - level
    return (sigma_d * math.sqrt(dof / stats.chi2.ppf(1 - a / 2, dof)),
            sigma_d * math.sqrt(dof / stats.chi2.ppf(a / 2, dof)))


def power_verdict(low: float, high: float, scaled: float, mde_: float, *, refute_high: float | None = None) -> str:
    """The verdict of a claim "effect > 0" whose paper effect, scaled to our headroom, is `scaled`:
    `low`, `high` its interval (the lowest low end over its comparisons, for k of them: each must
    clear 0), `refute_high` the interval's high end used to refute (the Bonferroni interval's, lowest
    over the k comparisons; default `high`), `mde_` the MDE at the seeds used (for k comparisons)."""
    if low > 0:
        return "confirmed"
    if (high if refute_high is None else refute_high) < scaled:
        return "refuted"
    if mde_ > scaled:
        return "underpowered"
    return "inconclusive"


@dataclass(frozen=True)
class StudyPower:
    """A study's power table: its headline metric's headroom H and noise σ_d, and how many of its
    fine-tune baseline's tasks teach (`vlcp.report.teach`)."""
    metric: str
    headroom: float
    sigma_d: float
    tasks_teaching: int
    tasks: int
    seeds: int
    headroom_from: str = ""     # e.g. "JointT − SeqF, final Rm"
    noise_from: str = ""        # e.g. "paired by seed (3 seeds)"
    sigma_dof: int | None = None   # the degrees of freedom σ_d was estimated on (None: not known)
    teaching_from: str = ""     # the pool the tasks' gains are read on (e.g. "each task's emoji in the unseen style")

    @property
    def headroom_over_noise(self) -> float:
        return self.headroom / self.sigma_d if self.sigma_d > 0 else math.inf

    def headroom_over_noise_interval(self, level: float = LEVEL) -> tuple[float, float] | None:
        """The `level` interval of H/σ_d from σ_d's chi-square interval (H taken as known); None
        without σ_d's degrees of freedom."""
        if not self.sigma_dof or not self.sigma_d > 0:
            return None
        lo, hi = sigma_interval(self.sigma_d, self.sigma_dof, level)
        return self.headroom / hi, self.headroom / lo

    def mde(self, seeds: int | None = None, comparisons: int = 1) -> float:
        if not self.sigma_d > 0:
            return 0.0 if self.sigma_d == 0 else math.nan
        return mde(self.sigma_d, seeds or self.seeds, comparisons=comparisons)

    def goals(self, goal: float = 10.0, teach_share: float = 2 / 3) -> tuple[bool, bool]:
        """(H/σ_d ≥ `goal`, the fine-tune baseline teaching on ≥ `teach_share` of its tasks)."""
        return self.headroom_over_noise >= goal, self.tasks > 0 and self.tasks_teaching >= teach_share * self.tasks

    def to_dict(self) -> dict:
        """The claims file's "power" entry (the keys the reports and the index read)."""
        return {"metric": self.metric, "headroom": self.headroom, "sigma_d": self.sigma_d,
                "headroom_over_noise": self.headroom_over_noise, "tasks_teaching": self.tasks_teaching,
                "tasks": self.tasks, "seeds": self.seeds, "mde": self.mde(),
                "headroom_from": self.headroom_from, "noise_from": self.noise_from, "sigma_dof": self.sigma_dof,
                "headroom_over_noise_interval": self.headroom_over_noise_interval(), "teaching_from": self.teaching_from}


def power_frame(powers: dict[str, StudyPower]):
    """The power table at the top of a report: one row per study (or setting)."""
    import pandas as pd

    rows = []
    for k, p in powers.items():
        m = p.mde()
        ci = p.headroom_over_noise_interval()
        rows.append({"study": k, "metric": p.metric, "H": p.headroom, "σ_d": p.sigma_d,
                     "H/σ_d": p.headroom_over_noise,
                     "H/σ_d 95 % interval": f"{ci[0]:.1f}–{ci[1]:.1f}" if ci else "—",
                     "tasks that teach": f"{p.tasks_teaching}/{p.tasks}",
                     "seeds": p.seeds, "MDE": m, "MDE / H": m / p.headroom if p.headroom > 0 else math.nan,
                     "H is": p.headroom_from, "σ_d from": p.noise_from})
    return pd.DataFrame(rows)


def study_power(metric: str, upper: list[float], lower: list[float], gains, *, headroom_from: str,
                sigma_d: float | None = None, noise_from: str = "", sigma_dof: int | None = None,
                teaching_from: str = "") -> StudyPower:
    """A study's power table from its runs: H = mean(`upper`) − mean(`lower`) (per-seed values of the
    headline `metric`, e.g. JointT's and SeqF's final Rm); σ_d = `sigma_d` when given (a seed
    subset's √2 × pooled std, `spread.seed_spread`), else the sd of the per-seed differences upper −
    lower (paired by seed: needs ≥ 2 seeds each; its dof: seeds − 1; a given `sigma_d`'s dof:
    `sigma_dof`, when known); `gains`: the fine-tune baseline's
    `vlcp.report.teach.task_gains` frame (its `teaches` column), None when its runs hold no per-task
    scores (0 of 0 tasks); `teaching_from`: the pool those gains were read on, when not the tasks'
    own test pools."""
    import numpy as np

    up, lo = np.asarray(upper, float), np.asarray(lower, float)
    seeds = int(min(len(up), len(lo)))
    if sigma_d is None:
        if len(up) != len(lo) or seeds < 2:
            raise ValueError(f"study_power: σ_d of {metric} needs ≥ 2 seeds paired (got {len(up)} and {len(lo)}), "
                             "or a sigma_d measured elsewhere")
        sigma_d, noise_from = float((up - lo).std(ddof=1)), noise_from or f"sd of the per-seed differences ({seeds} seeds)"
        sigma_dof = seeds - 1
    teaching, tasks = (0, 0) if gains is None else (int(gains["teaches"].sum()), len(gains))
    return StudyPower(metric, float(up.mean() - lo.mean()), float(sigma_d), teaching, tasks, seeds, headroom_from,
                      noise_from, sigma_dof, teaching_from)


def spread_sigma(spread: dict | None, metric: str) -> tuple[float | None, str]:
    """σ_d of `metric` from a seed subset's spread (`vlcp.report.spread.seed_spread`: √2 × the pooled
    seed std), with where it comes from; (None, why) when the subset has not measured it."""
    m = ((spread or {}).get("metrics") or {}).get(metric)
    if not m:
        return None, f"no seed subset measured {metric}"
    return float(m["difference_spread"]), f"seed subset: √2 × pooled seed std, {m['dof']} dof"


def spread_dof(spread: dict | None, metric: str) -> int | None:
    """The degrees of freedom of `spread_sigma`'s σ_d (the seed subset's Σ (seeds − 1)); None
    when the subset has not measured `metric`."""
    m = ((spread or {}).get("metrics") or {}).get(metric)
    return int(m["dof"]) if m else None


def power_line(p: StudyPower, goal: float = 10.0, teach_share: float = 2 / 3) -> str:
    """One sentence under a power table: whether the study meets the power goals (H/σ_d ≥ `goal`,
    the fine-tune baseline teaching on ≥ `teach_share` of its tasks), and its MDE as a share of H."""
    ok_h, ok_t = p.goals(goal, teach_share)
    verdict = ("meets both power goals" if ok_h and ok_t else
               "falls short of " + " and ".join(x for x, ok in ((f"H/σ_d ≥ {goal:g}", ok_h),
                                                                (f"teaching on ≥ {teach_share:.0%} of its tasks", ok_t))
                                                if not ok))
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
    """The levers measured so far (`benchmarks/power_levers.py`), none when the file is absent."""
    from pathlib import Path

    from vlcp.utils import read_json

    return read_json(path)["rows"] if Path(path).exists() else []


def _lever_values(r: dict, metric: str | None) -> dict | None:
    if metric is None or metric == r["metric"]:
        return r["values"]
    return (r.get("more_values") or {}).get(metric)


def _lever_teaches(r: dict, teach_on: str | None) -> list[bool] | None:
    """The lower run's per-task "teaches" of a lever row, read on its test pools (`teach_on` None)
    or on the pool `teach_on` (None when the row did not record it)."""
    return r.get("teaches") if teach_on is None else (r.get("more_teaches") or {}).get(teach_on)


def lever_powers(rows: list[dict], study: str, metric: str | None = None,
                 teach_on: str | None = None) -> dict[str, StudyPower]:
    """A power table row for each lever measured on `study` (the rows of
    benchmarks/results/power_levers.json, `benchmarks/power_levers.py`): H and σ_d from the per-seed
    upper and lower values of `metric` (None: each row's headline), paired by seed; tasks that teach
    from the lower run's per-task gains on its test pools, or on the pool `teach_on` (0 of 0 tasks
    where a row did not record it). Rows that did not record `metric` are left out."""
    import pandas as pd

    out = {}
    for r in rows:
        values = _lever_values(r, metric) if r["study"] == study else None
        if values is None:
            continue
        vals = [values[str(s)] for s in r["seeds"]]
        t = _lever_teaches(r, teach_on)
        gains = None if t is None else pd.DataFrame({"teaches": t})
        out[r["label"]] = study_power(metric or r["metric"], [u for u, _ in vals], [lo for _, lo in vals], gains,
                                      headroom_from=f"{r['upper']} − {r['lower']}", teaching_from=teach_on or "")
    return out


def levers_intro(what: str = "", goal: float = 10.0, teach_share: float = 2 / 3) -> str:
    """The sentence above a report's lever table: where its rows come from, `what` they measure when
    the study says more (e.g. "H here is joint − full fine-tuning"), and how their σ_d is read (paired
    by seed, which a power table may not be: its "σ_d from" column names its own)."""
    return ("**Levers measured** (`benchmarks/power_levers.py`: the upper and lower bound at calibration seeds, "
            "never the ledger's" + (f"; {what}" if what else "") + "; σ_d is the sd of their per-seed differences, "
            "paired by seed, which can differ from the power table's above (its \"σ_d from\" names it); the goal: "
            f"H/σ_d ≥ {goal:g} with ≥ {teach_share:.0%} of the tasks teaching):")


def levers_frame(rows: list[dict], study: str, metric: str | None = None, goal: float = 10.0,
                 teach_share: float = 2 / 3, teach_on: str | None = None):
    """The levers tried on `study`, one row per setting: the power table's columns on `metric`
    (None: the headline), the lower run's training seconds (the lever's cost), whether it meets the
    goal (H/σ_d ≥ `goal` with ≥ `teach_share` of the tasks teaching, read on the pool `teach_on`
    when given, with the test pools' reading beside it), and when and where it was measured.
    Empty when none."""
    import pandas as pd

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
