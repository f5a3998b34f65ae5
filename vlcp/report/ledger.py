"""The one comparison path from a claim to its verdict: per-seed values paired by seed, the paper's
effect carried to our headroom by a `Scale`, judged by `vlcp.report.stats`' rules. A comparison
below the study's depth (exploratory) can keep a row from being confirmed, never refute it."""
from __future__ import annotations

import html
import math
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from typing import Callable, Mapping, NamedTuple

import numpy as np
import pandas as pd

from vlcp.report import stats as st
from vlcp.report.stats import Effect, Noise, Values
from vlcp.report.results import MEASURES
from vlcp.report.study import Claims, ClaimSpec, Runs, Study, load_runs, stale_calibration, values

VERDICTS = ("confirmed", "refuted", "underpowered", "not expressible here", "inconclusive", "not testable")
RESOLVED = 2.0   # a headroom scales the paper's effects only where H > RESOLVED × σ_d of its own pair


def unresolved(headroom: float, noise: Noise | None) -> str | None:
    """Why a headroom cannot scale the paper's effects (H > 2 σ_d of its own pair), or None."""
    if noise is None:
        return f"H {headroom:.2f} has no σ_d to check it against"
    r = st.ratio(headroom, noise)
    if r is None:
        return f"H {headroom:.2f}: its σ_d {noise.sd:.2g} on {noise.dof} dof decides nothing (needs > 0, ≥ 3 seeds)"
    if not r > RESOLVED:
        return f"H {headroom:.2f} is within {RESOLVED:g} σ_d of its pair (σ_d {noise.sd:.2f}, H/σ_d {r:.1f})"
    return None


@dataclass(frozen=True)
class Scale:
    """Carries a paper's effect to ours: its share of the paper's headroom times our H (None: unknown,
    `how` says why; `estimate`: H as measured, resolved or not). Build it with `of` or `measured`, which
    apply `unresolved`."""
    paper_headroom: float
    headroom: float | None
    how: str = ""
    estimate: float | None = None

    @property
    def absent(self) -> bool:
        """No headroom at all here (H ≤ 0 as measured): the paper's effect, a share of it, is not expressible."""
        return self.headroom is None and self.estimate is not None and self.estimate <= 0

    def __post_init__(self):
        if not self.paper_headroom > 0:
            raise ValueError(f"Scale: paper_headroom must be > 0, got {self.paper_headroom}")

    @classmethod
    def of(cls, headroom: float, noise: Noise | None, paper_headroom: float, how: str = "") -> "Scale":
        """A headroom (measured or calibrated) with the noise of its own pair: known if resolved."""
        why = unresolved(headroom, noise)
        return cls(paper_headroom, None if why else float(headroom), f"{how}: {why}" if why else how, float(headroom))

    @classmethod
    def measured(cls, upper: Values, lower: Values | None, paper_headroom: float, how: str = "") -> "Scale":
        """H = the mean of upper − lower at their common seeds (`lower` None: 0), its noise their sd."""
        d = st.paired(upper, lower) if lower is not None else {s: float(v) for s, v in upper.items()}
        if not d:
            return cls(paper_headroom, None, f"{how}: no common seeds")
        return cls.of(float(np.mean(list(d.values()))), st.pair_noise(d), paper_headroom, how)

    def __call__(self, paper_effect: float) -> float | None:
        return None if self.headroom is None else paper_effect / self.paper_headroom * self.headroom


@dataclass(frozen=True)
class Comparison:
    """a − b ({seed: value}), the paper's effect (or margin) and the `Scale` that carries it; `floor`:
    the noise of single-run comparisons."""
    label: str
    a: Values
    b: Values
    paper_effect: float
    scale: Scale
    floor: Noise | None = None


@dataclass
class Row:
    """A claims-file row: the verdict and the deciding (or refuting) comparison's numbers; `needs`:
    what would decide it."""
    claim_id: str
    verdict: str
    kind: str = ""
    effect: float | None = None
    low: float | None = None
    high: float | None = None
    seeds: int | None = None
    paper_effect: float | None = None
    scaled_effect: float | None = None
    sigma_d: float | None = None
    mde: float | None = None
    seeds_to_decide: int | None = None
    needs: str = ""
    comparisons: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    claim: str = ""                  # these three from the claims file
    source: str = ""
    paper: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"claim {self.claim_id!r}: verdict {self.verdict!r} is not one of {VERDICTS}")


class _Judged(NamedTuple):
    c: Comparison
    e: Effect          # at the row's level
    target: float | None
    mde: float
    at_depth: bool
    slack: float       # how far it clears its confirmation (> 0: it does; −inf: it cannot)
    excess: float      # how far it lies beyond its refutation, on the Bonferroni interval (> 0: it refutes)

    @property
    def gap(self) -> float:   # MDE − target: the deciding comparison has the largest
        return math.inf if self.target is None or not self.e.usable else self.mde - self.target

    def record(self) -> dict:
        """The comparison as the row's `comparisons` list holds it."""
        return {"label": self.c.label, "effect": self.e.diff, "low": _finite(self.e.low), "high": _finite(self.e.high),
                "seeds": self.e.n, "sigma_d": self.e.sd, "dof": self.e.dof, "paper_effect": self.c.paper_effect,
                "scaled_effect": self.target, "mde": _finite(self.mde), "at_depth": self.at_depth, "how": self.e.how}


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _row(claim_id: str, kind: str, judged: list[_Judged], depth: int, mde_of) -> Row:
    k = len(judged)
    notes = [f"{k} comparisons, all must hold (each at its level; refuted on a Bonferroni interval)"] if k > 1 else []
    below = [j.c.label for j in judged if not j.at_depth]
    if below:
        notes.append(f"exploratory (below {depth} seeds): {', '.join(below)}; can keep the row from being confirmed")
    notes += [f"{j.c.label}: scale unknown ({j.c.scale.how})" for j in judged if j.target is None]
    needs, decide = "", None
    if all(j.slack > 0 and j.at_depth for j in judged):
        verdict, show = "confirmed", min(judged, key=lambda j: j.slack)
    elif any(j.excess > 0 for j in judged):
        verdict, show = "refuted", max(judged, key=lambda j: j.excess)
    else:
        show = max(judged, key=lambda j: (j.gap, j.mde))
        verdict, e = "underpowered" if show.gap > 0 else "inconclusive", show.e
        if show.target is None and show.c.scale is not None and show.c.scale.absent:
            verdict, needs = "not expressible here", f"a benchmark with a headroom for it ({show.c.scale.how})"
        elif show.target is None:
            needs = f"a headroom these runs resolve ({show.c.scale.how})"
        elif not e.usable:
            needs = ("a noise estimate above 0 (σ_d is 0: its per-seed differences do not vary)"
                     if e.sd == 0 and (e.dof is None or e.dof >= 2)
                     else "≥ 3 seeds per arm (no σ_d, or one from a single degree of freedom)")
        else:
            found = st.seeds_to_decide(show.target, lambda n: Noise(e.sd, n - 1), k, mde_of=mde_of)
            decide = None if found is None else max(found, depth)
            needs = (f"{decide} seeds per arm" if decide is not None
                     else f"more than {st.MAX_SEEDS} seeds per arm: a larger headroom")
    return Row(claim_id, verdict, kind, show.e.diff, _finite(show.e.low), _finite(show.e.high), show.e.n,
               show.c.paper_effect, show.target, show.e.sd, _finite(show.mde), decide, needs,
               [j.record() for j in judged], notes)


def _count(claim_id: str, comparisons: list[Comparison], rule: str) -> int:
    if not comparisons:
        raise ValueError(f"claim {claim_id!r}: no comparisons")
    for c in comparisons:
        if not c.paper_effect > 0:
            raise ValueError(f"claim {claim_id!r}, {c.label}: {rule}, got {c.paper_effect}")
    return len(comparisons)


def greater(claim_id: str, comparisons: list[Comparison], *, depth: int = 2, level: float = st.LEVEL) -> Row:
    """"a > b" for every comparison, each at `level`; refuted when one at `depth` seeds has its
    Bonferroni interval below its scaled effect (below 0 for an unknown scale)."""
    k = _count(claim_id, comparisons, "paper_effect must be > 0 for a > b")

    def judge(c: Comparison) -> _Judged:
        e = st.effect(c.a, c.b, level=level, floor=c.floor)
        wide = e if k == 1 else st.effect(c.a, c.b, level=st.bonferroni_level(k, level), floor=c.floor)
        target, at_depth = c.scale(c.paper_effect), e.n >= depth
        slack = e.low if e.usable else -math.inf
        refutes = e.usable and at_depth and not slack > 0
        excess = (0.0 if target is None else target) - wide.high if refutes else -math.inf
        return _Judged(c, e, target, e.mde(k, level), at_depth, slack, excess)

    return _row(claim_id, "greater", [judge(c) for c in comparisons], depth, st.mde)


def equivalent(claim_id: str, comparisons: list[Comparison], *, depth: int = 2) -> Row:
    """"|a − b| < margin" (the paper's scaled) for every comparison: the 90 % interval inside ±margin;
    refuted when one at `depth` lies wholly outside on its Bonferroni interval (1 − 0.10/k)."""
    k = _count(claim_id, comparisons, "the paper's margin must be > 0")

    def judge(c: Comparison) -> _Judged:
        e = st.effect(c.a, c.b, level=0.90, floor=c.floor)
        wide = e if k == 1 else st.effect(c.a, c.b, level=1 - 0.10 / k, floor=c.floor)
        m, at_depth = c.scale(c.paper_effect), e.n >= depth
        known = m is not None and e.usable
        slack = m - max(-e.low, e.high) if known else -math.inf
        excess = max(wide.low, -wide.high) - m if known and at_depth else -math.inf
        emde = st.unit_equivalence_mde(e.dof, k) * e.se if e.usable else math.inf
        return _Judged(c, e, m, emde, at_depth, slack, excess)

    return _row(claim_id, "equivalent", [judge(c) for c in comparisons], depth, st.equivalence_mde)


def not_testable(claim_id: str, why: str) -> Row:
    """A claim this study cannot test, with the reason."""
    return Row(claim_id, "not testable", "not testable", notes=[why])


def scales(claims: Claims, runs: Runs, measures: Mapping[str, Callable], calibrated: bool,
           floors: Mapping[str, Noise] | None = None) -> dict[str, Scale]:
    """The claims file's scales on these runs: the calibrated headroom where `calibrated` and it has
    one, checked against its own pair's noise here (or its `floor`); else H measured here."""
    out = {}
    for name, s in claims.scales.items():
        up = values(runs, s.upper, measures[s.measure])
        lo = values(runs, s.lower, measures[s.measure]) if s.lower else None
        how = f"H = {s.upper}{' − ' + s.lower if s.lower else ''} on {s.measure}"
        if not (calibrated and s.calibrated is not None):
            out[name] = Scale.measured(up, lo, s.paper_headroom, f"{how}, measured on these runs")
            continue
        noise = st.pair_noise(st.paired(up, lo) if lo is not None else up) or (floors or {}).get(s.floor)
        out[name] = Scale.of(s.calibrated, noise, s.paper_headroom, f"{how}, calibrated (the ledger's footnote)")
    return out


def comparisons(spec: ClaimSpec, runs: Runs, measure: Callable | None, scale: Scale | None, floor: Noise | None = None,
                ctx: "Context | None" = None) -> list[Comparison]:
    """The claim's comparisons as per-seed values of its measure (b absent: 0 at a's seeds), at the
    row's `seeds` (a list, or `common`: the seeds both arms ran); a comparison's own measure, scale
    or floor is read from `ctx`."""
    seeds = spec.options.get("seeds")
    out = []
    for c in spec.comparisons:
        m = ctx.measures[c.measure] if c.measure else measure
        a, b = (values(runs, e, m) if e else None for e in (c.a, c.b))
        keep = set(a) & set(b) if seeds == "common" and b is not None else seeds
        if keep is not None:
            a, b = ({s: v for s, v in x.items() if s in keep} if x is not None else None for x in (a, b))
        out.append(Comparison(c.label, a, b if b is not None else {s: 0.0 for s in a}, c.effect,
                              ctx.scales[c.scale] if c.scale else scale, ctx.floors.get(c.floor) if c.floor else floor))
    return out


def unready(spec: ClaimSpec, runs: Runs, floors: Mapping | None, arms=None) -> Row | None:
    """A not-testable row when an arm did not run (`arms`, default the comparisons' experiments) or a
    noise floor the row names is not in `floors` (None: not checked), else None."""
    arms = sorted({e for c in spec.comparisons for e in (c.a, c.b) if e}) if arms is None else arms
    missing = [e for e in arms if not runs.get(e)]
    if missing:
        return not_testable(spec.id, f"no runs of {', '.join(missing)} here")
    named = (spec.options.get("floor"), *(c.floor for c in spec.comparisons))
    lacking = sorted({f for f in named if f and f not in floors}) if floors is not None else []
    if lacking:
        return not_testable(spec.id, f"no noise floor {', '.join(map(repr, lacking))} here "
                                     f"({', '.join(floors) or 'none'})")
    return None


def _judge(judge: Callable, spec: ClaimSpec, runs: Runs, ctx: "Context") -> Row:
    """A `greater` or `equivalent` row from its claims-file row: the row's measure, scale and floor."""
    floor = ctx.floors.get(spec.options.get("floor"))
    return unready(spec, runs, ctx.floors) or judge(spec.id, comparisons(
        spec, runs, ctx.measures.get(spec.measure), ctx.scales.get(spec.scale), floor, ctx), depth=ctx.depth)


@dataclass(frozen=True)
class Context:
    """What a claim kind reads besides its row and the runs."""
    measures: Mapping[str, Callable]
    scales: Mapping[str, Scale]
    depth: int
    floors: Mapping[str, Noise] = field(default_factory=dict)


KINDS = {"greater": partial(_judge, greater), "equivalent": partial(_judge, equivalent),
         "not testable": lambda spec, runs, ctx: not_testable(spec.id, spec.why)}


def evaluate(study: Study, runs: Runs, measures: Mapping[str, Callable], calibrated: bool = True,
             floors: Mapping[str, Noise] | None = None) -> list[Row]:
    """Every row of `study`'s claims file judged on `runs`, with its module's own `KINDS` and `MEASURES`;
    `calibrated`: whether its calibration applies here; `floors`: {name: a single-run comparison's noise}."""
    if study.claims is None:
        raise ValueError(f"study {study.name!r} has no claims file")
    measures = {**measures, **study.own("MEASURES")}
    kinds = {**KINDS, **study.own("KINDS")}
    for spec in study.claims.rows:
        if spec.kind not in kinds:
            raise ValueError(f"study {study.name}: claim {spec.id}: unknown kind {spec.kind!r} ({', '.join(kinds)})")
        for m in (spec.measure, *(c.measure for c in spec.comparisons)):
            if m and m not in measures:
                raise ValueError(f"study {study.name}: claim {spec.id}: unknown measure {m!r}")
    ctx = Context(measures, scales(study.claims, runs, measures, calibrated, floors), study.claims.depth,
                  dict(floors or {}))
    return [replace(kinds[s.kind](s, runs, ctx), claim=s.claim, source=s.source, paper=s.paper)
            for s in study.claims.rows]


def study_ledger(study: Study, params: Mapping, runs_dir) -> list[Row]:
    """The study's ledger on its runs under `runs_dir`, as its report stage renders it: its module's
    own `ledger(study, params, runs_dir)`, else its block's experiments at its seeds."""
    own = study.own("ledger")
    if callable(own):
        return own(study, params, runs_dir)
    block = study.block(params)
    runs = load_runs(runs_dir, block["experiments"], block.get("seeds", params["seeds"]))
    return evaluate(study, runs, MEASURES, calibrated=not stale_calibration(study, runs))


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:+.2f}"


def evidence(row: Row) -> str:
    """The row's numbers in one line: each comparison's effect, interval and scaled effect, and notes."""
    parts = [f"{c['label']} {_num(c['effect'])} [{_num(c['low'])}, {_num(c['high'])}] "
             f"vs scaled {_num(c['scaled_effect'])}, n={c['seeds']}" for c in row.comparisons]
    return "; ".join(parts + row.notes + ([f"needs {row.needs}"] if row.needs else []))


def ledger_json(title: str, rows: list[Row], power: dict | None = None) -> dict:
    """A ledger as its report's claims file holds it (`reports/<notebook>_claims.json`)."""
    return {"report": title, "claims": [{**asdict(r), "evidence": evidence(r)} for r in rows],
            **({"power": power} if power is not None else {})}


def ledger_frame(rows: list[Row]):
    """A ledger as a report shows it, one row per claim."""
    cols = ["claim", "verdict", "effect", "low", "high", "seeds", "scaled_effect", "sigma_d", "mde", "seeds_to_decide",
            "needs", "source"]
    return pd.DataFrame([{k: getattr(r, k) for k in cols} for r in rows], columns=cols)


# each verdict's colour, in every report's ledger and in the index
VERDICT_COLOURS = {"confirmed": "#1a7f37", "refuted": "#cf222e", "underpowered": "#6e7781",
                   "not expressible here": "#8250df", "inconclusive": "#9a6700",
                   "not testable": "#6e7781"}


def provenance(study: Study) -> str | None:
    """Where the study's calibrated headrooms come from, for the ledger's footnote (None: none calibrated)."""
    when = study.claims.calibration.get("when")
    return f"Calibrated headrooms: measured {when}." if when else None


def _details(text) -> str:
    """A long cell as its first clause, the rest behind an expandable detail."""
    if not isinstance(text, str) or len(text) <= 60:
        return "" if text is None else str(text)
    head = text.split(" (", 1)[0].split(": ", 1)[0][:60]
    return f"<details><summary>{html.escape(head)}…</summary>{html.escape(text)}</details>"


def ledger_style(frame, footnote: str | None = None):
    """A `ledger_frame` as every report shows it: each verdict in its colour, numbers rounded, no empty
    cell left as nan, long text expandable, text left-aligned; `footnote` under the table."""
    def css(v):
        if v not in VERDICT_COLOURS:
            return ""
        return f"color:{VERDICT_COLOURS[v]}" + ("" if v == "not testable" else ";font-weight:bold")

    formats = ({c: "{:+.2f}" for c in ("effect", "low", "high", "scaled_effect")}
               | {"sigma_d": "{:.2f}", "mde": "{:.2f}", "seeds": "{:.0f}", "seeds_to_decide": "{:.0f}"}
               | {"needs": _details, "evidence": _details})
    styler = (frame.style.hide(axis="index").set_properties(**{"text-align": "left"})
              .set_table_attributes('class="vlcp-ledger"')
              .format({c: f for c, f in formats.items() if c in frame}, na_rep="—"))
    if footnote:
        caption = {"selector": "caption", "props": "caption-side: bottom; text-align: left; font-size: 90%"}
        styler = styler.set_caption(html.escape(footnote)).set_table_styles([caption], overwrite=False)
    return styler.map(css, subset=["verdict"]) if "verdict" in frame else styler
