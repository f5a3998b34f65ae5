"""FoMo-in-Flux evaluation of one model: every adaptation and retention dataset, then
A_KA, A_ZS (dataset-macro averages) and GM = √(A_KA·A_ZS).

Classification sets: zero-shot top-1 % with the dataset's single template (FoMo's primer; no
ensemble), over all of the dataset's classes. Retrieval sets: R@5 as the mean of text→image
and image→text R@5 (FoMo's recall@5).
"""
from __future__ import annotations

import torch
from tqdm import tqdm

from vlcp.data.fomo import EvalSet
from vlcp.errors import VlcpError, require_finite
from vlcp.eval import continual
from vlcp.eval.encode import Snapshot, encode, normalise_images
from vlcp.eval.retrieval import cross_modal
from vlcp.eval.zeroshot import prompt_templates, topk_accuracy, zeroshot_weights


@torch.no_grad()
def retrieval(model, tokenizer, s: EvalSet, device, batch_size: int = 512, ks=(5,),
              text_cache: dict | None = None) -> dict[str, float]:
    """TR/IR@K and Rm on a retrieval set; an image matches every text of its item (real sets: all
    of an image's captions). `text_cache`: {caption: feature} of the current text tower (`text_state`)."""
    enc = encode(model, tokenizer, s.pairs, device, batch_size, text_cache=text_cache)
    item = s.pairs.items
    return cross_modal(enc.image, enc.text, item[s.pairs.image_text], item, tuple(ks))


TEXT_TOWER_SKIP = ("visual.", "logit_")   # what a CLIP's text features do not read: the image tower, the logit scale and bias


def text_state(model, cache: dict) -> dict:
    """`cache` ({"tower", "weights": {(classes, templates): class weights}, "texts": {caption: feature}}),
    emptied first unless the text tower (every parameter and buffer outside `TEXT_TOWER_SKIP`) is
    still, bit for bit, the one it was filled under (`Snapshot`): a locked or frozen text tower's
    prompts and captions are encoded once, a changed one's never read stale."""
    if "tower" not in cache or not cache["tower"].matches(model):
        cache.clear()
        cache.update(tower=Snapshot(model, skip=TEXT_TOWER_SKIP), weights={}, texts={})
    return cache


def class_accuracy(top1: torch.Tensor, labels: torch.Tensor, classes: list[str]) -> dict[str, float]:
    """Per class with test images, the top-1 % of its images ({class name: %}): `top1` the predicted
    class of each image, `labels` its class."""
    n = torch.bincount(labels, minlength=len(classes))
    hits = torch.bincount(labels, weights=(top1 == labels).float(), minlength=len(classes))
    return {c: 100.0 * (h / k).item() for c, h, k in zip(classes, hits, n) if k}


def class_sizes(s: EvalSet) -> dict[str, int]:
    """A classification set's test images per class ({class name: n}, classes with none left out)."""
    counts = torch.bincount(s.labels, minlength=len(s.classes)).tolist()
    return {c: n for c, n in zip(s.classes, counts) if n}


@torch.no_grad()
def score(model, tokenizer, s: EvalSet, device, batch_size: int = 512, prompts: str = "single",
          text_cache: dict | None = None, classes: dict | None = None) -> float:
    """A classification set's zero-shot top-1 % with its own template (`prompts="single"`, FoMo's
    primer) or CLIP's prompt ensemble for it (`"ensemble"`, IncCLIP's suite), or with the set's
    explicit ensemble `s.templates` whenever it has one (a user's keep-set; `prompts` is then
    ignored); a retrieval set's mean R@5. `text_cache`: the current text tower's class weights and
    caption features (`text_state`), so sets with the same classes and templates build their
    classifier once. `classes`: when a dict, a classification set's per-class top-1 %
    (`class_accuracy`) goes in it under the set's name."""
    if s.pairs is not None:
        r = retrieval(model, tokenizer, s, device, batch_size, text_cache=None if text_cache is None else
                      text_cache["texts"])
        return (r["TR@5"] + r["IR@5"]) / 2
    feats = require_finite(torch.cat([model.encode_image(normalise_images(s.images[i:i + batch_size]).to(device),
                                                         normalize=True).float().cpu()
                                      for i in range(0, len(s.images), batch_size)]), f"{s.name}: image features")
    templates = list(s.templates) if s.templates is not None else prompt_templates(s.name, s.template, prompts)
    if not templates:
        raise VlcpError(f"{s.name}: the evaluation set's prompt ensemble `templates` is empty")
    held, key = {} if text_cache is None else text_cache["weights"], (tuple(s.classes), tuple(templates))
    if key not in held:
        held[key] = zeroshot_weights(model, tokenizer, s.classes, templates, device).float().cpu()
    w = held[key]
    if classes is not None:
        with torch.autocast(feats.device.type, enabled=False):
            classes[s.name] = class_accuracy((feats @ w).topk(1, dim=1).indices[:, 0], s.labels, s.classes)
    return topk_accuracy(feats, w, s.labels, (1,))[1]


@torch.no_grad()
def score_sets(model, tokenizer, sets: list[EvalSet], device, batch_size: int = 512, progress: bool = False,
               text_cache: dict | None = None, classes: dict | None = None) -> dict[str, float]:
    """{name: score} of every set for one model (left in train mode); `progress`: a bar over the sets;
    `text_cache`: a dict kept across evaluation rounds (`text_state`), so a text tower that did not
    change since the last round encodes no class prompt or caption again (without one, this round's
    sets still share their classifiers); `classes`: a dict that receives each classification set's
    per-class top-1 % (`score`)."""
    model.eval()
    cache = text_state(model, {} if text_cache is None else text_cache)
    scores = {s.name: score(model, tokenizer, s, device, batch_size, text_cache=cache, classes=classes)
              for s in tqdm(sets, desc="evaluate", unit="dataset", leave=False, disable=not progress)}
    model.train()
    return scores


@torch.no_grad()
def evaluate_fomo(model, tokenizer, sets: list[EvalSet], device, batch_size: int = 512, progress: bool = False,
                  text_cache: dict | None = None) -> dict:
    """{"datasets": {name: score}, "A_KA", "A_ZS", "GM", "classes": {adaptation classification set:
    {class: top-1 %}}} for one model (left in train mode); `progress`: a bar over the datasets;
    `text_cache`: see `score_sets`. `classes` holds each concept's own accuracy: what training on it
    taught (`vlcp.report.teach`)."""
    classes: dict = {}
    scores = score_sets(model, tokenizer, sets, device, batch_size, progress, text_cache, classes)
    ka = continual.dataset_macro({s.name: scores[s.name] for s in sets if s.role == "adaptation"})
    zs = continual.dataset_macro({s.name: scores[s.name] for s in sets if s.role == "retention"})
    adaptation = {s.name for s in sets if s.role == "adaptation"}
    return {"datasets": scores, "A_KA": ka, "A_ZS": zs, "GM": continual.geometric_mean(ka, zs),
            "classes": {k: v for k, v in classes.items() if k in adaptation}}


@torch.no_grad()
def downstream_scores(model, tokenizer, sets: list[EvalSet], device, batch_size: int = 512, ks=(1, 5, 10),
                      prompts: str = "single") -> dict:
    """IncCLIP's downstream evaluation of one model, in the held-out suite's layout:
    {"classification": {dataset: top-1 %}, "retrieval": {dataset: TR/IR@K, Rm}} (zero-shot with
    each dataset's template, or CLIP's prompt ensembles: `prompts`; retrieval with every caption of
    an image a match); left in train mode."""
    model.eval()
    out: dict = {"classification": {}, "retrieval": {}}
    for s in sets:
        if s.pairs is None:
            out["classification"][s.name] = score(model, tokenizer, s, device, batch_size, prompts)
        else:
            out["retrieval"][s.name] = retrieval(model, tokenizer, s, device, batch_size, ks)
    model.train()
    return out
