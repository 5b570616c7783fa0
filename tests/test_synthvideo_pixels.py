"""SynthVideo's ground truth is right: every answer is recovered from the DECODED pixels.

Each test decodes the generated H.264 clips with PyAV and recovers the answer with its own
image analysis (colour masks, centroids, bounding boxes, blinking regions, re-rendered
text), never with the generator's bookkeeping. It only borrows the legend: which RGB
value each colour name stands for (its hues are checked too) and the word list.
"""

from __future__ import annotations

import colorsys
import functools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evalkit.synthvideo import generate, read_rows
from evalkit.synthvideo.draw import BACKGROUND, PALETTE
from evalkit.synthvideo.families import WORDS

N_PER_FAMILY = 4
_COLS = np.array([*PALETTE.values(), BACKGROUND], float)
_NAMES = [*PALETTE, "background"]
# Our own direction legend (image y grows downwards), independent of the generator's.
_DIRS = {
    "left": (-1, 0),
    "right": (1, 0),
    "up": (0, -1),
    "down": (0, 1),
    "up-left": (-1, -1),
    "up-right": (1, -1),
    "down-left": (-1, 1),
    "down-right": (1, 1),
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    root = tmp_path_factory.mktemp("synthvideo")
    rows = read_rows(generate(root, N_PER_FAMILY, "test", seed=7))
    return root, rows


def _rows(dataset: tuple[Path, list[dict[str, Any]]], family: str) -> list[dict[str, Any]]:
    rows = [r for r in dataset[1] if r["family"] == family]
    assert len(rows) == N_PER_FAMILY
    return rows


def decode(path: Path) -> np.ndarray:
    """All frames of a clip, T x H x W x 3 RGB."""
    import av

    with av.open(str(path)) as container:
        return np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])


def _frames(root: Path, row: dict[str, Any]) -> np.ndarray:
    frames = decode(root / row["video"])
    assert frames.shape == (row["num_frames"], row["height"], row["width"], 3)
    return frames


# --- pixel analysis --------------------------------------------------------------------


def _bbox(mask: np.ndarray) -> list[int]:
    ys, xs = np.nonzero(mask)
    return [int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1]


def find(frame: np.ndarray, colour: str) -> tuple[list[int], np.ndarray] | None:
    """Tight box and mask of the blob of ``colour``, or None when it is not in the frame.

    Pixels close to the colour (inside the blob, untouched by compression) locate it;
    around them, each pixel goes to its nearest palette colour, which puts the blurred
    edge pixels on the right side of the edge.
    """
    f = frame.astype(float)
    core = np.linalg.norm(f - PALETTE[colour], axis=-1) < 40
    if core.sum() < 20:
        return None
    x0, y0, x1, y1 = _bbox(core)
    h, w = core.shape
    x0, y0, x1, y1 = max(x0 - 3, 0), max(y0 - 3, 0), min(x1 + 3, w), min(y1 + 3, h)
    window = f[y0:y1, x0:x1]
    nearest = np.linalg.norm(window[:, :, None, :] - _COLS, axis=-1).argmin(-1)
    mask = nearest == _NAMES.index(colour)
    bx0, by0, bx1, by1 = _bbox(mask)
    return [x0 + bx0, y0 + by0, x0 + bx1, y0 + by1], mask[by0:by1, bx0:bx1]


def _width_at(mask: np.ndarray, frac: float) -> float:
    row = mask[min(int(frac * mask.shape[0]), mask.shape[0] - 1)]
    return float(row.sum()) / mask.shape[1]


def classify_shape(mask: np.ndarray) -> str:
    """Shape of a blob from its mask: fill ratio, a hole, and row widths."""
    h, w = mask.shape
    centre = mask[h // 2 - 1 : h // 2 + 2, w // 2 - 1 : w // 2 + 2].mean()
    if centre < 0.5:
        return "ring"
    fill = mask.mean()
    if fill > 0.9:
        return "square"
    if fill > 0.7:
        return "circle"
    top, bottom = _width_at(mask, 0.25), _width_at(mask, 0.75)
    if bottom > 1.8 * top:
        return "triangle"
    return "diamond" if top > 0.42 else "cross"


def _centre(box: list[int]) -> tuple[float, float]:
    return (box[0] + box[2]) / 2, (box[1] + box[3]) / 2


def _iou(a: list[float], b: list[float]) -> float:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def _direction(dx: float, dy: float) -> str:
    def cos(v: tuple[int, int]) -> float:
        return (dx * v[0] + dy * v[1]) / math.hypot(*v) / math.hypot(dx, dy)

    return max(_DIRS, key=lambda name: cos(_DIRS[name]))


def _answer_option(row: dict[str, Any]) -> str:
    return row["options"]["ABCDEF".index(row["answer"])]


# --- the legend ------------------------------------------------------------------------


def test_palette_names_match_their_hue() -> None:
    hues = {"red": 0, "orange": 30, "yellow": 55, "green": 125, "cyan": 185, "blue": 225}
    hues["magenta"] = 302
    for name, rgb in PALETTE.items():
        h, _, s = colorsys.rgb_to_hls(*(v / 255 for v in rgb))
        if name == "white":
            assert min(rgb) > 200
            continue
        diff = abs(h * 360 - hues[name])
        assert min(diff, 360 - diff) < 20 and s > 0.6, name


def test_shape_classifier_tells_every_shape_apart() -> None:
    # The classifier below is the checker of the families; make sure it can see shapes.
    from evalkit.synthvideo.draw import SHAPE_NAMES, shape_mask

    for size in (20, 28, 36):
        for name in SHAPE_NAMES:
            m = shape_mask(name, size)
            ys, xs = np.nonzero(m)
            assert classify_shape(m[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1]) == name


# --- one test per family ---------------------------------------------------------------


def test_moving_shape_answer_is_the_colour_shape_or_direction_seen(dataset) -> None:
    root, _ = dataset
    for row in _rows(dataset, "moving_shape"):
        frames = _frames(root, row)
        moves = {}
        for colour in PALETTE:
            a, b = find(frames[0], colour), find(frames[-1], colour)
            if a and b:
                (ax, ay), (bx, by) = _centre(a[0]), _centre(b[0])
                moves[colour] = (bx - ax, by - ay, a[1])
        assert len(moves) == 2, row["id"]  # the mover and a still distractor
        mover = max(moves, key=lambda c: math.hypot(*moves[c][:2]))
        still = min(moves, key=lambda c: math.hypot(*moves[c][:2]))
        assert math.hypot(*moves[still][:2]) < 1.0 and math.hypot(*moves[mover][:2]) > 30
        dx, dy, mask = moves[mover]
        seen = {"colour": mover, "shape": classify_shape(mask), "direction": _direction(dx, dy)}
        assert _answer_option(row) == seen[row["kind"]], row["id"]
        assert 4 <= len(row["options"]) <= 6 and len(set(row["options"])) == len(row["options"])
        assert row["params"]["mover"] == f"{seen['colour']} {seen['shape']}"


def _lit_runs(brightness: np.ndarray) -> int:
    lit = brightness > (brightness.min() + brightness.max()) / 2
    return int(lit[0]) + int(np.count_nonzero(lit[1:] & ~lit[:-1]))


def test_flash_count_equals_the_flashes_seen_at_source_rate_and_at_2fps(dataset) -> None:
    from evalkit.bench.registry import get_benchmark
    from evalkit.video.sampling import sample_indices

    root, _ = dataset
    spec = get_benchmark("SynthVideo").frames
    for row in _rows(dataset, "flash_count"):
        value = _frames(root, row).astype(float).max(axis=-1)  # HSV value: how lit
        blinking = (value.max(axis=0) - value.min(axis=0)) > 80  # the lamp, nothing else
        assert blinking.sum() > 100, row["id"]
        brightness = value[:, blinking].mean(axis=1)
        assert _lit_runs(brightness) == row["answer"], row["id"]
        # The benchmark's own frame sampling (2 fps, Qwen's rule) still sees every flash.
        idx = sample_indices(row["num_frames"], row["fps"], spec)
        assert _lit_runs(brightness[idx]) == row["answer"], (row["id"], idx)


def _visible(frames: np.ndarray, colour: str) -> list[int]:
    return [i for i, f in enumerate(frames) if find(f, colour) is not None]


def test_appearance_span_is_when_the_object_is_on_screen(dataset) -> None:
    root, _ = dataset
    for row in _rows(dataset, "appearance"):
        frames = _frames(root, row)
        colour, shape = row["params"]["target"].split()
        seen = _visible(frames, colour)
        assert seen == list(range(seen[0], seen[-1] + 1)), row["id"]  # one contiguous stretch
        assert seen[0] > 0 and seen[-1] < len(frames) - 1  # absent at both ends
        start, end = seen[0] / row["fps"], (seen[-1] + 1) / row["fps"]
        assert row["answer"] == pytest.approx([start, end], abs=1e-3), row["id"]
        found = find(frames[seen[0]], colour)
        assert found and classify_shape(found[1]) == shape


def test_location_box_is_where_the_object_is_drawn(dataset) -> None:
    root, _ = dataset
    for row in _rows(dataset, "location"):
        frames = _frames(root, row)
        colour, shape = row["params"]["target"].split()
        found = find(frames[len(frames) // 2], colour)
        assert found is not None, row["id"]
        box, mask = found
        assert np.abs(np.subtract(box, row["answer"])).max() <= 2, (row["id"], box)
        assert _iou(box, row["answer"]) > 0.85
        assert classify_shape(mask) == shape, row["id"]


def test_tracking_span_and_boxes_follow_the_object(dataset) -> None:
    root, _ = dataset
    for row in _rows(dataset, "tracking"):
        frames = _frames(root, row)
        colour, _ = row["params"]["target"].split()
        seen = _visible(frames, colour)
        assert seen == list(range(seen[0], seen[-1] + 1)), row["id"]
        fps = row["fps"]
        assert row["answer"]["time"] == pytest.approx([seen[0] / fps, (seen[-1] + 1) / fps])
        boxes = row["answer"]["boxes"]
        assert sorted(float(k) for k in boxes) == pytest.approx([i / fps for i in seen])
        for i in seen:
            found = find(frames[i], colour)
            assert found is not None
            gold = boxes[f"{i / fps:g}"]
            assert np.abs(np.subtract(found[0], gold)).max() <= 2, (row["id"], i)
        first, last = find(frames[seen[0]], colour), find(frames[seen[-1]], colour)
        assert first and last and first[0] != last[0]  # it moved


# --- text: compare the drawn ink with re-renders of every candidate --------------------


@functools.lru_cache(maxsize=4096)
def _render(text: str, scale: int) -> np.ndarray:
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default_imagefont()
    im = Image.new("L", (6 * len(text) + 4, 14), 0)
    ImageDraw.Draw(im).text((0, 0), text, fill=255, font=font)
    small = np.asarray(im) > 127
    big = np.kron(small, np.ones((scale, scale), bool))
    ys, xs = np.nonzero(big)
    return big[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1]


def _ink(frame: np.ndarray) -> np.ndarray:
    nearest = np.linalg.norm(frame.astype(float)[:, :, None, :] - _COLS, axis=-1).argmin(-1)
    far = nearest != _NAMES.index("background")
    ys, xs = np.nonzero(far)
    return far[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1]


def _agreement(ink: np.ndarray, ref: np.ndarray) -> float:
    """Best IoU of the two masks over shifts of one pixel (the ink box may be off by one)."""
    if abs(ink.shape[0] - ref.shape[0]) > 2 or abs(ink.shape[1] - ref.shape[1]) > 2:
        return 0.0
    h, w = max(ink.shape[0], ref.shape[0]) + 4, max(ink.shape[1], ref.shape[1]) + 4
    a = np.zeros((h, w), bool)
    a[2 : 2 + ink.shape[0], 2 : 2 + ink.shape[1]] = ink
    best = 0.0
    for dy in (1, 2, 3):
        for dx in (1, 2, 3):
            b = np.zeros((h, w), bool)
            b[dy : dy + ref.shape[0], dx : dx + ref.shape[1]] = ref
            best = max(best, (a & b).sum() / (a | b).sum())
    return float(best)


def read_text(frame: np.ndarray, candidates: list[str]) -> tuple[str, float, float]:
    """The candidate whose rendering best matches the ink, its agreement, the runner-up's."""
    ink = _ink(frame)
    # Capitals and digits share one height per scale: keep the scales that fit the ink.
    scales = [s for s in (1, 2, 3, 4) if abs(_render(candidates[0], s).shape[0] - ink.shape[0]) < 3]
    scored = sorted(
        ((max(_agreement(ink, _render(t, s)) for s in scales), t) for t in candidates),
        reverse=True,
    )
    return scored[0][1], scored[0][0], scored[1][0]


def test_word_drawn_is_the_target_word(dataset) -> None:
    root, _ = dataset
    for row in _rows(dataset, "word"):
        frames = _frames(root, row)
        assert (frames == frames[0]).mean() > 0.95  # still text
        text, best, second = read_text(frames[len(frames) // 2], list(WORDS))
        assert text == row["answer"], row["id"]
        assert best > 0.95 and second < best - 0.05


def test_equation_drawn_evaluates_to_the_target(dataset) -> None:
    root, _ = dataset
    ops = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "x": lambda a, b: a * b}
    candidates = [f"{a} {op} {b} = ?" for op in ops for a in range(10) for b in range(10)]
    for row in _rows(dataset, "equation"):
        frames = _frames(root, row)
        text, best, second = read_text(frames[len(frames) // 2], candidates)
        assert best > 0.95 and second < best - 0.02, row["id"]
        a, op, b = text.split()[:3]
        assert str(ops[op](int(a), int(b))) == row["answer"], (row["id"], text)


# --- yes/no ----------------------------------------------------------------------------


def test_yes_no_answer_holds_in_the_pixels(dataset) -> None:
    root, _ = dataset
    rows = _rows(dataset, "yes_no")
    extra = read_rows(generate(root / "more", 8, "test", seed=11, families=["yes_no"]))
    for row in rows + extra:
        base = root / "more" if row in extra else root
        frames = _frames(base, row)
        colour, shape = row["params"]["target"].split()
        first, last = find(frames[0], colour), find(frames[-1], colour)
        if row["kind"] == "present":
            truth = first is not None and classify_shape(first[1]) == shape
        elif row["kind"] == "moves":
            assert first and last
            truth = math.dist(_centre(first[0]), _centre(last[0])) > 8
        else:
            other = find(frames[0], row["params"]["other"].split()[0])
            assert first and other
            truth = _centre(first[0])[0] < _centre(other[0])[0]
        assert row["answer"] == ("yes" if truth else "no"), row["id"]
    kinds = {r["kind"] for r in rows + extra}
    assert kinds == {"present", "moves", "left_of"}
    assert {r["answer"] for r in rows + extra} == {"yes", "no"}
