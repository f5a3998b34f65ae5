"""The papers' training-time image augmentations (`data.transform`), drawn from the run's seeds.

- "shift" (default): the embedded benchmark's ±2 px random shift (`vlcp.train.loop.Materializer`).
- "ctp": CTP's train transform (ALBEF's): RandomResizedCrop(S, scale 0.2-1, bicubic), horizontal
  flip, then ALBEF's RandomAugment(2, 5): two ops drawn with replacement from {Identity,
  AutoContrast, Equalize, Brightness, Sharpness, ShearX/Y, TranslateX/Y, Rotate}, each applied with
  probability 0.5 at ALBEF's level-5 arguments (enhance factor 1.0, shear 0.15, translate 5 px,
  rotate 15 degrees, signs random, fill grey 128). Its evaluation images are the whole photo
  resized to S x S (CTP's test transform).
- "fomo": FoMo-in-Flux's train transform: RandomResizedCrop(S, scale 0.9-1, ratio 3/4-4/3, bicubic).

The crop comes from the decoded original. Every image has its own generator seeded from the
batch's draw (`TrainTransform.seeds`), so the augmentation is the same under any world size and
number of decoding threads. The ops are torchvision's (`transforms.v2.functional`), imported on a
transform's first use.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image

GREY = [128, 128, 128]
ALBEF_OPS = ("Identity", "AutoContrast", "Equalize", "Brightness", "Sharpness",
             "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate")
MAX_LEVEL = 10


def _uniform(gen: torch.Generator, lo: float = 0.0, hi: float = 1.0) -> float:
    return lo + (hi - lo) * torch.rand((), generator=gen).item()


def resized_crop_box(width: int, height: int, scale, ratio, gen: torch.Generator) -> tuple[int, int, int, int]:
    """torchvision's `RandomResizedCrop.get_params` with a generator: (top, left, h, w)."""
    area = width * height
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target = area * _uniform(gen, *scale)
        aspect = math.exp(_uniform(gen, *log_ratio))
        w, h = int(round(math.sqrt(target * aspect))), int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            top = int(torch.randint(0, height - h + 1, (1,), generator=gen))
            left = int(torch.randint(0, width - w + 1, (1,), generator=gen))
            return top, left, h, w
    in_ratio = width / height   # fallback: the central crop at the nearest allowed aspect
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        h, w = height, int(round(height * max(ratio)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def albef_op(img: Image.Image, name: str, level: float, gen: torch.Generator) -> Image.Image:
    """One of ALBEF's RandomAugment ops at `level` (of MAX_LEVEL) with ALBEF's argument mapping."""
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.v2 import functional as TF

    sign = -1.0 if _uniform(gen) > 0.5 else 1.0
    if name == "Identity":
        return img
    if name == "AutoContrast":
        return TF.autocontrast(img)
    if name == "Equalize":
        return TF.equalize(img)
    if name in ("Brightness", "Sharpness"):
        factor = level / MAX_LEVEL * 1.8 + 0.1
        return TF.adjust_brightness(img, factor) if name == "Brightness" else TF.adjust_sharpness(img, factor)
    affine = dict(angle=0.0, translate=[0, 0], scale=1.0, shear=[0.0, 0.0], fill=GREY,
                  interpolation=InterpolationMode.NEAREST)
    if name in ("ShearX", "ShearY"):
        degrees = math.degrees(math.atan(sign * level / MAX_LEVEL * 0.3))
        affine["shear"] = [degrees, 0.0] if name == "ShearX" else [0.0, degrees]
        return TF.affine(img, center=[0, 0], **affine)
    if name in ("TranslateX", "TranslateY"):
        px = int(round(sign * level / MAX_LEVEL * 10))
        affine["translate"] = [px, 0] if name == "TranslateX" else [0, px]
        return TF.affine(img, **affine)
    if name == "Rotate":
        return TF.rotate(img, sign * level / MAX_LEVEL * 30, fill=GREY)
    raise ValueError(f"unknown RandomAugment op {name!r}")


@dataclass(frozen=True)
class TrainTransform:
    scale: tuple[float, float]              # RandomResizedCrop's area fraction
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    flip: bool = False                      # random horizontal flip
    ops: tuple[str, ...] = ()               # ALBEF's RandomAugment ops (empty: none)
    num_ops: int = 2
    level: int = 5
    squash_eval: bool = False               # the paper's test transform resizes the whole image (CTP) instead of
    #                                         centre-cropping it (FoMo's Resize + CenterCrop, vlcp's default)

    @staticmethod
    def seeds(n: int, generator: torch.Generator) -> torch.Tensor:
        """One seed per image of a global batch (drawn from the run's generator, then sliced)."""
        return torch.randint(0, 2 ** 62, (n,), generator=generator)

    @property
    def draft_scale(self) -> float:
        """How much larger than the output the image must be decoded for the smallest crop."""
        return 1 / math.sqrt(self.scale[0])

    def __call__(self, img: Image.Image, size: int, seed: int) -> np.ndarray:
        """The augmented image as uint8 [size, size, 3]."""
        from torchvision.transforms import InterpolationMode
        from torchvision.transforms.v2 import functional as TF

        gen = torch.Generator().manual_seed(int(seed))
        top, left, h, w = resized_crop_box(img.width, img.height, self.scale, self.ratio, gen)
        img = TF.resized_crop(img, top, left, h, w, [size, size], InterpolationMode.BICUBIC, antialias=True)
        if self.flip and _uniform(gen) < 0.5:
            img = TF.horizontal_flip(img)
        if self.ops:
            names = torch.randint(0, len(self.ops), (self.num_ops,), generator=gen).tolist()
            for k in names:
                if _uniform(gen) <= 0.5:     # ALBEF: skipped when random() > prob
                    img = albef_op(img, self.ops[k], self.level, gen)
        return np.asarray(img.convert("RGB"), dtype=np.uint8)


TRANSFORMS = {
    "ctp": TrainTransform(scale=(0.2, 1.0), flip=True, ops=ALBEF_OPS, squash_eval=True),
    "fomo": TrainTransform(scale=(0.9, 1.0)),
}


def train_transform(name: str) -> TrainTransform | None:
    """`data.transform` -> the TrainTransform, or None for the Materializer's own shift."""
    return TRANSFORMS.get(name)


def augment_images(images, ids: list[int], seeds: list[int], transform: TrainTransform) -> torch.Tensor:
    """uint8 [n, S, S, 3]: the images at `ids` under `transform`, image k drawn with `seeds[k]`.
    `images`: a dataset's `ImageFiles` (decoded from the originals) or an in-memory uint8
    [N, S, S, 3] tensor (the emoji benchmark's, augmented at its own size)."""
    if hasattr(images, "augmented"):
        return images.augmented(ids, seeds, transform)
    size = images.shape[1]
    return torch.from_numpy(np.stack([transform(Image.fromarray(images[i].numpy()), size, s)
                                      for i, s in zip(ids, seeds)]))
