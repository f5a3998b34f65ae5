"""CTP+ER: CTP's losses over batches that mix the current task with ER's reservoir (the CTP
code's CTP_ER; vlcp's ER is compute-matched: `replay_fraction` of each batch is replayed)."""
from vlcp.methods import register
from vlcp.methods.base import compose_configs
from vlcp.methods.ctp import CTP
from vlcp.methods.er import ER


@register
class CTPER(CTP, ER):
    name = "ctp-er"
    Config = compose_configs(CTP.Config, ER.Config)
