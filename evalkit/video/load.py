"""``load_video``: probe + sample + decode + resize: how evalkit turns a clip into Frames.

``load_videos`` does it for several FrameSpecs of one clip from one decode (see
``decode.py``); each result equals ``load_video`` under that spec alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from evalkit.errors import VideoError
from evalkit.sample import VideoRef
from evalkit.video.decode import Decoded, Header, Selection, decode_videos
from evalkit.video.resize import resize_frames, video_size
from evalkit.video.sampling import frame_range
from evalkit.video.types import Frames, FrameSpec, VideoMeta


def _check_file(path: Path) -> None:
    if not path.exists():
        raise VideoError(str(path), "video file not found")
    if not path.is_file():
        raise VideoError(str(path), "not a regular file")
    if path.stat().st_size == 0:
        raise VideoError(str(path), "the file is empty (0 bytes)")


def _window_frames(total: int, fps: float, spec: FrameSpec) -> int | None:
    """Source frames in the spec's [start, end] window; None when it is the whole clip."""
    if spec.start is None and spec.end is None:
        return None
    first, last = frame_range(total, fps, spec.start, spec.end)
    return last - first + 1


def load_video(ref: VideoRef | str | os.PathLike[str], spec: FrameSpec) -> Frames:
    """Frames of ``ref`` sampled and resized as ``spec`` says (qwen-vl-utils' rules).

    A ``VideoRef`` with ``start``/``end`` restricts sampling to that window (it replaces
    the spec's own window). Every failure raises ``VideoError(path, reason)``.
    """
    return load_videos(ref, [spec])[0]


def load_videos(ref: VideoRef | str | os.PathLike[str], specs: Sequence[FrameSpec]) -> list[Frames]:
    """``load_video(ref, spec)`` for every spec, in order, decoding the clip only once.

    The union of the frames the specs sample is decoded at source resolution and each
    spec's frames are resized from those source frames (never from another spec's
    output), so frames and VideoMeta are those of a decode of that spec alone (on the
    PyAV path ``meta.extra["pyav_decoded_frames"]`` counts the shared decode's frames).
    A failure raises the VideoError a single decode raises, for all specs at once.
    """
    if isinstance(ref, VideoRef):
        path = Path(ref.path)
        if ref.start is not None or ref.end is not None:
            specs = [spec.window(ref.start, ref.end) for spec in specs]
    else:
        path = Path(ref)
    if not specs:
        return []
    _check_file(path)
    selections = [Selection(spec, _shrinker(path, spec)) for spec in specs]
    decoded, header = decode_videos(path, selections)
    return [_frames(d, header, spec) for d, spec in zip(decoded, specs, strict=True)]


def _shrinker(path: Path, spec: FrameSpec) -> Callable[[np.ndarray, int], np.ndarray]:
    """The resize to ``spec``'s output size, applied to source frames as they are decoded."""

    def shrink(frames: np.ndarray, n: int) -> np.ndarray:
        try:
            h, w = video_size(frames.shape[1], frames.shape[2], spec, n)
        except ValueError as e:  # aspect ratio beyond Qwen's limit
            raise VideoError(str(path), str(e)) from e
        return resize_frames(frames, h, w, spec.resize)

    return shrink


def _frames(decoded: Decoded, header: Header, spec: FrameSpec) -> Frames:
    array = decoded.frames
    src_h, src_w = decoded.source_size
    out_h, out_w = array.shape[1:3]
    extra = {"codec": header.codec, **decoded.extra}
    if header.rotation:
        extra["rotation"] = header.rotation
    meta = VideoMeta(
        source_fps=decoded.source_fps,
        total_frames=decoded.total_frames,
        duration_s=decoded.total_frames / decoded.source_fps,
        indices=decoded.indices,
        timestamps=decoded.timestamps,
        height=out_h,
        width=out_w,
        source_height=src_h,
        source_width=src_w,
        decoder=decoded.decoder,
        fallback_reason=decoded.fallback_reason,
        extra=extra,
        window_frames=_window_frames(decoded.total_frames, decoded.source_fps, spec),
    )
    return Frames(array, meta)
