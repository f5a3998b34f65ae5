"""Isolated fine-tuning (FoMo-in-Flux App. D.1, "Finetuning verification", Table 5): every task
trains alone from the pretrained θ0 and the trained model θ'_t is evaluated as it is; the model is
reset to θ0 before the next task. Over a dataset-incremental stream (`fomo.ordering: dataset`,
`fomo.num_tasks: 0`) each task is one dataset, so the model after task t is θ0 fine-tuned on
dataset t alone: its accuracy there against θ0's zero-shot accuracy is a row of Table 5."""
from vlcp.methods import register
from vlcp.methods.base import NoArgs
from vlcp.methods.merging import WeightMerge


@register
class Isolated(WeightMerge):
    name = "isolated"
    Config = NoArgs
    merge_with = None
    train_from = "init"
