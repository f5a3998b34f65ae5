"""Each paper notebook's "Deviations from the paper" table: the settings its paper states
(`PaperValue`) that the active profile's resolved configs do not match, then the differences that are
not one config value (`Deviation`). On the `paper` profile every stated value must match, unless its
entry says why not (`at_paper_scale`)."""
from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pandas as pd

from vlcp.config import resolve_experiment
from vlcp.errors import VlcpError, unknown_name
from vlcp.report.paper import KINDS, Deviation, PaperValue, deviations, paper_values, studies

__all__ = ["DERIVATIONS", "DEVIATIONS", "KINDS", "PAPER_VALUES", "STUDIES", "Deviation", "PaperValue",
           "deviations_markdown", "deviations_table", "paper_value_rows", "resolved"]

STUDIES = tuple(s for s in studies() if paper_values(s))   # the paper studies: those whose paper states settings


def _languages(c: dict) -> int:
    return c["data"]["num_languages"] or 36   # 0: the whole stream, the benchmark's 36 languages


# The values a PaperValue's `derive` names: each computed from one resolved experiment config (a dict).
DERIVATIONS = MappingProxyType({
    "samples_seen": lambda c: c["train"]["steps"] * c["train"]["batch_size"],
    "samples_per_task": lambda c: c["fomo"]["steps_per_task"] * c["train"]["batch_size"],
    "steps_per_task": lambda c: int(c["fomo"]["steps_per_task"] * c["fomo"]["compute_scale"] + 1e-9),
    "total_steps": lambda c: c["fomo"]["num_tasks"] * int(c["fomo"]["steps_per_task"] * c["fomo"]["compute_scale"]),
    "languages": _languages,
    "steps_per_language": lambda c: round(c["train"]["steps"] / _languages(c)),
    "pretrained_source": lambda c: ("OpenAI" if "openai" in str(c["model"]["pretrained"]).lower()
                                    else c["model"]["pretrained"]),
    "temperature_source": lambda c: "θ0's" if c["fomo"]["temperature"] is None else c["fomo"]["temperature"],
})

PAPER_VALUES = MappingProxyType({s: paper_values(s, derivations=DERIVATIONS) for s in STUDIES})
DEVIATIONS = MappingProxyType({s: deviations(s) for s in STUDIES})


def resolved(pv: PaperValue, cfg: dict) -> Any:
    """Our value of `pv`'s setting in the resolved experiment config `cfg` (a dict)."""
    if pv.derive:
        return DERIVATIONS[pv.derive](cfg)
    node: Any = cfg
    for key in pv.field.split("."):
        if not isinstance(node, dict) or key not in node:
            raise VlcpError(f"deviations: {pv.experiment}: no field {pv.field!r} in the resolved config")
        node = node[key]
    return node


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def paper_value_rows(params: dict, study: str) -> list[dict]:
    """Every PaperValue of `study` against the active profile's resolved config."""
    rows, cache = [], {}
    for pv in PAPER_VALUES[study]:
        if pv.experiment not in (params.get("experiments") or {}):
            raise VlcpError(f"deviations: {study}: experiment {pv.experiment!r} is not in params.yaml")
        if pv.experiment not in cache:
            cache[pv.experiment] = resolve_experiment(params, pv.experiment).to_dict()
        ours = resolved(pv, cache[pv.experiment])
        rows.append({"kind": "scale", "what": f"{pv.field} ({pv.experiment})", "paper": _fmt(pv.paper),
                     "ours": _fmt(ours), "matches": pv.matches(ours), "why": pv.why or pv.at_paper_scale,
                     "rows": pv.rows, "source": pv.source})
    return rows


def deviations_table(params: dict, study: str) -> pd.DataFrame:
    """The notebook's "Deviations from the paper" table: the stated settings that the active
    profile does not match, then every listed deviation."""
    if study not in STUDIES:
        raise VlcpError("deviations: " + unknown_name("study", study, STUDIES, "vlcp/report/studies/ holds them"))
    rows = [r for r in paper_value_rows(params, study) if not r.pop("matches")]
    rows += [{"kind": d.kind, "what": d.what, "paper": "", "ours": "", "why": d.why, "rows": d.rows,
              "source": d.source} for d in DEVIATIONS[study]]
    return pd.DataFrame(rows, columns=["kind", "what", "paper", "ours", "why", "rows", "source"])


def deviations_markdown(params: dict, study: str) -> str:
    """`deviations_table` as the notebooks show it: a one-line intro, then a markdown table (or "none")."""
    table = deviations_table(params, study)
    intro = (f"Generated from `vlcp/report/studies/{study}/paper_values.yaml` and `deviations.yaml`; scale rows "
             f"compare the active profile (**{params.get('profile', 'tiny')}**) with the paper's stated setting.")
    if table.empty:
        return intro + "\n\nNo deviation is listed for this study."
    cell = lambda v: " ".join(str(v).split()).replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return intro + "\n\n" + "\n".join(lines)
