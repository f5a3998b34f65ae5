"""Online EWC (Schwarz et al. 2018) on the language stream: CLL-CLIP's objectives plus the
online EWC penalty over the trainable parameters (the token embedding grows rows: its Fisher
and anchor are zero-padded, as CLFM flattens the embedding last and pads)."""
from vlcp.methods import register
from vlcp.methods.base import compose_configs
from vlcp.methods.cllclip import CLLCLIP
from vlcp.methods.ewc import EWC


@register
class CLLoEWC(EWC, CLLCLIP):
    name = "cll-oewc"
    Config = compose_configs(EWC.Config, CLLCLIP.Config)
