"""CTP's tables, Fig. 4 and claims ledger from our runs (pure functions of results dicts; the
notebook `ctp_tables` lays them out beside the paper's numbers, from `studies/ctp/ctp_*.csv`).

What is read from a run's `results.json`:
- `cumulative[i]["test"]`: the model after task i on the merged test pools of tasks <= i (CTP's
  protocol): TR@K, IR@K, Rm and mAP@N with CTP's "hits" normaliser (`mAP@N`) and the standard
  min(N, |relevant|) one (`mAP_std@N`). The final row of a run is `cumulative[-1]["test"]`.
- `final_cumulative[i]`: the final model on the pool of tasks <= i (CTP's eval.py "BWT":
  sum_i (m(θ_i, D<=i) - m(θ_T, D<=i)) / (T - 1), positive = forgetting).
- `train[i]["seconds"]` (training wall time, evaluation excluded) and `flops_per_step` (per task,
  with the method's per-task passes: `report.results.flops_per_step`).

Mean ± std over seeds: sample std (ddof = 1); one seed shows no ±. Time column: per seed, a
method's total training seconds / SeqF's of the same seed; FLOPs column: FLOPs per step / SeqF's.
The ledger: the rows of `studies/ctp/claims.yaml`, judged by `vlcp.report.ledger` with this
package's measures, kinds, floor and `ledger` hook (`vlcp.report.ctp.rows`).
"""
from vlcp.report.ctp.study import (ABLATION, COMPONENTS, DEFAULT_STUDY, FINAL, GROUPS, LABELS, PAPER_CTP_HOURS,
                                   PAPER_SEQF_HOURS, PAPER_TIME_TARGET, PREFIX, REV_PREFIX, SWITCHES, SWITCH_INDEX,
                                   TABLE3_ROWS, by_seed, component_pairs, describe_missing, final_row, flop_ratios,
                                   group_of, list_mismatch, load_available, mean_std, method_label, method_notes,
                                   momentum_rows, reversed_rows, run_bwt, seed_values, setting, single_seed_experiments,
                                   study_config, switch_label, table1_experiments, table2_rows, table3_rows,
                                   time_ratios, train_seconds, values, with_long, with_table1_seeds)
from vlcp.report.ctp.tables import (beside, bwt_table, paper_by_label, paper_table1, paper_table2, pm, ranking,
                                    single_table, start_and_end, stats_frame, table1, table2)
from vlcp.report.ctp.figures import curves, plot_fig4
from vlcp.report.ctp.cost import overhead, paired_cost, time_flops_target, time_ratio_by_seed
from vlcp.report.ctp.rows import (KINDS, MEASURES, floors, kendall_tau, ledger, ledger_runs, noise_floor,
                                  null_verdict, stale_calibration, tau_null, time_ratio)
from vlcp.report.paper import paper_table   # the notebook's ctp.paper_table(...): reachable here before the split

__all__ = ["ABLATION", "beside", "bwt_table", "by_seed", "component_pairs", "COMPONENTS",
           "curves", "DEFAULT_STUDY", "describe_missing", "FINAL", "final_row", "floors", "flop_ratios", "group_of",
           "GROUPS", "kendall_tau", "KINDS", "LABELS", "ledger", "ledger_runs", "list_mismatch", "load_available",
           "mean_std", "MEASURES", "method_label", "method_notes", "momentum_rows", "noise_floor", "null_verdict",
           "overhead", "paired_cost", "paper_by_label", "PAPER_CTP_HOURS",
           "PAPER_SEQF_HOURS", "paper_table",
           "paper_table1", "paper_table2", "PAPER_TIME_TARGET", "plot_fig4", "pm", "PREFIX", "ranking", "REV_PREFIX",
           "reversed_rows", "run_bwt", "seed_values", "setting", "single_seed_experiments", "single_table",
           "stale_calibration", "start_and_end", "stats_frame", "study_config", "SWITCH_INDEX", "switch_label",
           "SWITCHES", "table1", "table1_experiments", "table2", "table2_rows", "TABLE3_ROWS", "table3_rows",
           "tau_null", "time_flops_target", "time_ratio", "time_ratio_by_seed", "time_ratios", "train_seconds", "values", "with_long",
           "with_table1_seeds"]


def metric_sources(block: dict, params: dict) -> dict:
    """`vlcp report metrics`' seeds: Table 1's and the ablations'."""
    return {"seeds": sorted({*block["seeds"], *block.get("ablation_seeds", [])})} if "seeds" in block else {"seeds": None}
