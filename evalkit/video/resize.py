"""Qwen-style spatial resizing: sizes and pixels exactly as qwen-vl-utils 0.0.14 makes them.

Sizes are the contract (they fix the number of visual tokens); pixel values follow the
frame spec's ``resize``: ``torchvision`` (the default) makes the very call qwen-vl-utils'
``fetch_video`` makes (``torchvision.transforms.functional.resize(..., BICUBIC,
antialias=True)`` on the uint8 T x C x H x W tensor, rounded back to uint8), so frames are
bit-identical to the reference path; ``pil`` resizes with PIL's bicubic filter, which
antialiases too but differs on about 1-2% of values by up to ~15 levels, and keeps torch
out of the decoding processes. Images go through PIL in both, as in ``fetch_image``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from evalkit.errors import VideoError
from evalkit.video.sampling import ceil_by_factor, floor_by_factor, round_by_factor
from evalkit.video.types import FrameSpec, ImageSpec

MAX_RATIO = 200
# qwen-vl-utils caps a video frame at VIDEO_MAX_TOKEN_NUM tokens of factor x factor
# pixels whatever max_pixels says, and its default total budget is 90% of a
# MODEL_SEQ_LEN-token context (it reads MODEL_SEQ_LEN from the environment; evalkit pins
# the default so that a cache key fully determines the output).
VIDEO_MAX_TOKEN_NUM = 768
MODEL_SEQ_LEN = 128000


def smart_resize(
    height: int, width: int, factor: int, min_pixels: float, max_pixels: float
) -> tuple[int, int]:
    """(H, W): multiples of ``factor``, area within [min_pixels, max_pixels], aspect kept.

    Raises ValueError when the aspect ratio exceeds 200 (as qwen-vl-utils does).
    """
    if min(height, width) <= 0:
        raise ValueError(f"frame size must be positive, got {height}x{width}")
    if max(height, width) / min(height, width) > MAX_RATIO:
        ratio = max(height, width) / min(height, width)
        raise ValueError(f"aspect ratio {ratio:.1f} exceeds {MAX_RATIO} ({height}x{width})")
    h_bar = max(factor, round_by_factor(height, factor))
    w_bar = max(factor, round_by_factor(width, factor))
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = floor_by_factor(height / beta, factor)
        w_bar = floor_by_factor(width / beta, factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = ceil_by_factor(height * beta, factor)
        w_bar = ceil_by_factor(width * beta, factor)
    return h_bar, w_bar


# The budgets that can set a video frame's size, as run summaries name them.
MAX_PIXELS = "max_pixels"
TOTAL_PIXELS = "total_pixels"
TOKEN_CAP = f"{VIDEO_MAX_TOKEN_NUM}-token cap"
MIN_PIXELS = "min_pixels"


def pixel_cap(spec: FrameSpec, nframes: int) -> tuple[float, str]:
    """(per-frame pixel cap, the budget that set it): see :func:`video_max_pixels`."""
    f2 = spec.factor * spec.factor
    total = spec.total_pixels if spec.total_pixels is not None else MODEL_SEQ_LEN * f2 * 0.9
    tokens, shared = VIDEO_MAX_TOKEN_NUM * f2, total / nframes * spec.temporal_patch
    cap, why = (tokens, TOKEN_CAP) if tokens <= shared else (shared, TOTAL_PIXELS)
    floor = int(spec.min_pixels * 1.05)
    if floor > cap:
        cap, why = floor, MIN_PIXELS
    if spec.max_pixels <= cap:
        return spec.max_pixels, MAX_PIXELS
    return cap, why


def video_max_pixels(spec: FrameSpec, nframes: int) -> float:
    """Per-frame pixel cap of a video of ``nframes`` sampled frames (qwen's fetch_video).

    min(VIDEO_MAX_TOKEN_NUM tokens, total_pixels / nframes * temporal_patch), never below
    1.05 x min_pixels, then no more than ``spec.max_pixels``. ``total_pixels=None`` means
    qwen-vl-utils' default budget (0.9 x 128000 tokens).
    """
    return pixel_cap(spec, nframes)[0]


def kept_size(height: int, width: int, max_pixels: int) -> tuple[int, int]:
    """(H, W) of a frame kept at the clip's own size: itself, or scaled down into
    ``max_pixels`` (aspect kept, sides rounded down) where it is larger. No grid, no floor."""
    if height * width <= max_pixels:
        return height, width
    scale = math.sqrt(max_pixels / (height * width))
    # floor of an exact quotient (1280x720 into 672x672 is 0.7: 896x504, not 895x503)
    h, w = (max(1, math.floor(side * scale + 1e-9)) for side in (height, width))
    while h * w > max(1, max_pixels):  # the tolerance above never lets a frame over the cap
        taller = h > 1 and (w == 1 or h * width >= w * height)
        h, w = (h - 1, w) if taller else (h, w - 1)
    return h, w


def video_size(height: int, width: int, spec: FrameSpec, nframes: int) -> tuple[int, int]:
    """Output (H, W) of ``nframes`` frames of a ``height`` x ``width`` video under ``spec``
    (its fixed ``size`` where it has one: the model family squashes every frame to it; the
    clip's own size under ``max_pixels`` with ``keep_size``: the family's processor resizes)."""
    if spec.size is not None or spec.keep_size:
        if min(height, width) <= 0:
            raise ValueError(f"frame size must be positive, got {height}x{width}")
        return spec.size or kept_size(height, width, spec.max_pixels)
    return smart_resize(
        height, width, spec.factor, spec.min_pixels, video_max_pixels(spec, nframes)
    )


def image_size(height: int, width: int, spec: ImageSpec) -> tuple[int, int]:
    """Output (H, W) of a ``height`` x ``width`` image under ``spec``."""
    return smart_resize(height, width, spec.factor, spec.min_pixels, spec.max_pixels)


def resize_frames(
    frames: np.ndarray, height: int, width: int, method: str = "torchvision"
) -> np.ndarray:
    """Resize uint8 T x H x W x 3 frames to ``height`` x ``width`` (bicubic, antialiased).

    ``method``: ``torchvision`` (bit-exact with qwen-vl-utils), ``transformers`` (bit-exact
    with transformers' video processors) or ``pil`` (faster).
    """
    if frames.shape[1:3] == (height, width):
        return np.ascontiguousarray(frames)
    if method in ("torchvision", "transformers"):
        return _torchvision_resize(frames, height, width, v2=method == "transformers")
    if method != "pil":
        raise ValueError(
            f"unknown resize method {method!r}; use 'torchvision', 'transformers' or 'pil'"
        )
    from PIL import Image

    out = np.empty((frames.shape[0], height, width, 3), np.uint8)
    for t, frame in enumerate(frames):
        img = Image.fromarray(frame).resize((width, height), Image.Resampling.BICUBIC)
        out[t] = np.asarray(img)
    return out


def _torchvision_resize(frames: np.ndarray, height: int, width: int, v2: bool) -> np.ndarray:
    try:
        import torch
        from torchvision.transforms import InterpolationMode
        from torchvision.transforms import functional as tvf
        from torchvision.transforms.v2 import functional as tvf2
    except ImportError as exc:
        raise VideoError(
            "<resize>",
            f"the reference resize needs torch and torchvision ({exc}); install them "
            "(they come with vLLM) or choose the fast approximation: resize: pil",
        ) from None
    # The same tensor layout qwen-vl-utils hands to resize (T,H,W,C memory viewed as
    # T,C,H,W): the kernels' summation order, and so the rounding, follow the strides.
    video = torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2)
    resize = tvf2.resize if v2 else tvf.resize
    out = resize(video, [height, width], interpolation=InterpolationMode.BICUBIC, antialias=True)
    return np.ascontiguousarray(out.permute(0, 2, 3, 1).numpy())


def load_image(path: str | os.PathLike[str], spec: ImageSpec | None = None) -> np.ndarray:
    """An image file as uint8 H x W x 3, resized like qwen-vl-utils' fetch_image.

    Transparent pixels are composited on white (as qwen-vl-utils does). Raises
    VideoError naming the file when it is missing or not an image.
    """
    from PIL import Image, UnidentifiedImageError

    spec = spec or ImageSpec()
    p = Path(path)
    if not p.is_file():
        raise VideoError(str(path), "image file not found")
    try:
        with Image.open(p) as im:
            im.load()
            if im.mode == "RGBA":
                rgb = Image.new("RGB", im.size, (255, 255, 255))
                rgb.paste(im, mask=im.split()[3])
            else:
                rgb = im.convert("RGB")
    except (UnidentifiedImageError, OSError) as e:
        raise VideoError(str(path), f"not a readable image ({e})") from e
    try:
        h, w = image_size(rgb.height, rgb.width, spec)
    except ValueError as e:
        raise VideoError(str(path), str(e)) from e
    return np.asarray(rgb.resize((w, h), Image.Resampling.BICUBIC), dtype=np.uint8)
