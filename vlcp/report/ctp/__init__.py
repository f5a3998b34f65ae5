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

Definitions used by the tables and the ledger (all stated again in the notebook):
- Mean ± std over seeds: sample std (ddof = 1); one seed shows no ±.
- Time column: per seed, a method's total training seconds / SeqF's of the same seed (the same
  run environment), then mean ± std over seeds; FLOPs column: FLOPs per step / SeqF's.
- Verdicts (`vlcp.report.claims`): each claim is an effect (a − b with its 95 % interval, paired
  by seed for Table 1's seeds; one run each with sd = √2 × the pooled Table 1 seed std of Rm for
  the single-seed tables, whose rows Table 1 also runs read every seed it ran them at) judged
  against the paper's effect scaled to our headroom (`powered`, through `Scale`: the paper's Rm
  difference ÷ its JointT − SeqF × ours, `report.ctp.power`), or by `greater_verdict` (the
  JointT–SeqF gap), an equivalence within a stated margin (`equivalent_verdict`), a cost target
  (`target_verdict`), or `not_testable` with the reason; the reversed-order ranking by a
  permutation test (`null_verdict`, here).
"""
from vlcp.report.ctp.study import (ABLATION, COMPONENTS, DEFAULT_STUDY, FINAL, GROUPS, LABELS, PAPER_CTP_HOURS,
                                   PAPER_GAP, PAPER_HOURS_RESOLUTION, PAPER_JOINTT, PAPER_SEQF_HOURS,
                                   PAPER_TIME_TARGET, PREFIX, REV_PREFIX, SWITCHES, SWITCH_INDEX, TABLE3_ROWS, by_seed,
                                   component_pairs, describe_missing, final_row, flop_ratios, group_of, list_mismatch,
                                   load_available, mean_std, method_label, method_notes, momentum_rows, paper_headroom,
                                   paper_rm, reversed_rows,
                                   run_bwt, seed_values, setting, single_seed_experiments, study_config, switch_label,
                                   table1_experiments, table2_rows, table3_rows, time_ratios, train_seconds, values,
                                   with_long, with_table1_seeds)
from vlcp.report.ctp.tables import (beside, bwt_table, paper_by_label, paper_table1, paper_table2, pm, ranking,
                                    single_table, start_and_end, stats_frame, table1, table2)
from vlcp.report.ctp.figures import curves, plot_fig4
from vlcp.report.ctp.claims import (PAPER_M_DEFAULT_RM, PAPER_M_RANGE, Scale, blocks, claim_beats_all, claim_component,
                                    claim_first_in_groups, claim_gap, claim_groups, claim_momentum_insensitive,
                                    claim_ranking, claim_time_flops, claim_time_overhead, claim_time_target,
                                    group_means, kendall_tau, ledger, momentum_margin, noise_floor, null_verdict,
                                    overhead, paired_cost, paired_effect, powered_claim, sd_source_of, study_scale,
                                    tau_null, time_ratio_by_seed, weakest)
from vlcp.report.paper import paper_table   # the notebook's ctp.paper_table(...): reachable here before the split

__all__ = ["ABLATION", "COMPONENTS", "DEFAULT_STUDY", "FINAL", "GROUPS", "LABELS", "PAPER_CTP_HOURS", "PAPER_GAP",
           "PAPER_HOURS_RESOLUTION", "PAPER_JOINTT", "PAPER_M_DEFAULT_RM", "PAPER_M_RANGE", "PAPER_SEQF_HOURS",
           "PAPER_TIME_TARGET", "PREFIX", "REV_PREFIX", "SWITCHES", "SWITCH_INDEX", "TABLE3_ROWS", "beside",
           "blocks", "bwt_table", "by_seed", "claim_beats_all", "claim_component", "claim_first_in_groups", "claim_gap",
           "claim_groups", "claim_momentum_insensitive", "claim_ranking", "claim_time_flops", "claim_time_overhead",
           "claim_time_target", "component_pairs", "curves", "describe_missing", "final_row", "flop_ratios",
           "group_means", "group_of", "kendall_tau", "ledger", "list_mismatch", "load_available", "mean_std",
           "method_label", "method_notes", "momentum_margin", "momentum_rows", "noise_floor", "null_verdict",
           "overhead", "paired_cost", "paired_effect", "paper_by_label", "paper_headroom", "paper_rm", "paper_table",
           "paper_table1", "paper_table2", "powered_claim", "Scale", "study_scale",
           "plot_fig4", "pm", "ranking", "reversed_rows", "run_bwt", "sd_source_of", "seed_values", "setting",
           "single_seed_experiments", "single_table", "start_and_end", "stats_frame", "study_config", "switch_label",
           "table1", "table1_experiments", "table2", "table2_rows", "table3_rows", "tau_null", "time_ratio_by_seed",
           "time_ratios", "train_seconds", "values", "weakest", "with_long", "with_table1_seeds"]


def metric_sources(block: dict, params: dict) -> dict:
    """`vlcp report metrics`' seeds: Table 1's and the ablations'."""
    return {"seeds": sorted({*block["seeds"], *block.get("ablation_seeds", [])})} if "seeds" in block else {"seeds": None}
