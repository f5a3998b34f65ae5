"""CTP's tables, Fig. 4 and claims ledger from our runs, which the notebook `ctp_tables` sets beside the paper's
(`studies/ctp/ctp_*.csv`); a run's final row is the model after the last task on the merged test pools."""
from vlcp.report.ctp.study import (ABLATION, DEFAULT_STUDY, FINAL, GROUPS, LABELS, PREFIX,  # noqa: F401
                                   describe_missing, final_row, flop_ratios, list_mismatch, mean_std, method_label,
                                   method_notes, missing_seeds, momentum_rows, reversed_rows, run_bwt, setting,
                                   single_seed_experiments, study_config, table1_experiments, table3_rows, time_ratios,
                                   values, with_long)
from vlcp.report.ctp.tables import (beside, bwt_table, curves, paper_by_label, paper_table1,  # noqa: F401
                                    paper_table2, plot_fig4, pm, ranking, single_table, start_and_end, stats_frame,
                                    table1, table2)
from vlcp.report.ctp.rows import (KINDS, MEASURES, floors, kendall_tau, ledger, ledger_runs, null_verdict,  # noqa: F401
                                  overhead, paired_cost, tau_null, time_flops_target)


def metric_sources(block: dict, params: dict) -> dict:
    """`vlcp report metrics`' seeds: Table 1's and the ablations'."""
    return {"seeds": sorted({*block["seeds"], *block.get("ablation_seeds", [])}) if "seeds" in block else None}
