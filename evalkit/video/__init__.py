"""Video decoding, Qwen-style temporal sampling and resizing."""

from evalkit.video.types import Frames, FrameSpec, ImageSpec, VideoMeta

__all__ = ["FrameSpec", "Frames", "ImageSpec", "VideoMeta"]
