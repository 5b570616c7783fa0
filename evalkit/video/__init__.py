"""Video decoding, Qwen-style temporal sampling and resizing.

Importing this package is light: decord and PyAV are imported only when a video is
decoded, PIL only when a frame or image is resized.
"""

from evalkit.video.load import load_video, load_videos
from evalkit.video.resize import load_image, resize_frames, smart_resize, video_size
from evalkit.video.sampling import sample_indices
from evalkit.video.types import Frames, FrameSpec, ImageSpec, VideoMeta

__all__ = [
    "FrameSpec",
    "Frames",
    "ImageSpec",
    "VideoMeta",
    "load_image",
    "load_video",
    "load_videos",
    "resize_frames",
    "sample_indices",
    "smart_resize",
    "video_size",
]
