"""EMA-Merge (Stojanovski et al. 2022; FoMo-in-Flux §5.2): train task t from the running merge
θ_{t−1}, then θ_t = w·θ_{t−1} + (1 − w)·θ'_t; θ_t is evaluated and task t+1 starts from it."""
from vlcp.methods import register
from vlcp.methods.merging import WeightMerge


@register
class EMAMerge(WeightMerge):
    name = "ema-merge"
    merge_with = "merge"
    train_from = "merge"
