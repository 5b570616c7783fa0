"""Drawing SynthVideo frames: a fixed palette, a few filled shapes, and bitmap text.

Everything is drawn with whole-pixel masks on a flat background, so what a frame shows
is exactly what the generator decided (no anti-aliasing that would blur a box edge),
and colours stay far apart after H.264's 4:2:0 chroma subsampling.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

BACKGROUND = (24, 24, 24)

# Saturated colours, pairwise far apart in RGB (and in chroma), named as people name them.
PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (230, 30, 30),
    "green": (30, 200, 50),
    "blue": (40, 80, 240),
    "yellow": (245, 230, 30),
    "magenta": (230, 40, 220),
    "cyan": (30, 220, 230),
    "white": (245, 245, 245),
    "orange": (250, 140, 20),
}
COLOURS = list(PALETTE)


def _grid(size: int) -> tuple[np.ndarray, np.ndarray]:
    # Pixel centres relative to the middle of a size x size square.
    c = np.arange(size) + 0.5 - size / 2
    return np.meshgrid(c, c, indexing="xy")


def _circle(size: int) -> np.ndarray:
    x, y = _grid(size)
    return np.asarray(x * x + y * y <= (size / 2) ** 2)


def _ring(size: int) -> np.ndarray:
    x, y = _grid(size)
    r2 = x * x + y * y
    return np.asarray((r2 <= (size / 2) ** 2) & (r2 >= (size / 4) ** 2))


def _square(size: int) -> np.ndarray:
    return np.ones((size, size), bool)


def _triangle(size: int) -> np.ndarray:
    # Apex at the top middle, base along the bottom row.
    x, y = _grid(size)
    return np.asarray(np.abs(x) <= (y + size / 2) / 2)


def _diamond(size: int) -> np.ndarray:
    x, y = _grid(size)
    return np.asarray(np.abs(x) + np.abs(y) <= size / 2)


def _cross(size: int) -> np.ndarray:
    x, y = _grid(size)
    return np.asarray((np.abs(x) <= size / 6) | (np.abs(y) <= size / 6))


SHAPES: dict[str, Callable[[int], np.ndarray]] = {
    "circle": _circle,
    "square": _square,
    "triangle": _triangle,
    "diamond": _diamond,
    "cross": _cross,
    "ring": _ring,
}
SHAPE_NAMES = list(SHAPES)


@lru_cache(maxsize=256)
def shape_mask(shape: str, size: int) -> np.ndarray:
    """Boolean size x size mask of a named shape (read-only, cached)."""
    mask = SHAPES[shape](size)
    mask.setflags(write=False)
    return mask


@dataclass(frozen=True)
class Thing:
    """One shape of one colour; ``x, y`` is the top-left corner of its size x size square."""

    shape: str
    colour: str
    size: int

    @property
    def label(self) -> str:
        """How questions name it (``red circle``)."""
        return f"{self.colour} {self.shape}"


def box_of(mask: np.ndarray, x: int, y: int) -> list[int]:
    """Tight box ``[x1, y1, x2, y2]`` of a mask pasted at (x, y); x2/y2 are exclusive edges."""
    rows = np.flatnonzero(mask.any(axis=1))
    cols = np.flatnonzero(mask.any(axis=0))
    return [x + int(cols[0]), y + int(rows[0]), x + int(cols[-1]) + 1, y + int(rows[-1]) + 1]


def thing_box(thing: Thing, x: int, y: int) -> list[int]:
    """Tight pixel box of ``thing`` drawn with its square's top-left corner at (x, y)."""
    return box_of(shape_mask(thing.shape, thing.size), x, y)


def paste(frame: np.ndarray, mask: np.ndarray, x: int, y: int, colour: tuple[int, ...]) -> None:
    """Paint ``colour`` where ``mask`` is set, mask's top-left at (x, y); clipped to the frame."""
    h, w = frame.shape[:2]
    mh, mw = mask.shape
    x0, y0, x1, y1 = max(x, 0), max(y, 0), min(x + mw, w), min(y + mh, h)
    if x0 >= x1 or y0 >= y1:
        return
    sub = mask[y0 - y : y1 - y, x0 - x : x1 - x]
    frame[y0:y1, x0:x1][sub] = colour


def draw_thing(frame: np.ndarray, thing: Thing, x: int, y: int) -> None:
    """Draw ``thing`` with its square's top-left corner at (x, y)."""
    paste(frame, shape_mask(thing.shape, thing.size), x, y, PALETTE[thing.colour])


def blank(width: int, height: int, n: int = 1) -> np.ndarray:
    """``n`` background frames, shape (n, height, width, 3), uint8."""
    row = np.empty((width, 3), np.uint8)
    row[:] = BACKGROUND
    out = np.empty((n, height, width, 3), np.uint8)
    out[...] = row  # broadcasting whole rows is far faster than 3-byte pixels
    return out


# --- text ------------------------------------------------------------------------------

GLYPH_W, GLYPH_H = 6, 11  # PIL's built-in bitmap font: fixed 6 x 11 px cells


@lru_cache(maxsize=512)
def text_mask(text: str, scale: int) -> np.ndarray:
    """Boolean mask of ``text`` in PIL's built-in bitmap font, blown up ``scale`` times.

    The bitmap font ships inside Pillow (no font file, no download) and has fixed 6 x 11
    glyph cells; nearest-neighbour scaling keeps strokes as solid blocks of pixels that
    survive video compression.
    """
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default_imagefont()
    im = Image.new("L", (GLYPH_W * len(text), GLYPH_H), 0)
    ImageDraw.Draw(im).text((0, 0), text, fill=255, font=font)
    small = np.asarray(im) > 127
    mask = np.repeat(np.repeat(small, scale, axis=0), scale, axis=1)
    mask.setflags(write=False)
    return mask


def text_scale(text: str, width: int, height: int, *, largest: int = 4) -> int:
    """The largest scale (<= ``largest``) at which ``text`` fits in 85% of the frame."""
    for scale in range(largest, 0, -1):
        if GLYPH_W * len(text) * scale <= 0.85 * width and GLYPH_H * scale <= 0.5 * height:
            return scale
    raise ValueError(f"text {text!r} does not fit a {width}x{height} frame")
