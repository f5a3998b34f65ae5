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

import torch
from tqdm import tqdm

from vlcp.config import EvalCfg
from vlcp.data.pairs import PairSet
from vlcp.data.procedural import PROCEDURAL_TASKS, render_scenes, render_shapes
from vlcp.errors import NonFiniteError
from vlcp.eval.encode import Encoded, MemoTokenizer, Snapshot, encode, encode_multimodal, normalise_images
from vlcp.eval.fomo import downstream_scores
from vlcp.eval.retrieval import cross_modal, mean_average_precision
from vlcp.eval.zeroshot import topk_accuracy, zeroshot_weights
from vlcp.train.distributed import is_main


def _retrieval(enc: Encoded, tasks: list[int], ks) -> dict[str, float]:
    p = enc.pairs
    keep_t = torch.isin(p.tasks, torch.tensor(tasks))
    keep_i = keep_t[p.image_text]
    return cross_modal(enc.image[keep_i], enc.text[keep_t], p.image_text[keep_i],
                       torch.arange(len(p.texts))[keep_t], ks)


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
        self._last_pools: tuple | None = None   # (model state, test set, query, gallery) of the last task's round

    def _tokenizer(self, tokenizer) -> MemoTokenizer:
        if self._memo is None or self._memo.tokenizer is not tokenizer:
            self._memo = MemoTokenizer(tokenizer)
        return self._memo

    def __call__(self, model, tokenizer, device, task: int) -> dict:
        try:
            return self._row(model, tokenizer, device, task)
        except NonFiniteError as e:   # nothing is recorded from this model: the run stops here
            raise NonFiniteError(f"evaluating the model after task {task + 1}: {e}") from None

    def zero_shot(self, model, tokenizer, device) -> dict:
        """The starting model's `matrix` row alone (what a run records of it): the same cells as
        a round after task 1, without the cumulative pools, mAP and held-out suite it never records."""
        try:
            return self._row(model, tokenizer, device, 0, pools=False)["matrix"]
        except NonFiniteError as e:
            raise NonFiniteError(f"evaluating the starting model: {e}") from None

    def _row(self, model, tokenizer, device, task: int, pools: bool = True) -> dict:
        """The round after `task`: the matrix row and, with `pools`, the cumulative pools (tasks <= `task`),
        mAP and the held-out suite. The last task's round keeps its pool features for `final_pools`."""
        model.eval()
        tokenizer = self._tokenizer(tokenizer)
        ks = tuple(self.cfg.ks)
        row: dict = {"matrix": {}, "cumulative": {}}
        classnames = [c.replace("-", " ") for c in self.class_names]   # none: no per-task zero-shot (cc's pseudo classes)
        weights = zeroshot_weights(model, tokenizer, classnames, self.cfg.zeroshot_templates, device).float().cpu() \
            if classnames else None
        encoded, texts = {}, {}   # texts: every caption's feature this round (the sets share their captions)
        parts = len(self.sets) + pools * (bool(len(self.query)) + bool(self.cfg.heldout))
        bar = tqdm(total=parts, desc=f"evaluate after task {task + 1}", unit="set", leave=False,
                   disable=not (self.progress and is_main()))
        for name, pairs in self.sets.items():
            bar.update()
            enc = encoded[name] = encode(model, tokenizer, pairs, device, self.cfg.batch_size, text_cache=texts)
            cells = [_retrieval(enc, [j], ks) for j in range(self.num_tasks)]
            for j in range(self.num_tasks if weights is not None else 0):
                keep = pairs.image_tasks == j
                cells[j]["ZS@1"] = topk_accuracy(enc.image[keep], weights, pairs.image_labels[keep], (1,))[1]
            row["matrix"][name] = {m: [c[m] for c in cells] for m in cells[0]}
            if pools:
                row["cumulative"][name] = _retrieval(enc, list(range(task + 1)), ks)
        q = g = None
        if pools and len(self.query):
            bar.update()
            query, gallery = self.query.of_tasks(range(task + 1)), self.gallery.of_tasks(range(task + 1))
            q = encode_multimodal(model, tokenizer, query, device, self.cfg.batch_size, texts)
            g = encode_multimodal(model, tokenizer, gallery, device, self.cfg.batch_size, texts)
            for norm, tag in (("hits", "mAP"), ("standard", "mAP_std")):
                maps = mean_average_precision(q, g, query.image_labels, gallery.image_labels, ks, normalizer=norm)
                row["cumulative"]["test"].update({f"{tag}@{n}": v for n, v in maps.items()})
        if pools and task == self.num_tasks - 1:   # every task's items: the final model's pools, if it is this one
            self._last_pools = (Snapshot(model), tokenizer, encoded["test"], q, g)
        bar.update(parts - bar.n)   # the held-out suite, when there is one
        if pools and self.cfg.heldout and self.downstream is not None:
            row["heldout"] = downstream_scores(model, tokenizer, self.downstream, device, self.cfg.batch_size, ks,
                                                self.cfg.prompts)
        elif pools and self.cfg.heldout:
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
            x = normalise_images(torch.from_numpy(images.images)).to(device)
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
        """The final model on every cumulative pool D<=i (CTP's "final model" table and BWT): the
        features of the last task's round when the model has not changed since (`Snapshot`)."""
        model.eval()
        tokenizer = self._tokenizer(tokenizer)
        held = self._last_pools
        if held is not None and held[1] is tokenizer and held[0].matches(model):   # that round's model, unchanged
            enc, q, g = held[2:]
        else:   # (a run resumed after its last task)
            texts = {}
            enc = encode(model, tokenizer, self.sets["test"], device, self.cfg.batch_size, text_cache=texts)
            if len(self.query):
                q = encode_multimodal(model, tokenizer, self.query, device, self.cfg.batch_size, texts)
                g = encode_multimodal(model, tokenizer, self.gallery, device, self.cfg.batch_size, texts)
        out = []
        for i in range(self.num_tasks):
            cell = _retrieval(enc, list(range(i + 1)), tuple(self.cfg.ks))
            if len(self.query):
                qi, gi = self.query.image_tasks <= i, self.gallery.image_tasks <= i
                maps = mean_average_precision(q[qi], g[gi], self.query.image_labels[qi],
                                              self.gallery.image_labels[gi], tuple(self.cfg.ks), normalizer="hits")
                cell |= {f"mAP@{n}": v for n, v in maps.items()}
            out.append(cell)
        model.train()
        return out
