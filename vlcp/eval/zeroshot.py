"""Zero-shot classification with prompt-template ensembles (open_clip's classifier builder).

`prompt_templates` picks a downstream dataset's templates (`eval.prompts`): `single`, the
dataset's own template (FoMo-in-Flux's primer); `ensemble`, CLIP's prompt ensemble for the
dataset (Radford et al. 2021; openai/CLIP data/prompts.md, and for ImageNet the 80 templates
that open_clip ships as `OPENAI_IMAGENET_TEMPLATES`), as IncCLIP §4.1.3 reports its zero-shot
results ("using the prompt ensemble technique [34]"). A dataset without a CLIP ensemble of its
own gets the ImageNet one.
"""
from __future__ import annotations

from functools import cache

import torch

from vlcp.errors import ConfigError

PROMPTS = ("single", "ensemble")

_PHOTO = ["a photo of a {}.", "a blurry photo of a {}.", "a black and white photo of a {}.",
          "a low contrast photo of a {}.", "a high contrast photo of a {}.", "a bad photo of a {}.",
          "a good photo of a {}.", "a photo of a small {}.", "a photo of a big {}.", "a photo of the {}.",
          "a blurry photo of the {}.", "a black and white photo of the {}.", "a low contrast photo of the {}.",
          "a high contrast photo of the {}.", "a bad photo of the {}.", "a good photo of the {}.",
          "a photo of the small {}.", "a photo of the big {}."]
_RENDITIONS = ["a photo of a {}.", "a painting of a {}.", "a plastic {}.", "a sculpture of a {}.", "a sketch of a {}.",
               "a tattoo of a {}.", "a toy {}.", "a rendition of a {}.", "a embroidered {}.", "a cartoon {}.",
               "a {} in a video game.", "a plushie {}.", "a origami {}.", "art of a {}.", "graffiti of a {}.",
               "a drawing of a {}.", "a doodle of a {}.", "a photo of the {}.", "a painting of the {}.",
               "the plastic {}.", "a sculpture of the {}.", "a sketch of the {}.", "a tattoo of the {}.",
               "the toy {}.", "a rendition of the {}.", "the embroidered {}.", "the cartoon {}.",
               "the {} in a video game.", "the plushie {}.", "the origami {}.", "art of the {}.",
               "graffiti of the {}.", "a drawing of the {}.", "a doodle of the {}."]

# CLIP's per-dataset templates (openai/CLIP data/prompts.md) for IncCLIP's eight zero-shot sets, but
# ImageNet's (`clip_ensembles`)
_CLIP_OWN: dict[str, list[str]] = {
    "cifar10": _PHOTO,
    "cifar100": _PHOTO,
    "caltech101": _RENDITIONS,
    "dtd": ["a photo of a {} texture.", "a photo of a {} pattern.", "a photo of a {} thing.",
            "a photo of a {} object.", "a photo of the {} texture.", "a photo of the {} pattern.",
            "a photo of the {} thing.", "a photo of the {} object."],
    "flowers102": ["a photo of a {}, a type of flower."],
    "food101": ["a photo of {}, a type of food."],
    "sun397": ["a photo of a {}.", "a photo of the {}."],
}


@cache
def clip_ensembles() -> dict[str, list[str]]:
    """CLIP's prompt ensembles by lower-case dataset name (read-only), ImageNet's 80 from open_clip.
    open_clip is imported on first use, not with this module: it costs seconds (torchvision's ops
    import torch._dynamo), and a process that only checks configs (`vlcp run --jobs N`'s parent,
    through the stream modules) needs none of it."""
    from open_clip.zero_shot_metadata import OPENAI_IMAGENET_TEMPLATES
    return {**_CLIP_OWN, "imagenet": [t("{}") for t in OPENAI_IMAGENET_TEMPLATES]}


def prompt_templates(dataset: str, template: str, prompts: str = "single") -> list[str]:
    """The zero-shot templates ("{}" -> class name) of a downstream dataset: [its own `template`]
    (`single`), or CLIP's prompt ensemble for it (`ensemble`; by lower-case name, else CLIP's
    80 ImageNet templates)."""
    if prompts not in PROMPTS:
        raise ConfigError(f"eval.prompts: must be one of {', '.join(PROMPTS)}, got {prompts!r}")
    if prompts == "single":
        return [template]
    ensembles = clip_ensembles()
    return list(ensembles.get(dataset.lower(), ensembles["imagenet"]))


def zeroshot_weights(model, tokenizer, classnames: list[str], templates: list[str], device) -> torch.Tensor:
    """[D, C] normalised class embeddings, each the mean over templates ("{}" -> class name)."""
    from open_clip.zero_shot_classifier import build_zero_shot_classifier
    return build_zero_shot_classifier(model, tokenizer, classnames,
                                      [t.format for t in templates], device=device, use_tqdm=False)


def topk_accuracy(image_feats: torch.Tensor, weights: torch.Tensor, labels: torch.Tensor,
                  ks=(1, 5)) -> dict[int, float]:
    """% of images whose label is among the top-k classes (scored in fp32 under evaluation's autocast)."""
    with torch.autocast(image_feats.device.type, enabled=False):
        top = (image_feats @ weights).topk(max(ks), dim=1).indices
    return {k: 100.0 * (top[:, :k] == labels[:, None]).any(1).float().mean().item() for k in ks}
