"""FT-Merge (Finetune-merge, after Ilharco et al. 2022's patching; FoMo-in-Flux §5.2): train
task t from the previous merge θ_{t−1}, then θ_t = w·θ0 + (1 − w)·θ'_t; θ_t is evaluated and task
t+1 starts from it."""
from vlcp.methods import register
from vlcp.methods.merging import WeightMerge


@register
class FTMerge(WeightMerge):
    name = "ft-merge"
    merge_with = "init"
    train_from = "merge"
