"""The question families: one per task type evalkit scores, ground truth by construction.

A family is a function ``(rng, canvas) -> Item`` registered with ``@family(name, task_type)``.
It decides a scene at random, draws every frame, and states the question and the answer
it just drew. Times are frame starts: frame ``i`` is shown during ``[i/fps, (i+1)/fps)``,
so an object visible in frames ``i0..i1`` is on screen during ``[i0/fps, (i1+1)/fps]``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from evalkit.registry import Registry
from evalkit.synthvideo.draw import (
    COLOURS,
    PALETTE,
    SHAPE_NAMES,
    Thing,
    blank,
    draw_thing,
    paste,
    shape_mask,
    text_mask,
    text_scale,
    thing_box,
)
from evalkit.synthvideo.scene import (
    DIRECTIONS,
    Canvas,
    Item,
    choices,
    lerp,
    n_frames,
    path,
    place,
    thing_size,
    things,
)


@dataclass(frozen=True)
class Family:
    """A registered question family and the task type its samples are scored as."""

    name: str
    task_type: str
    make: Callable[[random.Random, Canvas], Item]


FAMILIES: Registry[Family] = Registry("SynthVideo family")


def family(name: str, task_type: str) -> Callable[[Callable[..., Item]], Callable[..., Item]]:
    """Register a family function under ``name``, scored as ``task_type``."""

    def deco(
        fn: Callable[[random.Random, Canvas], Item],
    ) -> Callable[[random.Random, Canvas], Item]:
        FAMILIES.register(name, Family(name, task_type, fn))
        return fn

    return deco


def _static(canvas: Canvas, n: int, placed: list[tuple[Thing, int, int]]) -> np.ndarray:
    frames = blank(canvas.width, canvas.height, n)
    for thing, x, y in placed:
        draw_thing(frames[0], thing, x, y)
    frames[1:] = frames[0]
    return frames


@family("moving_shape", "multiple_choice")
def moving_shape(rng: random.Random, canvas: Canvas) -> Item:
    """One thing crosses the frame in a straight line next to a still one; ask its colour,
    its shape or its direction."""
    n = n_frames(rng, canvas)
    mover, still = things(rng, canvas, 2)
    direction = rng.choice(list(DIRECTIONS))
    start, end = path(rng, canvas, mover.size, direction)
    sx, sy = place(rng, canvas, still.size, [(*start, mover.size), (*end, mover.size)])
    frames = _static(canvas, n, [(still, sx, sy)])
    for i in range(n):
        draw_thing(frames[i], mover, *lerp(start, end, i, n))
    kind = rng.choice(["colour", "shape", "direction"])
    if kind == "colour":
        question, correct, pool = "What color is the moving shape?", mover.colour, COLOURS
    elif kind == "shape":
        question, correct, pool = "What shape is the moving object?", mover.shape, SHAPE_NAMES
    else:
        question, correct = f"In which direction does the {mover.label} move?", direction
        pool = list(DIRECTIONS)
    options, letter = choices(rng, correct, pool)
    return Item(kind, question, letter, frames, options, {"mover": mover.label})


@family("flash_count", "numerical")
def flash_count(rng: random.Random, canvas: Canvas) -> Item:
    """A lamp lights up k times. Each flash and each dark gap lasts at least 0.75 s, so
    sampling at 2 fps (even with Qwen's uneven linspace rounding) sees every flash apart."""
    on = max(1, math.ceil(0.75 * canvas.fps))
    k_max = max(1, min(5, (canvas.frames_for(8.0) - 2 + on) // (2 * on)))
    k = rng.randint(1, k_max)
    need = k * on + (k - 1) * on + 2  # flashes, gaps between them, one dark frame each end
    n = n_frames(rng, canvas, least=need)
    gaps = [1] + [on] * (k - 1) + [1]
    for _ in range(n - need):  # spread the spare dark frames over the gaps at random
        gaps[rng.randrange(len(gaps))] += 1
    colour = rng.choice(COLOURS)
    size = thing_size(rng, canvas)
    x, y = place(rng, canvas, size, [])
    lamp = shape_mask("circle", size)
    frames = blank(canvas.width, canvas.height, n)
    lit = np.zeros(n, bool)
    t = gaps[0]
    for j in range(k):
        lit[t : t + on] = True
        t += on + gaps[j + 1]
    dim = tuple(int(v * 0.25) + 16 for v in PALETTE[colour])  # an unlit bulb, still visible
    for i in range(n):
        paste(frames[i], lamp, x, y, PALETTE[colour] if lit[i] else dim)
    question = f"How many times does the {colour} light flash?"
    return Item("count", question, k, frames, params={"lamp": colour})


def _appear_window(rng: random.Random, canvas: Canvas, n: int) -> tuple[int, int]:
    """First and last visible frame: on screen 1 s to 60% of the clip, never at either end."""
    edge = max(1, math.ceil(0.5 * canvas.fps))
    shortest = max(1, math.ceil(1.0 * canvas.fps))
    longest = max(shortest, min(math.floor(0.6 * n), n - 2 * edge))
    length = rng.randint(shortest, longest)
    i0 = rng.randint(edge, n - edge - length)
    return i0, i0 + length - 1


@family("appearance", "temporal_grounding")
def appearance(rng: random.Random, canvas: Canvas) -> Item:
    """A thing shows up, stays still for a while and vanishes, next to one always there."""
    n = n_frames(rng, canvas, least=4 * max(1, math.ceil(canvas.fps)))
    target, other = things(rng, canvas, 2)
    tx, ty = place(rng, canvas, target.size, [])
    ox, oy = place(rng, canvas, other.size, [(tx, ty, target.size)])
    frames = _static(canvas, n, [(other, ox, oy)])
    i0, i1 = _appear_window(rng, canvas, n)
    for i in range(i0, i1 + 1):
        draw_thing(frames[i], target, tx, ty)
    span = [canvas.time(i0), canvas.time(i1 + 1)]
    return Item(
        "appear", f"The {target.label} is on screen.", span, frames, params={"target": target.label}
    )


@family("location", "spatial_grounding")
def location(rng: random.Random, canvas: Canvas) -> Item:
    """Two to four still things; ask for the box of one (tight pixel box, x2/y2 exclusive)."""
    n = n_frames(rng, canvas)
    scene = things(rng, canvas, rng.randint(2, 4))
    placed: list[tuple[Thing, int, int]] = []
    for t in scene:
        x, y = place(rng, canvas, t.size, [(px, py, p.size) for p, px, py in placed])
        placed.append((t, x, y))
    target, x, y = rng.choice(placed)
    frames = _static(canvas, n, placed)
    return Item(
        "box",
        f"the {target.label}",
        thing_box(target, x, y),
        frames,
        params={"target": target.label},
    )


@family("tracking", "spatiotemporal_grounding")
def tracking(rng: random.Random, canvas: Canvas) -> Item:
    """A thing appears, moves in a straight line and vanishes; answer its span and its box
    at every frame it is on screen, keyed by frame time in seconds."""
    n = n_frames(rng, canvas, least=4 * max(1, math.ceil(canvas.fps)))
    target, other = things(rng, canvas, 2)
    i0, i1 = _appear_window(rng, canvas, n)
    start, end = path(rng, canvas, target.size, rng.choice(list(DIRECTIONS)))
    ox, oy = place(rng, canvas, other.size, [(*start, target.size), (*end, target.size)])
    frames = _static(canvas, n, [(other, ox, oy)])
    boxes: dict[str, list[int]] = {}
    for i in range(i0, i1 + 1):
        x, y = lerp(start, end, i - i0, i1 - i0 + 1)
        draw_thing(frames[i], target, x, y)  # drawn last: in front of the still thing
        boxes[f"{canvas.time(i):g}"] = thing_box(target, x, y)
    answer = {"time": [canvas.time(i0), canvas.time(i1 + 1)], "boxes": boxes}
    question = f"the {target.label} moves across the screen"
    return Item("track", question, answer, frames, params={"target": target.label})


WORDS = (
    "CAT",
    "DOG",
    "SUN",
    "MOON",
    "STAR",
    "TREE",
    "FISH",
    "BIRD",
    "LAMP",
    "DOOR",
    "BOOK",
    "CAKE",
    "MILK",
    "RAIN",
    "SNOW",
    "WIND",
    "ROAD",
    "SHIP",
    "BOAT",
    "KITE",
    "FROG",
    "BEAR",
    "LION",
    "WOLF",
    "DUCK",
    "SALT",
    "GOLD",
    "RING",
    "BELL",
    "DRUM",
    "APPLE",
    "HOUSE",
    "RIVER",
    "CLOUD",
    "PLANT",
    "TIGER",
    "ZEBRA",
    "HORSE",
    "CHAIR",
    "TABLE",
)


def _text_frames(rng: random.Random, canvas: Canvas, text: str) -> tuple[np.ndarray, dict]:
    """Frames showing ``text`` still at a random place in a random colour; where it is."""
    n = n_frames(rng, canvas)
    scale = text_scale(text, canvas.width, canvas.height)
    mask = text_mask(text, scale)
    h, w = mask.shape
    x = rng.randint(4, canvas.width - w - 4)
    y = rng.randint(4, canvas.height - h - 4)
    colour = rng.choice(COLOURS)
    frames = blank(canvas.width, canvas.height, n)
    paste(frames[0], mask, x, y, PALETTE[colour])
    frames[1:] = frames[0]
    return frames, {"scale": scale}


@family("word", "ocr")
def word(rng: random.Random, canvas: Canvas) -> Item:
    """A capitalised word written still on screen; the answer is the word as written."""
    text = rng.choice(WORDS)
    frames, params = _text_frames(rng, canvas, text)
    return Item("read", "What word is written in the video?", text, frames, params=params)


@family("equation", "math")
def equation(rng: random.Random, canvas: Canvas) -> Item:
    """``a + b = ?``, ``a - b = ?`` or ``a x b = ?`` with one-digit numbers (never negative)."""
    op = rng.choice("+-x")
    a, b = rng.randint(1, 9), rng.randint(1, 9)
    if op == "-" and a < b:
        a, b = b, a
    value = a + b if op == "+" else a - b if op == "-" else a * b
    frames, params = _text_frames(rng, canvas, f"{a} {op} {b} = ?")
    question = "Solve the equation shown in the video."
    return Item("arithmetic", question, str(value), frames, params=params)


def _absent_label(rng: random.Random, scene: list[Thing]) -> str:
    """A colour-shape pair not in ``scene`` that shares a colour or a shape with it."""
    present = {t.label for t in scene}
    known = rng.choice(scene)
    cands = [f"{known.colour} {s}" for s in SHAPE_NAMES] + [f"{c} {known.shape}" for c in COLOURS]
    return rng.choice([c for c in cands if c not in present])


@family("yes_no", "boolean")
def yes_no(rng: random.Random, canvas: Canvas) -> Item:
    """Two or three things; ask whether one is there, is left of another, or moves."""
    n = n_frames(rng, canvas)
    kind = rng.choice(["present", "left_of", "moves"])
    scene = things(rng, canvas, rng.randint(2, 3))
    yes = rng.random() < 0.5
    mover = scene[0] if kind == "moves" else None
    start = end = (0, 0)
    avoid: list[tuple[int, int, int]] = []
    if mover is not None:
        start, end = path(rng, canvas, mover.size, rng.choice(list(DIRECTIONS)))
        avoid = [(*start, mover.size), (*end, mover.size)]
    placed: list[tuple[Thing, int, int]] = []
    for t in scene[1:] if mover else scene:
        taken = avoid + [(px, py, p.size) for p, px, py in placed]
        x, y = place(rng, canvas, t.size, taken, apart_x=kind == "left_of")
        placed.append((t, x, y))
    frames = _static(canvas, n, placed)
    if mover is not None:
        for i in range(n):
            draw_thing(frames[i], mover, *lerp(start, end, i, n))
    answer = "yes" if yes else "no"
    if kind == "present":
        label = rng.choice(scene).label if yes else _absent_label(rng, scene)
        article = "an" if label[0] in "aeiou" else "a"
        question = f"Is there {article} {label} in the video?"
        return Item(kind, question, answer, frames, params={"target": label})
    if kind == "moves":
        target = mover if yes else rng.choice(scene[1:])
        assert target is not None
        question = f"Does the {target.label} move?"
        return Item(kind, question, answer, frames, params={"target": target.label})
    # left_of: columns never overlap, so one of each pair is clearly left of the other.
    (a, _, _), (b, _, _) = sorted(rng.sample(placed, 2), key=lambda p: p[1])
    if not yes:
        a, b = b, a
    question = f"Is the {a.label} to the left of the {b.label}?"
    return Item(kind, question, answer, frames, params={"target": a.label, "other": b.label})
