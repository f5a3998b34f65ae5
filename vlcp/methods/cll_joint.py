"""Joint multilingual training (the upper bound of Table 2, "Joint Learning: CLL-CLIP"): plain
CLL-CLIP (no TEIR: params.yaml's cll36-joint leaves `teir` off) on one task with every language,
the oracle vocab from all languages' corpora, the same total steps as the stream. CLFM's preset
JointTrain_CLL_CLIP is CLL_CLIP + `oracle_vocab` (methods.yaml), without the TEIR plugin."""
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
