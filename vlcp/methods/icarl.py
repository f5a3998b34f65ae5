"""iCaRL as the CTP paper compares it (train_ICARL.py): MoF's herding buffer (mean-of-feature
exemplars, per-task quotas, compute-matched replay) + LwF's distillation from the model as it
entered the task (per-sample raw image and text features over the feature dimensions and, for
ALBEF, MLM logits: CTP's train_ICARL.py uses the model's 'LWF' forward). No
nearest-mean-of-exemplars classifier: retrieval has no class head (as in the CTP code)."""
from vlcp.methods import register
from vlcp.methods.base import compose_configs
from vlcp.methods.lwf import LwF
from vlcp.methods.mof import MoF


@register
class ICaRL(MoF, LwF):
    name = "icarl"
    Config = compose_configs(MoF.Config, LwF.Config)
