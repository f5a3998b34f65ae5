"""The papers' transcribed tables (`paper_table`), kept importable here for the notebooks; the
tables live in each study's folder, `vlcp/report/studies/<study>/` (vlcp.report.paper)."""
from vlcp.report.paper import paper_table

__all__ = ["paper_table"]
