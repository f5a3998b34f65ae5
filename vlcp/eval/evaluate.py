"""Evaluate a CLIP model on a benchmark's evaluation sets after each task.

Per task i it fills:
- `matrix[set][metric][i][j]`: cross-modal retrieval (and zero-shot accuracy) on task j's
  items of `set` ("test": unseen items in the training styles; "unseen_style": every item in the
  held-out styles), for every j (including j > i);
- `cumulative[i]`: CTP's cumulative pools (tasks <= i): TR/IR@K, Rm on "test", and multi-modal
  mAP@N (query vs gallery, positives = same class) in both normalisers. The multi-modal
  feature is ALBEF's fused [CLS] of (image, its caption) for models with a fusion encoder, and
  the normalised sum of the normalised image and text features for CLIP.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from tqdm import tqdm

from vlcp.config import EvalCfg
from vlcp.data.benchmark import PairSet
from vlcp.data.procedural import PROCEDURAL_TASKS, render_scenes, render_shapes
from vlcp.errors import NonFiniteError, require_finite
from vlcp.eval.retrieval import cross_modal, mean_average_precision
from vlcp.eval.zeroshot import topk_accuracy, zeroshot_weights
from vlcp.train.distributed import is_main
from vlcp.models.clip import OPENAI_MEAN, OPENAI_STD


@dataclass
class Encoded:
    image: torch.Tensor       # [M, D] normalised
    text: torch.Tensor        # [N, D] normalised
    pairs: PairSet
    fused: torch.Tensor | None = None   # [M, D'] normalised multi-modal features (fusion models)


def _normalise(images: torch.Tensor) -> torch.Tensor:
    """uint8 [N, S, S, 3] -> float [N, 3, S, S] with CLIP's normalisation."""
    mean = torch.tensor(OPENAI_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(OPENAI_STD).view(1, 3, 1, 1)
    return (images.permute(0, 3, 1, 2).float() / 255.0 - mean) / std


@torch.no_grad()
def encode(model, tokenizer, pairs: PairSet, device, batch_size: int = 512, fused: bool = False) -> Encoded:
    """Features of every image and text of `pairs`; with `fused`, also the fusion encoder's
    feature of each image with its caption (models that have one)."""
    img, txt, mm = [], [], []
    for s in range(0, len(pairs.images), batch_size):
        x = _normalise(pairs.images[s:s + batch_size])
        img.append(model.encode_image(x.to(device), normalize=True).float().cpu())
    for s in range(0, len(pairs.texts), batch_size):
        txt.append(model.encode_text(tokenizer(pairs.texts[s:s + batch_size]).to(device), normalize=True).float().cpu())
    if fused and hasattr(model, "encode_multimodal"):
        for s in range(0, len(pairs.images), batch_size):
            x = _normalise(pairs.images[s:s + batch_size]).to(device)
            t = tokenizer([pairs.texts[i] for i in pairs.image_text[s:s + batch_size].tolist()]).to(device)
            mm.append(model.encode_multimodal(x, t, normalize=True).float().cpu())
    d = model.text_projection.shape[1] if hasattr(model, "text_projection") else 0
    cat = lambda xs, what: require_finite(torch.cat(xs) if xs else torch.zeros(0, d), what)  # noqa: E731
    return Encoded(cat(img, "image features"), cat(txt, "text features"), pairs,
                   cat(mm, "multi-modal features") if mm else None)


def _retrieval(enc: Encoded, tasks: list[int], ks) -> dict[str, float]:
    p = enc.pairs
    keep_t = torch.isin(p.tasks, torch.tensor(tasks))
    keep_i = keep_t[p.image_text]
    return cross_modal(enc.image[keep_i], enc.text[keep_t], p.image_text[keep_i],
                       torch.arange(len(p.texts))[keep_t], ks)


def _fused(enc: Encoded) -> torch.Tensor:
    if enc.fused is not None:
        return enc.fused
    return F.normalize(enc.image + enc.text[enc.pairs.image_text], dim=-1)


class MemoTokenizer:
    """Tokenizes each distinct text once: evaluation re-encodes the same texts (and zero-shot
    prompts) after every task, and open_clip's BPE tokenizer is pure Python."""

    def __init__(self, tokenizer):
        self.tokenizer, self.context_length = tokenizer, tokenizer.context_length
        self._rows: dict[str, torch.Tensor] = {}

    def __call__(self, texts: str | list[str]) -> torch.Tensor:
        texts = [texts] if isinstance(texts, str) else list(texts)
        new = [t for t in dict.fromkeys(texts) if t not in self._rows]
        if new:
            self._rows.update(zip(new, self.tokenizer(new)))
        return torch.stack([self._rows[t] for t in texts]) if texts else torch.zeros(0, self.context_length, dtype=torch.long)


class Evaluator:
    """Holds the evaluation sets and fills results rows after each task."""

    def __init__(self, sets: dict[str, PairSet], query: PairSet, gallery: PairSet,
                 class_names: list[str], num_tasks: int, cfg: EvalCfg, group_names: list[str] = (),
                 downstream: list | None = None, progress: bool = False):
        """`downstream`: real downstream datasets (`vlcp.data.fomo.EvalSet`s) that replace the
        emoji held-out suite (IncCLIP on CC2M); an empty `query` set skips multi-modal mAP.
        `progress`: a progress bar over the evaluation's parts (it can take longer than a task's training)."""
        self.sets, self.query, self.gallery, self.downstream = sets, query, gallery, downstream
        self.progress = progress
        self.class_names, self.num_tasks, self.cfg = class_names, num_tasks, cfg
        self.group_names = list(group_names)
        self._memo: MemoTokenizer | None = None
        self._procedural = None

    def _tokenizer(self, tokenizer) -> MemoTokenizer:
        if self._memo is None or self._memo.tokenizer is not tokenizer:
            self._memo = MemoTokenizer(tokenizer)
        return self._memo

    def __call__(self, model, tokenizer, device, task: int) -> dict:
        try:
            return self._row(model, tokenizer, device, task)
        except NonFiniteError as e:   # nothing is recorded from this model: the run stops here
            raise NonFiniteError(f"evaluating the model after task {task + 1}: {e}") from None

    def _row(self, model, tokenizer, device, task: int) -> dict:
        model.eval()
        tokenizer = self._tokenizer(tokenizer)
        ks = tuple(self.cfg.ks)
        row: dict = {"matrix": {}, "cumulative": {}}
        classnames = [c.replace("-", " ") for c in self.class_names]   # none: no per-task zero-shot (cc's pseudo classes)
        weights = zeroshot_weights(model, tokenizer, classnames, self.cfg.zeroshot_templates, device).float().cpu() \
            if classnames else None
        encoded = {}
        parts = len(self.sets) + bool(len(self.query)) + bool(self.cfg.heldout)
        bar = tqdm(total=parts, desc=f"evaluate after task {task + 1}", unit="set", leave=False,
                   disable=not (self.progress and is_main()))
        for name, pairs in self.sets.items():
            bar.update()
            enc = encoded[name] = encode(model, tokenizer, pairs, device, self.cfg.batch_size)
            cells = [_retrieval(enc, [j], ks) for j in range(self.num_tasks)]
            for j in range(self.num_tasks if weights is not None else 0):
                keep = pairs.image_tasks == j
                cells[j]["ZS@1"] = topk_accuracy(enc.image[keep], weights, pairs.image_labels[keep], (1,))[1]
            row["matrix"][name] = {m: [c[m] for c in cells] for m in cells[0]}
            row["cumulative"][name] = _retrieval(enc, list(range(task + 1)), ks)
        if len(self.query):
            bar.update()
            q = encode(model, tokenizer, self.query.of_tasks(range(task + 1)), device, self.cfg.batch_size, fused=True)
            g = encode(model, tokenizer, self.gallery.of_tasks(range(task + 1)), device, self.cfg.batch_size, fused=True)
            for norm, tag in (("hits", "mAP"), ("standard", "mAP_std")):
                maps = mean_average_precision(_fused(q), _fused(g), q.pairs.image_labels, g.pairs.image_labels,
                                              ks, normalizer=norm)
                row["cumulative"]["test"].update({f"{tag}@{n}": v for n, v in maps.items()})
        bar.update(parts - bar.n)   # the held-out suite, when there is one
        if self.cfg.heldout and self.downstream is not None:
            from vlcp.eval.fomo import downstream_scores
            row["heldout"] = downstream_scores(model, tokenizer, self.downstream, device, self.cfg.batch_size, ks,
                                                self.cfg.prompts)
        elif self.cfg.heldout:
            row["heldout"] = self.heldout(model, tokenizer, device, encoded, subgroup_weights=weights)
        bar.close()
        model.train()
        return row

    @torch.no_grad()
    def heldout(self, model, tokenizer, device, encoded: dict[str, Encoded],
                subgroup_weights: torch.Tensor | None = None) -> dict:
        """IncCLIP-style held-out evaluation of one model: zero-shot classification (prompt
        ensembles over `zeroshot_templates`, top-1 %) by subgroup and by group on every set
        (unseen items in the training styles, every item in the unseen styles), by shape and
        colour on the procedural shapes and by object count and background on the procedural
        scenes (`PROCEDURAL_TASKS`); zero-shot retrieval (TR/IR@K, Rm) on each whole set.
        `subgroup_weights`: the subgroup classifier when the caller has already built it."""
        out: dict = {"classification": {}, "retrieval": {}}
        templates = self.cfg.zeroshot_templates
        names = lambda cs: [c.replace("-", " ") for c in cs]  # noqa: E731
        for tag, classes, attr in (("subgroup", self.class_names, "image_labels"),
                                   ("group", self.group_names, "image_groups")):
            if not classes:
                continue
            w = subgroup_weights if tag == "subgroup" and subgroup_weights is not None else \
                zeroshot_weights(model, tokenizer, names(classes), templates, device).float().cpu()
            for name, enc in encoded.items():
                out["classification"][f"{name}/{tag}"] = topk_accuracy(enc.image, w, getattr(enc.pairs, attr), (1,))[1]
        for set_name, images in self._procedural_sets(encoded).items():
            x = _normalise(torch.from_numpy(images.images)).to(device)
            feats = model.encode_image(x, normalize=True).float().cpu()
            for tag in PROCEDURAL_TASKS[set_name]:
                w = zeroshot_weights(model, tokenizer, images.classes[tag], templates, device).float().cpu()
                out["classification"][f"{set_name}/{tag}"] = topk_accuracy(feats, w, torch.from_numpy(images.labels[tag]), (1,))[1]
        for name, enc in encoded.items():
            out["retrieval"][name] = _retrieval(enc, sorted(set(enc.pairs.tasks.tolist())), tuple(self.cfg.ks))
        return out

    def _procedural_sets(self, encoded):
        if self._procedural is None:
            size = next(iter(encoded.values())).pairs.images.shape[1]
            self._procedural = {"shapes": render_shapes(size, per_class=4, seed=0),
                                "scenes": render_scenes(size, per_class=8, seed=0)}
        return self._procedural

    def final_pools(self, model, tokenizer, device) -> list[dict]:
        """The final model on every cumulative pool D<=i (CTP's "final model" table and BWT)."""
        model.eval()
        tokenizer = self._tokenizer(tokenizer)
        enc = encode(model, tokenizer, self.sets["test"], device, self.cfg.batch_size)
        if len(self.query):
            q = encode(model, tokenizer, self.query, device, self.cfg.batch_size, fused=True)
            g = encode(model, tokenizer, self.gallery, device, self.cfg.batch_size, fused=True)
        out = []
        for i in range(self.num_tasks):
            cell = _retrieval(enc, list(range(i + 1)), tuple(self.cfg.ks))
            if len(self.query):
                qi, gi = q.pairs.image_tasks <= i, g.pairs.image_tasks <= i
                maps = mean_average_precision(_fused(q)[qi], _fused(g)[gi], q.pairs.image_labels[qi],
                                              g.pairs.image_labels[gi], tuple(self.cfg.ks), normalizer="hits")
                cell |= {f"mAP@{n}": v for n, v in maps.items()}
            out.append(cell)
        model.train()
        return out
