"""The shapes every stage agrees on: what to sample (FrameSpec) and what came out (Frames)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

# Qwen-VL defaults (qwen-vl-utils): the pixel budgets are counted in 28x28 patches.
_PATCH28 = 28 * 28

Resize = Literal["torchvision", "pil", "transformers"]
"""How frames are resampled (see ``FrameSpec.resize``)."""
Sampling = Literal["qwen", "linspace", "segments", "stride", "arange", "seconds", "leading"]
"""Which source frames a count picks: ``qwen`` = qwen-vl-utils' round(linspace) over the
window (first and last frame included); ``linspace`` = ``np.linspace(first, last, n,
dtype=int)``, rounded down (lmms-eval's LLaVA-OneVision ``load_video``); ``segments`` =
the middle frame of each of n equal segments (InternVL's ``get_index``); ``stride`` = one
frame every 1/fps s, rounded up (GLM-4.1V's ``sample_frames``); ``arange`` = frame
``first + i * window // n`` (transformers' default ``sample_frames``: the first frame in,
the last out; Gemma 4's video processor); ``seconds`` = the frame at each whole 1/fps s,
rounded down, or on a long clip a 0.1 s grid thinned to the cap (MiniCPM-V 4.6's
``sample_frames``); ``leading`` = one frame every 1/fps s, rounded to the nearest, or the
first frame of each of n equal intervals when the rate gives fewer than ``min_frames`` or
more than ``max_frames`` (ERNIE-4.5-VL's ``frames_sample="leading"``); see video.sampling."""

# The fields a model family's frame contract adds, at the values every FrameSpec had before
# them: a dump leaves them out at these values, so the cache keys and run fingerprints of
# the Qwen families (which never set them) stay what they were.
_CONTRACT_DEFAULTS: dict[str, Any] = {"size": None, "sampling": "qwen", "keep_size": False}


class FrameSpec(BaseModel):
    """How a video is turned into frames: temporal sampling and spatial resizing.

    Every field is part of the frame-cache key, so changing any of them never serves an
    entry built under other settings.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    fps: float | None = 2.0
    """Frames per second to sample; ignored when ``nframes`` is set."""
    nframes: int | None = None
    """Fixed number of frames (uniform over the clip); overrides ``fps``."""
    min_frames: int = 4
    """Lower bound on the frame count in fps mode."""
    max_frames: int = 768
    """Upper bound on the frame count in fps mode."""
    min_pixels: int = 128 * _PATCH28
    """Smallest area (H*W) a frame is resized to."""
    max_pixels: int = 768 * _PATCH28
    """Largest area (H*W) a frame is resized to."""
    total_pixels: int | None = None
    """Budget of pixels shared by all frames of one video (Qwen's VIDEO_TOTAL_PIXELS)."""
    factor: int = 28
    """Output H and W are multiples of this (patch x merge: 28 Qwen2/2.5-VL, 32 Qwen3-VL)."""
    temporal_patch: int = 2
    """The frame count is rounded to a multiple of this (Qwen's FRAME_FACTOR)."""
    resize: Resize = "torchvision"
    """Resampling of video frames: ``torchvision`` = qwen-vl-utils' own call (antialiased
    bicubic on the uint8 tensor, bit-exact with the reference path); ``transformers`` =
    the call transformers' video processors make (the same bicubic through torchvision's
    transforms.v2, whose uint8 kernel rounds otherwise: up to ~9 levels apart), the
    reference of the families their processor resizes; ``pil`` = PIL's bicubic, a faster
    approximation (about 1-2% of pixel values differ by a few levels)."""
    start: float | None = None
    """Start of the window to sample from, in seconds (None = start of the video)."""
    end: float | None = None
    """End of the window to sample from, in seconds (None = end of the video)."""
    size: tuple[int, int] | None = None
    """Every frame resized to exactly (H, W), aspect ratio not kept: the fixed input of a
    family whose processor squashes each frame to one size (LLaVA-OneVision, InternVL);
    None = the factor grid under the pixel budgets above (or the clip's own: ``keep_size``)."""
    sampling: Sampling = "qwen"
    """Which frames are picked: qwen (round(linspace), the default), linspace (rounded
    down: LLaVA-OneVision's reference), segments (segment middles: InternVL's), stride
    (every 1/fps s, rounded up: GLM-4.1V's), arange (i * window // n: transformers'
    default, Gemma 4's), seconds (MiniCPM-V 4.6's) or leading (every 1/fps s rounded, else
    interval starts: ERNIE-4.5-VL's)."""
    keep_size: bool = False
    """Frames keep the clip's own size, scaled down (aspect kept, sides rounded down) only
    where one is larger than ``max_pixels``: the input of a family whose processor resizes
    (and crops) frames itself, so that it resizes the source pixels once, as its reference
    path does. ``factor``, ``min_pixels``, ``total_pixels`` and the token cap do not apply."""

    @model_serializer(mode="wrap")
    def _leave_out_unset_contract(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name, default in _CONTRACT_DEFAULTS.items():
            if name in data and data[name] == default:
                del data[name]
        return data

    @model_validator(mode="after")
    def _check(self) -> FrameSpec:
        if self.nframes is None and (self.fps is None or not 0 < self.fps < math.inf):
            raise ValueError("FrameSpec needs a finite fps > 0 or nframes")
        if self.min_frames > self.max_frames:
            raise ValueError(f"min_frames {self.min_frames} > max_frames {self.max_frames}")
        if self.min_pixels > self.max_pixels and not self.keep_size:  # no floor to keep
            raise ValueError(f"min_pixels {self.min_pixels} > max_pixels {self.max_pixels}")
        if self.start is not None and self.end is not None and self.end <= self.start:
            raise ValueError(f"window end {self.end} must be after start {self.start}")
        if self.size is not None and min(self.size) < 1:
            raise ValueError(f"size {self.size} must be positive (H, W)")
        if self.keep_size and self.size is not None:
            raise ValueError(f"keep_size and size {self.size} exclude each other")
        return self

    def window(self, start: float | None, end: float | None) -> FrameSpec:
        """The same spec restricted to [start, end] seconds."""
        return self.model_copy(update={"start": start, "end": end})


class ImageSpec(BaseModel):
    """How a still image is resized (its own pixel budget, separate from video)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    min_pixels: int = 4 * _PATCH28
    """Smallest area (H*W) an image is resized to."""
    max_pixels: int = 16384 * _PATCH28
    """Largest area (H*W) an image is resized to (``image_max_pixels``)."""
    factor: int = 28
    """Output H and W are multiples of this."""


@dataclass(frozen=True)
class VideoMeta:
    """What is known about the source clip and the frames sampled from it."""

    source_fps: float
    total_frames: int
    duration_s: float
    indices: list[int]
    timestamps: list[float]
    height: int
    width: int
    source_height: int
    source_width: int
    decoder: str
    fallback_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    window_frames: int | None = None
    """Source frames inside the sampled [start, end] window (None: the whole clip)."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form (stored in cache files and run records)."""
        return {
            "source_fps": self.source_fps,
            "total_frames": self.total_frames,
            "duration_s": self.duration_s,
            "indices": list(self.indices),
            "timestamps": list(self.timestamps),
            "height": self.height,
            "width": self.width,
            "source_height": self.source_height,
            "source_width": self.source_width,
            "decoder": self.decoder,
            "fallback_reason": self.fallback_reason,
            "extra": dict(self.extra),
            "window_frames": self.window_frames,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VideoMeta:
        """Inverse of :meth:`to_dict`."""
        return cls(**d)

    def to_vllm(self) -> dict[str, Any]:
        """Metadata in the form vLLM's Qwen-VL processors expect (describes the SOURCE clip).

        ``total_num_frames`` is the frame count of the sampled window, as qwen-vl-utils'
        readers report it: the processors derive the sampling rate from it (Qwen2.5-VL's
        seconds per temporal patch, hence its M-RoPE positions), so a windowed clip given
        the whole clip's count would be read as sampled more sparsely than it was.
        """
        return {
            "fps": self.source_fps,
            "total_num_frames": self.window_frames or self.total_frames,
            "frames_indices": list(self.indices),
            "duration": self.duration_s,
            "width": self.source_width,
            "height": self.source_height,
            "video_backend": self.decoder,
        }


@dataclass(frozen=True)
class Frames:
    """uint8 frames (T x H x W x 3) with their metadata."""

    array: np.ndarray
    meta: VideoMeta

    def __post_init__(self) -> None:
        a = self.array
        if a.dtype != np.uint8 or a.ndim != 4 or a.shape[-1] != 3:
            raise ValueError(f"Frames must be uint8 TxHxWx3, got {a.dtype} {a.shape}")
        if a.shape[0] != len(self.meta.indices):
            raise ValueError(f"{a.shape[0]} frames but {len(self.meta.indices)} indices in meta")
