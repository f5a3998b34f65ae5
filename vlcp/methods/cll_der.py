"""DER (Buzzega et al. 2020) on the language stream: ER whose buffer also keeps the model's own
text feature of each example at insertion time; replayed examples are pulled (MSE, the
cross-lingual term's weight) towards those stored features instead of the English ones.
Under DDP the batch's rows are told apart by their global position (current rows first, then
replayed ones), and the stored features are all-gathered, so every rank keeps the same buffer."""
import torch

from vlcp.losses import gather_features
from vlcp.methods import register
from vlcp.methods.cll_er import CLLER
from vlcp.train.distributed import rank_and_size


@register
class CLLDER(CLLER):
    name = "cll-der"

    def __init__(self, cfg=None, seed=0):
        super().__init__(cfg, seed)
        self.stored: dict[int, torch.Tensor] = {}    # example id -> text feature at insertion

    def text_features(self, model, batch, ctx):
        txt = super().text_features(model, batch, ctx)
        ctx.extras["features"] = txt.detach()
        return txt

    def cl_target(self, txt, batch, ctx):
        target = batch.english.clone()
        n_current = len(ctx.extras.get("current_ids", batch.ids))   # global; (no replay outside training)
        start = rank_and_size()[0] * len(batch.ids)                   # this rank's first global row
        for r, i in enumerate(batch.ids.tolist()):
            if start + r >= n_current and i in self.stored:
                target[r] = self.stored[i].to(target)
        return target

    def after_step(self, model, batch, ctx):
        current = ctx.extras["current_ids"]            # global ids of the global batch's first rows
        feats = gather_features(ctx.extras.pop("features"))   # the global batch's rows, in order
        super().after_step(model, batch, ctx)        # reservoir update
        kept = set(self.buffer.ids.tolist())
        for r, i in enumerate(current.tolist()):
            if i in kept:
                self.stored[i] = feats[r].cpu()
        self.stored = {i: f for i, f in self.stored.items() if i in kept}

    def state_dict(self):
        return super().state_dict() | {"stored": self.stored}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.stored = state["stored"]
