"""ER on the language stream: CLL-CLIP's objectives over batches that mix the current
language with a reservoir of earlier examples (vlcp's compute-matched ER: `replay_fraction` of
each batch is replayed; CLFM doubled the batch instead). Replayed examples are re-tokenised with
the current vocab and count in TEIR's token statistics (as CLFM's token mapping includes the
memory)."""
import torch

from vlcp.methods import register
from vlcp.methods.base import compose_configs
from vlcp.methods.cllclip import CLLCLIP
from vlcp.methods.er import ER


@register
class CLLER(ER, CLLCLIP):
    name = "cll-er"
    needs = frozenset({"languages", "token_table", "replay"})   # (ER comes first in the MRO)
    Config = compose_configs(ER.Config, CLLCLIP.Config)

    def task_text_ids(self, ctx):
        return torch.cat([ctx.pool, self.buffer.ids])
