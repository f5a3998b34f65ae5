"""CTP (Zhu et al., ICCV 2023): compatible momentum contrast + topology preservation.

Per task the method keeps a momentum model θc, re-initialised from θ(t−1) (the model entering
the task), and a frozen copy of θ(t−1). After every optimizer step

    θc ← m·θc + (1−m)·[w·θ(t−1) + (1−w)·θt]        (w = `prev_weight`; at task 0 an EMA of θt
                                                      with `momentum_task0`)

Loss = base (ITA + MLM) + L_CMC + L_c + L_s, every weight 1:
- L_CMC (`cmc`): current features against θc's features of the batch and a queue of
  `queue_size` older θc features per modality (never reset; `queue: false`: the batch only),
  τ = 0.07; plus soft distillation of MLM logits to θc's (T = 1) for models with an MLM head.
- L_c (`cross_topology`): KL(θ(t−1) ‖ θt) of the image→text and text→image similarity rows.
- L_s (`same_topology`): the same for image→image and text→text, the self-similarity masked to
  −1000 on both sides (`self_mask`).
Queue entries carry their pair's item id; a row's own item is left out of its negatives
(`vlcp.losses.topology.queue_own_item`). The queues are checkpointed; θc and θ(t−1) are rebuilt
at `before_task`.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from vlcp.fields import check_ranges, ranged
from vlcp.losses import soft_distill
from vlcp.losses.topology import momentum_contrast, topology_kl, update_queue
from vlcp.methods import register
from vlcp.methods.base import Batch, Method, TaskContext, base_terms, frozen_copy, model_outputs


def item_ids(batch: Batch, ctx: TaskContext) -> torch.Tensor:
    """The item of each pair of the batch (long [B]): the train set's text index of the pair
    (`image_text`), one per emoji whatever its style (a P9D item has one image). Without a train
    set that maps pairs to texts (a context built by hand) each pair is its own item."""
    image_text = getattr(ctx.train_set, "image_text", None)
    if image_text is None:
        return batch.ids
    return image_text[batch.ids.to(image_text.device)]


def momentum_update(target: list[torch.Tensor], sources: list[tuple[float, list[torch.Tensor]]]) -> None:
    """target ← Σ_k w_k·source_k in place (weights sum to 1); the first source must be `target`
    itself. One scaling and one fused multiply-add pass per other source, no temporaries (allocating
    a copy of the model per source cost ~10× the arithmetic on CPU)."""
    (w0, first), *rest = sources
    if first is not target:
        raise ValueError("momentum_update: the first source must be the target itself")
    torch._foreach_mul_(target, w0)
    for w, src in rest:
        if w:
            torch._foreach_add_(target, src, alpha=w)


@register
class CTP(Method):
    name = "ctp"
    budget_probe_task = 1   # the previous model (topology, the previous-task momentum update) from the second task on

    @dataclass
    class Config:
        momentum: float = ranged(0.9, ge=0, le=1)   # m for tasks >= 1 (supplement Table 2: 0.7 ... 0.995)
        momentum_task0: float = ranged(0.995, ge=0, le=1)   # m at task 0 (plain EMA; 0.9 made the CTP loss diverge)
        prev_weight: float = ranged(0.5, ge=0, le=1)   # share of (1 - m) given to θ(t-1): 0.5 compatible, 1 only θ(t-1), 0 only θt
        queue_size: int = ranged(256, ge=0)   # per modality; 0 = no queue
        cmc: bool = True                 # L_CMC: momentum contrast (+ MLM distillation to θc)
        cross_topology: bool = True      # L_c
        same_topology: bool = True       # L_s
        self_mask: bool = True           # L_s: mask the self-similarity with -1000
        queue: bool = True               # use the queue in L_CMC (Table 3's "w/o Q": false)

        def __post_init__(self):
            check_ranges(self)

    def __init__(self, cfg=None, seed=0):
        super().__init__(cfg, seed)
        self.momentum_model: torch.nn.Module | None = None
        self.ref: torch.nn.Module | None = None
        self.task = 0
        self.queues: tuple[torch.Tensor, torch.Tensor] | None = None
        self.queue_ids: torch.Tensor | None = None   # long [K]: each entry's item, −1 for none (the initial entries)
        self.ptr = 0

    def _use_queue(self) -> bool:
        return self.cfg.queue and self.cfg.queue_size > 0

    def before_task(self, model, ctx):
        super().before_task(model, ctx)
        self.momentum_model = frozen_copy(model) if self.cfg.cmc else None
        self.ref = frozen_copy(model) if ctx.task > 0 and (self.cfg.cross_topology or self.cfg.same_topology
                                                  or (self.cfg.cmc and self.cfg.prev_weight > 0)) else None
        self.task = ctx.task

    def _queues(self, like: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The (image, text) queues, created at first use: random unit vectors (seeded, so
        every rank starts with the same queues), as in the CTP code; their item ids −1 (no
        item; also for queues restored from a checkpoint written without ids)."""
        if not self._use_queue():
            return None, None
        if self.queues is None:
            g = torch.Generator().manual_seed(self.seed)
            self.queues = tuple(F.normalize(torch.randn(self.cfg.queue_size, like.shape[1], generator=g), dim=1)
                                .to(like.device) for _ in range(2))
        if self.queue_ids is None:
            self.queue_ids = torch.full((len(self.queues[0]),), -1, dtype=torch.long, device=self.queues[0].device)
        return self.queues

    def loss(self, model, batch, ctx):
        out = model_outputs(model, batch)
        terms = base_terms(model, batch, out)
        img, txt, scale = out[0], out[1], out[2]
        if self.momentum_model is not None:
            with torch.no_grad():
                mom = model_outputs(self.momentum_model, batch)
            items = item_ids(batch, ctx).to(img.device)
            queues = self._queues(img)
            ids = (items, self.queue_ids) if queues[0] is not None else (None, None)
            terms["cmc"] = momentum_contrast(img, txt, mom[0], mom[1], scale, *queues, *ids)
            if batch.mlm_input is not None:
                terms["mlm_distill"] = soft_distill(out.mlm_logits, mom.mlm_logits)
            ctx.extras["ctp_momentum_features"] = (mom[0], mom[1], items)
        if self.ref is not None and (self.cfg.cross_topology or self.cfg.same_topology):
            with torch.no_grad():
                ref_img, ref_txt = self.ref(batch.images, batch.tokens)[:2]
            if self.cfg.cross_topology:
                terms["topo_cross"] = (topology_kl(img, txt, ref_img, ref_txt, scale)
                                       + topology_kl(txt, img, ref_txt, ref_img, scale)) / 2
            if self.cfg.same_topology:
                m = self.cfg.self_mask
                terms["topo_same"] = (topology_kl(img, img, ref_img, ref_img, scale, m)
                                      + topology_kl(txt, txt, ref_txt, ref_txt, scale, m)) / 2
        return terms

    @torch.no_grad()
    def after_step(self, model, batch, ctx):
        super().after_step(model, batch, ctx)
        feats = ctx.extras.pop("ctp_momentum_features", None)
        if self.momentum_model is None:
            return
        if feats is not None and self._use_queue():  # enqueue the features this step contrasted against, and their items
            ptr = update_queue(self.queues[0], self.ptr, feats[0])
            update_queue(self.queues[1], self.ptr, feats[1])
            update_queue(self.queue_ids, self.ptr, feats[2])
            self.ptr = ptr
        mom = list(self.momentum_model.parameters())
        cur = [p.detach() for p in model.parameters()]
        if self.task == 0:   # no θ(t-1) yet: EMA of the current model
            m = self.cfg.momentum_task0
            momentum_update(mom, [(m, mom), (1 - m, cur)])
        else:
            m, w = self.cfg.momentum, self.cfg.prev_weight
            prev = list(self.ref.parameters())
            momentum_update(mom, [(m, mom), ((1 - m) * w, prev), ((1 - m) * (1 - w), cur)])

    def extra_cost(self) -> float:
        """θc's forward (with MLM) and θ(t-1)'s feature forward: about 1/3 of a training step each."""
        return (1 / 3 if self.cfg.cmc else 0) + (1 / 3 if self.cfg.cross_topology or self.cfg.same_topology else 0)

    def state_dict(self):
        ids = None if self.queue_ids is None else self.queue_ids.clone()
        return super().state_dict() | {"queues": self.queues, "queue_ids": ids, "ptr": self.ptr}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.queues, self.ptr = state["queues"], state["ptr"]
        self.queue_ids = state.get("queue_ids")   # absent in a checkpoint written before item ids: −1 at first use
