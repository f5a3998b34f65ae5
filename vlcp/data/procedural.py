"""Procedural evaluation sets rendered with PIL at run time (design §4): deterministic, offline.

`shapes`: coloured geometric shapes (6 shapes × 6 colours) at random position, size and
rotation on the emoji's white background — a held-out domain for zero-shot classification by
shape and by colour (the emoji stream has a few coloured circles, squares and diamonds, so the
concepts are learnable, the images are not in any training set).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

SHAPES = ("circle", "square", "triangle", "diamond", "star", "hexagon")
COLOURS = {"red": (221, 46, 68), "orange": (244, 144, 12), "yellow": (253, 203, 88),
           "green": (120, 177, 89), "blue": (85, 172, 238), "purple": (170, 142, 214)}


@dataclass
class LabelledImages:
    images: np.ndarray            # uint8 [N, S, S, 3]
    labels: dict[str, np.ndarray]  # task name -> long [N]
    classes: dict[str, list[str]]  # task name -> class names


def _polygon(shape: str, cx: float, cy: float, r: float, rot: float) -> list[tuple[float, float]]:
    if shape == "star":
        pts = [(r if k % 2 == 0 else 0.45 * r, rot + k * math.pi / 5 - math.pi / 2) for k in range(10)]
    else:
        n, off = {"square": (4, math.pi / 4), "triangle": (3, -math.pi / 2), "diamond": (4, 0.0),
                  "hexagon": (6, 0.0)}[shape]
        rr = r * (0.85 if shape == "diamond" else 1.0)
        pts = [(rr * (1.0 if k % 2 == 0 or shape != "diamond" else 0.7), rot + off + 2 * math.pi * k / n) for k in range(n)]
    return [(cx + a * math.cos(t), cy + a * math.sin(t)) for a, t in pts]


def render_shapes(size: int = 32, per_class: int = 4, seed: int = 0) -> LabelledImages:
    """per_class images of each (shape, colour) pair, drawn at 4× and downsampled."""
    rng = np.random.default_rng(seed)
    big, images, shape_y, colour_y = size * 4, [], [], []
    for si, shape in enumerate(SHAPES):
        for ci, rgb in enumerate(COLOURS.values()):
            for _ in range(per_class):
                im = Image.new("RGB", (big, big), (255, 255, 255))
                d = ImageDraw.Draw(im)
                r = big * rng.uniform(0.25, 0.42)
                cx, cy = (big / 2 + rng.uniform(-1, 1) * (big / 2 - r) * 0.8 for _ in range(2))
                rot = rng.uniform(-0.2, 0.2) if shape in ("square", "triangle", "diamond") else rng.uniform(0, math.pi)
                if shape == "circle":
                    d.ellipse([cx - r, cy - r, cx + r, cy + r], fill=rgb)
                else:
                    d.polygon(_polygon(shape, cx, cy, r, rot), fill=rgb)
                images.append(np.asarray(im.resize((size, size), Image.Resampling.LANCZOS)))
                shape_y.append(si)
                colour_y.append(ci)
    return LabelledImages(np.stack(images), {"shape": np.array(shape_y), "colour": np.array(colour_y)},
                          {"shape": list(SHAPES), "colour": list(COLOURS)})
