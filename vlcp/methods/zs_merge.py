"""ZS-Merge (ZeroShot-merge, FoMo-in-Flux §5.2): every task trains from the pretrained θ0, then
θ_t = w·θ_{t−1} + (1 − w)·θ'_t (θ_{−1} = θ0); θ_t is evaluated, and the model is reset to θ0
before the next task."""
from vlcp.methods import register
from vlcp.methods.merging import WeightMerge


@register
class ZSMerge(WeightMerge):
    name = "zs-merge"
    merge_with = "merge"
    train_from = "init"
