"""`reports/index.html`: links to every report and the claims ledgers in one table."""
from __future__ import annotations

import html
import json
from pathlib import Path

from vlcp.utils import atomic_path

COLOURS = {"confirmed": "#1a7f37", "inconclusive": "#9a6700", "not confirmed": "#cf222e"}


def write_index(reports_dir: str | Path = "reports") -> Path:
    reports = Path(reports_dir)
    pages = sorted(p for p in reports.glob("*.html") if p.name != "index.html")
    rows = []
    for f in sorted(reports.glob("*_claims.json")):
        data = json.loads(f.read_text())
        for c in data["claims"]:
            colour = COLOURS.get(c["verdict"], "#000")
            rows.append(f"<tr><td>{html.escape(data['report'])}</td><td>{html.escape(c['claim'])}</td>"
                        f"<td style='color:{colour};font-weight:bold'>{html.escape(c['verdict'])}</td>"
                        f"<td>{html.escape(c['evidence'])}</td></tr>")
    links = "".join(f"<li><a href='{p.name}'>{p.stem}</a></li>" for p in pages)
    doc = f"""<!doctype html><html><head><meta charset="utf-8"><title>vlcp reports</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto}}td,th{{border:1px solid #ccc;padding:4px 8px;
vertical-align:top}}table{{border-collapse:collapse}}</style></head><body>
<h1>vlcp reports</h1>
<p>Every number comes from a run of this pipeline (<code>dvc repro</code>); paper numbers appear
only as labelled references inside the reports.</p>
<h2>Reports</h2><ul>{links}</ul>
<h2>Claims ledger</h2>
<table><tr><th>report</th><th>claim</th><th>verdict</th><th>evidence (mean ± std over seeds)</th></tr>
{''.join(rows) or '<tr><td colspan=4>no claims yet</td></tr>'}</table>
</body></html>
"""
    out = reports / "index.html"
    with atomic_path(out) as tmp:
        tmp.write_text(doc)
    return out
