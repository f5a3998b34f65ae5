"""What a study found, in plain words: a few sentences written from its claims file (`ledger_json`),
which `render_notebook` shows first in the report (the cell tagged `findings`)."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

DECIDED = ("confirmed", "refuted")
NOT_EXPRESSIBLE = "not expressible here"   # no headroom here for the paper's effect: no seed count decides it
TO_DECIDE = ("more seeds (`seeds`, `report.<study>.spread` in params.yaml), the `long` profile "
             "(`dvc repro long/dvc.yaml`) or the `small` profile on a GPU")


def measured(row: dict) -> str:
    """The row's effect and 95 % interval, in points of its metric to one decimal, and its seeds."""
    if row.get("effect") is None:
        return "not measured"
    ci = f" [{row['low']:+.1f}, {row['high']:+.1f}]" if row.get("low") is not None else ""
    return f"{row['effect']:+.1f}{ci} over {row['seeds']} seed{'s' * (row['seeds'] != 1)}"


def power_sentence(power: dict | None) -> str | None:
    """The headline's power in words, where the claims file has a power entry with H/σ_d."""
    if not power or power.get("headroom_over_noise") is None:
        return None
    taught = (f"; {power['tasks_teaching']:g} of {power['tasks']:g} tasks teach"
              if power.get("tasks") else "")
    return (f"The headline's headroom is {power['headroom_over_noise']:.1f} × the noise of one comparison "
            f"(H/σ_d; about 10 or more lets the main claims decide){taught}.")


def findings(claims: dict, closest: int = 3) -> str:
    """Markdown: the verdict counts, the headline (the ledger's first row) beside the paper's, what was
    decided, and what these runs cannot decide with what would decide it."""
    rows = claims["claims"]
    if not rows:
        return f"**{claims['report']}**: no claim was judged on these runs."
    counts = Counter(r["verdict"] for r in rows)
    head = rows[0]
    out = [f"**At this scale, {len(rows)} claim{'s' * (len(rows) != 1)}**: "
           + ", ".join(f"{n} {v}" for v, n in counts.most_common()) + ".",
           f"**The headline.** The paper: {head.get('paper') or head['claim']}. Ours: {head['claim']}: "
           f"{measured(head)}, **{head['verdict']}**."]
    out += [f"- **{r['verdict']}**: {r['claim']} ({measured(r)})" for r in rows[1:] if r["verdict"] in DECIDED]
    open_rows = sorted((r for r in rows if r["verdict"] == "underpowered"),
                       key=lambda r: r.get("seeds_to_decide") or float("inf"))
    if open_rows:
        near = [f"{r['claim']} (about {r['seeds_to_decide']:.0f} seeds per arm; ran {r['seeds']})"
                for r in open_rows[:closest] if r.get("seeds_to_decide")]
        out.append(f"**Not decided here**: {len(open_rows)} claim{'s' * (len(open_rows) != 1)} underpowered"
                   + (f"; the closest to deciding: {'; '.join(near)}" if near else "")
                   + f". What would decide them: {TO_DECIDE}.")
    if counts[NOT_EXPRESSIBLE]:
        out.append(f"**Not expressible here**: {counts[NOT_EXPRESSIBLE]} claim{'s' * (counts[NOT_EXPRESSIBLE] != 1)} "
                   "whose effect is a share of a headroom this benchmark does not have (H ≤ 0 as measured), so no "
                   "number of seeds decides them; the papers' own data and models could.")
    sentence = power_sentence(claims.get("power"))
    return "\n\n".join(out + ([sentence] if sentence else []) + [terms()])


def findings_section(claims_file: str | Path) -> str:
    """A report's first section, "What this study found", from the claims file its ledger cell wrote."""
    claims = json.loads(Path(claims_file).read_text(encoding="utf-8"))
    return "## What this study found\n\n" + findings(claims)


def terms() -> str:
    """The box every report shares under its findings: headroom, σ_d, MDE and the verdict words."""
    text = (Path(__file__).with_name("terms.md")).read_text(encoding="utf-8")
    return f"<details><summary>The terms of these reports</summary>\n\n{text}\n</details>"


def lead_with_findings(cells: list) -> list:
    """`cells` with those tagged `findings` moved to just after the first (the report's title)."""
    def tagged(cell) -> bool:
        return "findings" in cell.get("metadata", {}).get("tags", [])
    rest = [c for c in cells if not tagged(c)]
    return rest[:1] + [c for c in cells if tagged(c)] + rest[1:]
