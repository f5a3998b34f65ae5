"""Zero-shot classification with prompt-template ensembles (open_clip's classifier builder)."""
from __future__ import annotations

import torch
from open_clip.zero_shot_classifier import build_zero_shot_classifier


def zeroshot_weights(model, tokenizer, classnames: list[str], templates: list[str], device) -> torch.Tensor:
    """[D, C] normalised class embeddings, each the mean over templates ("{}" -> class name)."""
    return build_zero_shot_classifier(model, tokenizer, classnames,
                                      [t.format for t in templates], device=device, use_tqdm=False)


def topk_accuracy(image_feats: torch.Tensor, weights: torch.Tensor, labels: torch.Tensor,
                  ks=(1, 5)) -> dict[int, float]:
    """% of images whose label is among the top-k classes."""
    top = (image_feats @ weights).topk(max(ks), dim=1).indices
    return {k: 100.0 * (top[:, :k] == labels[:, None]).any(1).float().mean().item() for k in ks}
