"""Procedural sets rendered with PIL at run time: deterministic, offline. Both are
held-out zero-shot classification sets (`PROCEDURAL_TASKS`) and FoMo-in-Flux adaptation datasets.

`shapes`: coloured geometric shapes (6 shapes × 6 colours) at random position, size and
rotation on the emoji's white background — a held-out domain for zero-shot classification by
shape and by colour (the emoji stream has a few coloured circles, squares and diamonds, so the
concepts are learnable, the images are not in any training set).
`scenes`: one to three objects (a shape of one colour) on a coloured background, the
coloured-scene set's attribute classes being (object count, background colour) pairs, with
procedural captions that also name the objects' colour and shape (as dSprites/Shapes3D give
FoMo-in-Flux attribute classes and templated captions).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

SHAPES = ("circle", "square", "triangle", "diamond", "star", "hexagon")
COLOURS = {"red": (221, 46, 68), "orange": (244, 144, 12), "yellow": (253, 203, 88),
           "green": (120, 177, 89), "blue": (85, 172, 238), "purple": (170, 142, 214)}


PROCEDURAL_TASKS = {"shapes": ("shape", "colour"), "scenes": ("count", "background")}   # held-out classification tasks
BACKGROUNDS = {"black": (34, 34, 34), "grey": (150, 150, 150), "pink": (255, 182, 193), "brown": (128, 84, 48)}
COUNTS = ("one", "two", "three")


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


def _draw(d: ImageDraw.ImageDraw, shape: str, cx: float, cy: float, r: float, rot: float, rgb) -> None:
    if shape == "circle":
        d.ellipse([cx - r, cy - r, cx + r, cy + r], fill=rgb)
    else:
        d.polygon(_polygon(shape, cx, cy, r, rot), fill=rgb)


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
                _draw(d, shape, cx, cy, r, rot, rgb)
                images.append(np.asarray(im.resize((size, size), Image.Resampling.LANCZOS)))
                shape_y.append(si)
                colour_y.append(ci)
    return LabelledImages(np.stack(images), {"shape": np.array(shape_y), "colour": np.array(colour_y)},
                          {"shape": list(SHAPES), "colour": list(COLOURS)})


def count_class(count: int) -> str:
    """The class name of an object count: "two objects"."""
    return f"{COUNTS[count]} object{'s' if count else ''}"


def scene_class(count: int, background: int) -> str:
    """The class name of a scene: "two objects on pink"."""
    return f"{count_class(count)} on {list(BACKGROUNDS)[background]}"


def render_scenes(size: int = 32, per_class: int = 4, seed: int = 0) -> LabelledImages:
    """per_class images of each (count, background) pair: 1–3 objects of one random shape and
    colour in distinct cells of a 3 × 3 grid (jittered), drawn at 4× and downsampled. Labels:
    `scene` (count × background, named by `scene_class`), `count`, `background`, and the
    objects' `shape` and `colour` (for the captions)."""
    rng = np.random.default_rng(seed)
    big, cell = size * 4, size * 4 / 3
    images, y = [], {k: [] for k in ("scene", "count", "background", "shape", "colour")}
    for n in range(len(COUNTS)):
        for bi, bg in enumerate(BACKGROUNDS.values()):
            for _ in range(per_class):
                im = Image.new("RGB", (big, big), bg)
                d = ImageDraw.Draw(im)
                si, ci = int(rng.integers(len(SHAPES))), int(rng.integers(len(COLOURS)))
                for c in rng.choice(9, size=n + 1, replace=False):
                    r = cell * rng.uniform(0.3, 0.42)
                    cx, cy = ((k + 0.5) * cell + rng.uniform(-1, 1) * (cell / 2 - r) for k in divmod(int(c), 3))
                    _draw(d, SHAPES[si], cx, cy, r, rng.uniform(-0.2, 0.2), list(COLOURS.values())[ci])
                images.append(np.asarray(im.resize((size, size), Image.Resampling.LANCZOS)))
                for k, v in (("scene", n * len(BACKGROUNDS) + bi), ("count", n), ("background", bi),
                             ("shape", si), ("colour", ci)):
                    y[k].append(v)
    classes = {"scene": [scene_class(n, b) for n in range(len(COUNTS)) for b in range(len(BACKGROUNDS))],
               "count": [count_class(n) for n in range(len(COUNTS))],
               "background": [f"{b} background" for b in BACKGROUNDS], "shape": list(SHAPES), "colour": list(COLOURS)}
    return LabelledImages(np.stack(images), {k: np.array(v) for k, v in y.items()}, classes)


SCENE_CAPTIONS = ("{count} {colour} {shape}{s} on a {bg} background.", "a {bg} scene with {count} {colour} {shape}{s}.",
                  "{count} object{s} on {bg}.", "a picture of {count} {shape}{s} on {bg}.",
                  "{count} {colour} object{s} on a {bg} background.", "a scene of {count} object{s} on {bg}.",
                  "{count} {shape}{s}, {colour}, on {bg}.", "a drawing of {count} {colour} {shape}{s} on {bg}.")


def scene_captions(s: LabelledImages, captions: int) -> list[list[str]]:
    """`captions` procedural caption variants per scene image (its count, background, shape, colour)."""
    out = []
    for i in range(len(s.images)):
        n, b, sh, c = (int(s.labels[k][i]) for k in ("count", "background", "shape", "colour"))
        f = dict(count=COUNTS[n], s="s" if n else "", bg=list(BACKGROUNDS)[b], shape=SHAPES[sh], colour=list(COLOURS)[c])
        out.append([SCENE_CAPTIONS[k % len(SCENE_CAPTIONS)].format(**f) for k in range(captions)])
    return out
