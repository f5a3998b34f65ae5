"""CLL-CLIP (Yang et al., "Embracing Language Inclusivity and Diversity in CLIP through
Continual Language Learning", AAAI 2024) and TEIR, its token embedding initialisation and
regularisation; the base of every method of the language stream.

The model is `vlcp.models.token_embedding.CLLText`: CLIP's text encoder frozen, only the
expandable token embedding (and the loss temperature) trained. Per task (language):
- the vocab grows by the union with the language's own BPE vocab (stable ids; `oracle_vocab`:
  one vocab from every language's corpus, added at the first task: Table 3 (7));
- new rows are drawn from N(0, `init_std`²), or with TEIR's identical-distribution init from
  N(μ, σ²) of the current embedding matrix (scalar mean and std over all entries, as CLFM);
- the loss is γ_cm · InfoNCE(cached image features, text features) (multi-positive over
  equal items, as CLFM) + γ_cl · MSE(text features, cached English text features) (CLFM's
  element-mean MSE; the paper's eq. 3 is the same up to the constant D/2);
- TEIR's λ (eq. 6, `vlcp.train.optim.teir_scales`) scales each row's gradient (`grad_reg`) and
  weight decay (`decay_reg`) through `RowScaledAdamW` (or `RowScaledSGD`, the control);
  c_j counts earlier tasks whose texts used token j, CLIP's pretraining counting as one task
  for CLIP's own vocab; special tokens get λ = 0.
`teir: true` switches on all three parts (init, gradient, decay).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from vlcp.fields import check_ranges, ranged
from vlcp.errors import ConfigError
from vlcp.losses import clip_loss
from vlcp.methods import register
from vlcp.methods.base import Method
from vlcp.train.distributed import unwrap
from vlcp.train.optim import RowScaledAdamW, RowScaledSGD, param_groups, require_adamw, teir_scales
from vlcp.utils import derive_seed


@dataclass
class TextBatch:
    images: torch.Tensor   # float [B, D]: normalised cached image features
    english: torch.Tensor  # float [B, D]: cached English text features (the cross-lingual target)
    tokens: torch.Tensor   # long [B, ctx]: the foreign caption under the current vocab
    eot: torch.Tensor      # long [B]: end-of-text positions
    ids: torch.Tensor      # long [B]: example ids
    items: torch.Tensor    # long [B]: benchmark items (equal items are positives)
    langs: list[str]


@register
class CLLCLIP(Method):
    name = "cllclip"
    needs = frozenset({"languages", "token_table"})
    needs_task_id = False      # methods with per-language modules (†) say True

    @dataclass
    class Config:
        gamma_cm: float = ranged(0.01, ge=0)   # cross-modal InfoNCE weight (paper: 0.01)
        gamma_cl: float = ranged(1.0, ge=0)    # cross-lingual MSE weight (paper: 1)
        vocab_size: int = ranged(2000, ge=300, note="byte alphabet + merges")   # per-language BPE vocab (paper: 10K on ~600K captions)
        oracle_vocab: bool = False   # one vocab from all languages' corpora (Table 3 (7))
        teir: bool = False           # identical_init + grad_reg + decay_reg
        identical_init: bool = False
        grad_reg: bool = False
        decay_reg: bool = False
        init_std: float = ranged(0.02, gt=0)   # new rows without identical init: N(0, init_std²) (OpenCLIP)
        optimizer: str = "adamw"     # adamw | sgd
        train_tower: bool = False    # Fig. 4: train the whole text encoder, not only the embeddings

        def __post_init__(self):
            check_ranges(self)
            if self.teir:
                self.identical_init = self.grad_reg = self.decay_reg = True
            if self.gamma_cm == 0 and self.gamma_cl == 0:
                raise ConfigError("gamma_cm, gamma_cl: at least one objective needs a positive weight")
            if self.optimizer not in ("adamw", "sgd"):
                raise ConfigError(f"optimizer: must be adamw or sgd, got {self.optimizer!r}")

    def __init__(self, cfg=None, seed=0):
        super().__init__(cfg, seed)
        self.counts: torch.Tensor | None = None   # c_j: earlier tasks whose texts used token j
        self.used: torch.Tensor | None = None     # bool [V]: tokens the current task uses
        self.scale: torch.Tensor | None = None    # λ_j for the current task
        self.gen = torch.Generator().manual_seed(derive_seed(seed, "cllclip"))

    # -- the stream ----------------------------------------------------------------------
    def plan(self, languages: list[str]) -> list[list[str]]:
        """Languages per task: one each (joint training overrides)."""
        return [[lang] for lang in languages]

    def task_text_ids(self, ctx) -> torch.Tensor:
        """Examples whose texts define the task's token statistics (replay methods add their buffer)."""
        return ctx.pool

    # -- hooks ---------------------------------------------------------------------------
    def before_task(self, model, ctx):
        bpe = ctx.extras["bpe"]
        if self.cfg.oracle_vocab:
            add = [bpe["oracle"]] if ctx.task == 0 else []
        else:
            add = [bpe[lang] for lang in ctx.extras["languages"]]
        old = len(model.vocab)
        if self.counts is None:
            self.counts = torch.ones(old)        # CLIP's pretraining: one task for its own vocab
        for vocab, merges in add:
            model.vocab = model.vocab.merge(vocab, merges)
        n_new = len(model.vocab) - old
        w = model.embedding.weight.detach()
        mean, std = (w.mean().item(), w.std().item()) if self.cfg.identical_init else (0.0, self.cfg.init_std)
        model.embedding.expand(n_new, mean, std, self.gen)
        model.train_tower(self.cfg.train_tower)
        self.counts = torch.cat([self.counts, torch.zeros(n_new)])
        self.used = torch.zeros(len(model.vocab), dtype=torch.bool)
        self.used[model.vocab.ids_used(ctx.train_set.texts(self.task_text_ids(ctx)))] = True
        self.scale = teir_scales(self.used, self.counts, [model.vocab.sot, model.vocab.eot])

    def make_optimizer(self, model, cfg):
        require_adamw(cfg, "CLL-CLIP", "TEIR's row-scaled AdamW or SGD: method.optimizer")
        model = unwrap(model)
        emb = model.embedding.weight
        groups = [{"params": [emb], "weight_decay": 0.0}] + param_groups(model, cfg.weight_decay, exclude=[emb])
        rows = dict(row_param=emb, row_decay=cfg.weight_decay,
                    grad_scale=self.scale if self.cfg.grad_reg else None,
                    decay_scale=self.scale if self.cfg.decay_reg else None)
        if self.cfg.optimizer == "sgd":
            return RowScaledSGD(groups, lr=cfg.lr, fused=True, **rows)
        return RowScaledAdamW(groups, lr=cfg.lr, betas=(0.9, cfg.beta2), eps=1e-6, fused=True, **rows)

    def loss(self, model, batch, ctx):
        txt = self.text_features(model, batch, ctx)
        terms = {}
        if self.cfg.gamma_cm:
            scale = unwrap(model).logit_scale.exp()
            terms["cm"] = self.cfg.gamma_cm * clip_loss(batch.images, F.normalize(txt, dim=-1), scale, pair_ids=batch.items)
        if self.cfg.gamma_cl:
            terms["cl"] = self.cfg.gamma_cl * F.mse_loss(txt, self.cl_target(txt, batch, ctx))
        return terms

    def sample_losses(self, model, batch, ctx) -> torch.Tensor:
        """`loss`'s objective pair by pair, [B], whose mean is the sum of `loss`'s terms: pair i's
        cross-modal row (against the batch's negatives) and its own squared error to the target
        (CLL-CLIP Fig. 3's per-sample Fisher trace)."""
        txt = self.text_features(model, batch, ctx)
        out = txt.new_zeros(len(txt))
        if self.cfg.gamma_cm:
            scale = unwrap(model).logit_scale.exp()
            out = out + self.cfg.gamma_cm * clip_loss(batch.images, F.normalize(txt, dim=-1), scale,
                                                      pair_ids=batch.items, reduction="none")
        if self.cfg.gamma_cl:
            out = out + self.cfg.gamma_cl * (txt - self.cl_target(txt, batch, ctx)).pow(2).mean(1)
        return out

    def after_task(self, model, ctx):
        self.counts[self.used] += 1

    # -- what subclasses change ----------------------------------------------------------
    def text_features(self, model, batch, ctx) -> torch.Tensor:
        """Unnormalised text features of the batch's foreign captions (training)."""
        return model(batch.tokens, batch.eot)

    def cl_target(self, txt, batch, ctx) -> torch.Tensor:
        return batch.english

    @torch.no_grad()
    def encode_eval(self, model, lang: str, texts: list[str], oracle: bool = True) -> torch.Tensor:
        """Text features for evaluation in language `lang` (`oracle`: the language is known)."""
        return model(*model.encode(texts))

    # -- state ---------------------------------------------------------------------------
    def state_dict(self):
        return super().state_dict() | {"counts": self.counts, "gen": self.gen.get_state()}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.counts = state["counts"]
        self.gen.set_state(state["gen"])
