"""Joint multilingual training (the upper bound of Table 2): one task with every language,
the oracle vocab from all languages' corpora, the same total steps as the stream."""
from dataclasses import dataclass

from vlcp.methods import register
from vlcp.methods.cllclip import CLLCLIP


@register
class CLLJoint(CLLCLIP):
    name = "cll-joint"

    @dataclass
    class Config(CLLCLIP.Config):
        oracle_vocab: bool = True

    def plan(self, languages):
        return [list(languages)]
