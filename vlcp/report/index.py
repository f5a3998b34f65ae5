"""`reports/index.html`: links to every report, each report's verdict counts and power, and one
sortable table of every claim of every paper."""
from __future__ import annotations

import html
import json
from pathlib import Path

from vlcp.report.ledger import VERDICT_COLOURS, VERDICTS
from vlcp.utils import atomic_path


SORT_JS = """<script>
document.querySelectorAll('table.sortable th').forEach((th, i) => th.addEventListener('click', () => {
  const body = th.closest('table').tBodies[0], rows = Array.from(body.rows), up = th.dataset.up !== '1';
  th.dataset.up = up ? '1' : '0';
  const key = r => { const t = r.cells[i].dataset.sort ?? r.cells[i].textContent; const n = parseFloat(t);
                     return isNaN(n) ? t.toLowerCase() : n; };
  rows.sort((a, b) => (key(a) > key(b) ? 1 : key(a) < key(b) ? -1 : 0) * (up ? 1 : -1));
  rows.forEach(r => body.appendChild(r));
}));
</script>"""


def _effect(c: dict) -> tuple[str, str]:
    if c.get("effect") is None:
        return "", ""
    fmt = lambda v: "∞" if v in (None, float("inf")) else "−∞" if v == float("-inf") else f"{v:+.2f}"  # noqa: E731
    return f"{c['effect']:+.2f} [{fmt(c.get('low'))}, {fmt(c.get('high'))}]", f"{c['effect']:.6f}"


def _power_cells(p: dict | None) -> str:
    cells = (f"{p['headroom_over_noise']:.1f}", f"{p['tasks_teaching']}/{p['tasks']}", p["seeds"]) if p else ("",) * 3
    return "".join(f"<td>{c}</td>" for c in cells)


def claim_rows(reports: Path) -> tuple[list[str], list[str]]:
    """(table rows of every claim, one summary row per report)."""
    rows, summary = [], []
    for f in sorted(reports.glob("*_claims.json")):
        data = json.loads(f.read_text())
        verdicts = [c["verdict"] for c in data["claims"]]
        for c in data["claims"]:
            colour = VERDICT_COLOURS.get(c["verdict"], "#000")
            shown, key = _effect(c)
            rank = VERDICTS.index(c["verdict"]) if c["verdict"] in VERDICTS else len(VERDICTS)
            rows.append(f"<tr><td>{html.escape(data['report'])}</td><td>{html.escape(c['claim'])}</td>"
                        f"<td>{html.escape(c.get('source') or '')}</td><td data-sort='{rank}' "
                        f"style='color:{colour};font-weight:bold'>{html.escape(c['verdict'])}</td>"
                        f"<td data-sort='{key}'>{html.escape(shown)}</td><td>{c.get('seeds') or ''}</td>"
                        f"<td>{html.escape(c['evidence'])}</td></tr>")
        summary.append(f"<tr><td>{html.escape(data['report'])}</td>"
                       + "".join(f"<td>{verdicts.count(v)}</td>" for v in VERDICTS) + f"<td>{len(verdicts)}</td>"
                       + _power_cells(data.get("power")) + "</tr>")
    return rows, summary


def write_index(reports_dir: str | Path = "reports") -> Path:
    reports = Path(reports_dir)
    pages = sorted(p for p in reports.glob("*.html") if p.name != "index.html")
    rows, summary = claim_rows(reports)
    links = "".join(f"<li><a href='{p.name}'>{p.stem}</a></li>" for p in pages)
    heads = "".join(f"<th>{v}</th>" for v in VERDICTS)
    doc = f"""<!doctype html><html><head><meta charset="utf-8"><title>vlcp reports</title>
<style>body{{font-family:sans-serif;max-width:1200px;margin:2em auto}}td,th{{border:1px solid #ccc;padding:4px 8px;
vertical-align:top}}table{{border-collapse:collapse}}th{{cursor:pointer}}</style></head><body>
<h1>vlcp reports</h1>
<p>Every number comes from a run of this pipeline (<code>dvc repro</code>); paper numbers appear
only as labelled references inside the reports.</p>
<h2>Reports</h2><ul>{links}</ul>
<h2>How much of each paper holds here</h2>
<p>Power (from each report's power table): <i>H/σ_d</i>, the headline metric's headroom over the noise of one
comparison (10 or more lets a study see effects of the papers' size); <i>teach</i>, the tasks on which the
fine-tune baseline learns beyond twice its noise; <i>seeds</i> behind the headline comparison.</p>
<table><tr><th>report</th>{heads}<th>claims</th><th>H/σ_d</th><th>teach</th><th>seeds</th></tr>
{''.join(summary) or f'<tr><td colspan={len(VERDICTS) + 5}>no claims yet</td></tr>'}</table>
<h2>Claims ledger</h2>
<p>Every claim of every paper (click a column to sort). <i>Effect</i>: the claim's difference with its confidence
interval, where its check has one; <i>evidence</i>: the numbers behind the verdict (mean ± std over seeds).</p>
<table class="sortable"><thead><tr><th>report</th><th>claim</th><th>paper</th><th>verdict</th><th>effect [interval]</th>
<th>seeds</th><th>evidence</th></tr></thead><tbody>
{''.join(rows) or '<tr><td colspan=7>no claims yet</td></tr>'}</tbody></table>
{SORT_JS}
</body></html>
"""
    out = reports / "index.html"
    with atomic_path(out) as tmp:
        tmp.write_text(doc)
    return out
