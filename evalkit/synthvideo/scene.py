"""Scene helpers shared by the question families: canvas, random things, placement, motion."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evalkit.synthvideo.draw import COLOURS, SHAPE_NAMES, Thing

# name -> (dx, dy) in image coordinates (y grows downwards).
DIRECTIONS: dict[str, tuple[int, int]] = {
    "left": (-1, 0),
    "right": (1, 0),
    "up": (0, -1),
    "down": (0, 1),
    "up-left": (-1, -1),
    "up-right": (1, -1),
    "down-left": (-1, 1),
    "down-right": (1, 1),
}
MARGIN = 4  # px kept free along the frame border
MIN_SECONDS, MAX_SECONDS = 4.0, 8.0


@dataclass(frozen=True)
class Canvas:
    """Frame size and rate of every video of one generation run."""

    width: int
    height: int
    fps: float

    @property
    def base(self) -> int:
        """The shorter side: object and text sizes scale with it."""
        return min(self.width, self.height)

    def frames_for(self, seconds: float) -> int:
        """Frame count of a clip of ``seconds`` (at least one)."""
        return max(1, round(seconds * self.fps))

    def time(self, index: int) -> float:
        """Start time of frame ``index`` in seconds, rounded to the millisecond."""
        return round(index / self.fps, 3)


@dataclass
class Item:
    """What a family produced: the frames, the question and its answer."""

    kind: str
    question: str
    answer: Any
    frames: np.ndarray
    options: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    """What the question asks about (names, not the answer): lets a checker find it."""


def n_frames(rng: random.Random, canvas: Canvas, least: int = 1) -> int:
    """A random clip length in [MIN_SECONDS, MAX_SECONDS] seconds, at least ``least`` frames."""
    lo = max(canvas.frames_for(MIN_SECONDS), least)
    hi = max(canvas.frames_for(MAX_SECONDS), lo)
    return rng.randint(lo, hi)


def thing_size(rng: random.Random, canvas: Canvas) -> int:
    """Side of a thing's square: 16-22% of the shorter frame side (even, >= 12 px)."""
    lo, hi = round(0.16 * canvas.base), round(0.22 * canvas.base)
    return max(12, rng.randint(lo, hi) // 2 * 2)


def things(rng: random.Random, canvas: Canvas, n: int) -> list[Thing]:
    """``n`` things with pairwise different colours AND shapes (so either names one)."""
    colours = rng.sample(COLOURS, n)
    shapes = rng.sample(SHAPE_NAMES, n)
    return [Thing(s, c, thing_size(rng, canvas)) for s, c in zip(shapes, colours, strict=True)]


Square = tuple[int, int, int]  # x, y, size


def _overlaps(a: Square, b: Square, gap: int) -> bool:
    ax, ay, asz = a
    bx, by, bsz = b
    return not (
        ax + asz + gap <= bx or bx + bsz + gap <= ax or ay + asz + gap <= by or by + bsz + gap <= ay
    )


def place(
    rng: random.Random,
    canvas: Canvas,
    size: int,
    avoid: list[Square],
    gap: int = 6,
    *,
    apart_x: bool = False,
) -> tuple[int, int]:
    """A random top-left corner for a size x size square inside the frame, clear of ``avoid``.

    ``apart_x``: also keep its columns clear of theirs, so that "left of" is never a tie.
    """
    hi_x, hi_y = canvas.width - size - MARGIN, canvas.height - size - MARGIN
    if hi_x < MARGIN or hi_y < MARGIN:
        raise ValueError(f"a {size}px thing does not fit a {canvas.width}x{canvas.height} frame")
    for _ in range(500):
        x, y = rng.randint(MARGIN, hi_x), rng.randint(MARGIN, hi_y)
        here = (x, 0, size) if apart_x else (x, y, size)
        if not any(_overlaps(here, (sq[0], 0, sq[2]) if apart_x else sq, gap) for sq in avoid):
            return x, y
    raise ValueError(
        f"no room for another {size}px thing in a {canvas.width}x{canvas.height} frame"
    )


def path(
    rng: random.Random, canvas: Canvas, size: int, direction: str
) -> tuple[tuple[int, int], tuple[int, int]]:
    """Start and end corners of a straight move in ``direction`` covering much of the frame.

    A horizontal/vertical move travels 50-100% of the free width/height; a diagonal one
    the same distance along both axes (so its angle is 45 degrees).
    """
    dx, dy = DIRECTIONS[direction]
    free_x = canvas.width - size - 2 * MARGIN
    free_y = canvas.height - size - 2 * MARGIN
    if dx and dy:
        d = min(free_x, free_y)
        lx = ly = rng.randint(math.ceil(0.6 * d), d)
    else:
        lx = rng.randint(math.ceil(0.5 * free_x), free_x) if dx else 0
        ly = rng.randint(math.ceil(0.5 * free_y), free_y) if dy else 0
    x0 = MARGIN + rng.randint(0, free_x - lx) + (lx if dx < 0 else 0)
    y0 = MARGIN + rng.randint(0, free_y - ly) + (ly if dy < 0 else 0)
    return (x0, y0), (x0 + dx * lx, y0 + dy * ly)


def lerp(a: tuple[int, int], b: tuple[int, int], i: int, n: int) -> tuple[int, int]:
    """Whole-pixel position at step ``i`` of ``n`` going from ``a`` to ``b``."""
    t = i / (n - 1) if n > 1 else 0.0
    return round(a[0] + (b[0] - a[0]) * t), round(a[1] + (b[1] - a[1]) * t)


def choices(rng: random.Random, correct: str, pool: list[str]) -> tuple[list[str], str]:
    """4-6 shuffled options holding ``correct`` (as many as the pool allows) and its letter."""
    n = rng.randint(4, min(6, len(pool)))
    opts = [correct, *rng.sample([p for p in pool if p != correct], n - 1)]
    rng.shuffle(opts)
    return opts, "ABCDEF"[opts.index(correct)]
