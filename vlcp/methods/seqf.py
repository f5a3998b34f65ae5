"""SeqF: sequential fine-tuning on each task's data only (the lower bound)."""
from vlcp.methods import register
from vlcp.methods.base import Method


@register
class SeqF(Method):
    name = "seqf"
