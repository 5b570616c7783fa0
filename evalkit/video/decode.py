"""Decode chosen frames: decord first (what qwen-vl-utils uses), PyAV when decord can't.

Frame numbers are presentation-order indices and the clip's frame rate is the AVERAGE
rate (decord's ``get_avg_fps`` / PyAV's ``average_rate``), exactly what qwen-vl-utils
samples with. For a variable-frame-rate clip that means seconds map to frames through
the average rate (window edges, fps sampling), while the timestamps reported for the
sampled frames are their real presentation times.

Rotation: phone videos carry a display matrix. PyAV exposes it on decoded frames; decord
0.6.0 applies it only for some containers (mp4 yes, mkv no), so a rotated clip is always
decoded with PyAV and turned upright here: frames come out as a player shows them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evalkit.errors import VideoError
from evalkit.video.sampling import sample_indices
from evalkit.video.types import FrameSpec

log = logging.getLogger(__name__)


@dataclass
class Header:
    """What the container says, plus the display rotation of the first frame."""

    rotation: int  # counter-clockwise degrees: 0, 90, 180 or 270
    declared_frames: int  # 0 when the container does not say (mkv, webm)
    declared_duration_s: float | None  # of the video stream, when known
    codec: str


@dataclass
class Decoded:
    """Upright source frames at ``indices`` and what is known about the clip."""

    frames: np.ndarray  # T x H x W x 3 uint8, source size, upright
    indices: list[int]
    timestamps: list[float]
    total_frames: int
    source_fps: float
    decoder: str
    fallback_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _ffmpeg_reason(e: Exception) -> str:
    msg = getattr(e, "strerror", None) or str(e)
    return str(msg).strip().splitlines()[0][:200] if msg else type(e).__name__


def read_header(path: Path) -> Header:
    """Open ``path`` with PyAV and decode its first frame; VideoError if that fails."""
    import av

    try:
        container = av.open(str(path))
    except (av.FFmpegError, UnicodeDecodeError) as e:
        raise VideoError(str(path), f"not a readable video file ({_ffmpeg_reason(e)})") from e
    with container:
        if not container.streams.video:
            raise VideoError(str(path), "the file has no video stream")
        stream = container.streams.video[0]
        try:
            first = next(container.decode(stream), None)
        except av.FFmpegError as e:
            raise VideoError(str(path), f"undecodable video ({_ffmpeg_reason(e)})") from e
        if first is None:
            raise VideoError(str(path), "the video has 0 frames")
        declared: float | None = None
        if stream.duration is not None and stream.time_base is not None:
            declared = float(stream.duration * stream.time_base)
        elif container.duration is not None and len(container.streams) == 1:
            declared = container.duration / av.time_base  # only the video: no audio tail
        return Header(
            rotation=int(first.rotation or 0) % 360,
            declared_frames=int(stream.frames or 0),
            declared_duration_s=declared,
            codec=stream.codec_context.name,
        )


def check_complete(path: Path, header: Header, total_frames: int, fps: float) -> None:
    """VideoError when the data ends well before what the container header promises."""
    if header.declared_frames and total_frames < 0.9 * header.declared_frames:
        raise VideoError(
            str(path),
            f"truncated: header declares {header.declared_frames} frames, "
            f"the data holds {total_frames}",
        )
    declared = header.declared_duration_s
    if declared and declared - total_frames / fps > max(1.0, 0.2 * declared):
        raise VideoError(
            str(path),
            f"truncated: header declares {declared:.2f} s, the frames cover "
            f"{total_frames / fps:.2f} s",
        )


def decode_decord(path: Path, spec: FrameSpec, header: Header) -> Decoded:
    """Sample and decode with decord (``VideoReader.get_batch``); raises on any failure."""
    import decord

    vr = decord.VideoReader(str(path), ctx=decord.cpu(0))
    total, fps = len(vr), float(vr.get_avg_fps())
    if total <= 0 or fps <= 0:
        raise RuntimeError(f"decord reports {total} frames at {fps} fps")
    check_complete(path, header, total, fps)
    indices = _sample(path, total, fps, spec)
    frames = vr.get_batch(indices).asnumpy()
    timestamps = [float(t) for t in vr.get_frame_timestamp(indices)[:, 0]]
    return Decoded(frames, indices, timestamps, total, fps, "decord")


def _sample(path: Path, total: int, fps: float, spec: FrameSpec) -> list[int]:
    try:
        return sample_indices(total, fps, spec)
    except ValueError as e:
        raise VideoError(str(path), str(e)) from e


def _pyav_packets(path: Path) -> tuple[list[float], float]:
    """Presentation times (s, from the stream start) of every video packet, and the fps."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        tb = float(stream.time_base or 0)
        start = stream.start_time or 0
        pts = sorted(
            (p.pts - start) * tb for p in container.demux(stream) if p.size and p.pts is not None
        )
        rate = stream.average_rate or stream.guessed_rate
        fps = float(rate) if rate else 0.0
    if not fps and len(pts) > 1 and pts[-1] > pts[0]:
        fps = (len(pts) - 1) / (pts[-1] - pts[0])
    return pts, fps


def decode_pyav(path: Path, spec: FrameSpec, header: Header, reason: str | None) -> Decoded:
    """Sample and decode with PyAV: one pass in presentation order, keeping the chosen frames."""
    import av

    try:
        pts, fps = _pyav_packets(path)
    except av.FFmpegError as e:
        raise VideoError(str(path), f"unreadable video data ({_ffmpeg_reason(e)})") from e
    if not pts:
        raise VideoError(str(path), "the video has 0 frames")
    if fps <= 0:
        raise VideoError(str(path), "the video has no usable frame rate")
    check_complete(path, header, len(pts), fps)
    indices = _sample(path, len(pts), fps, spec)
    wanted = set(indices)
    got: dict[int, np.ndarray] = {}
    times: dict[int, float] = {}
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        start = (stream.start_time or 0) * float(stream.time_base or 0)
        try:
            for i, frame in enumerate(container.decode(stream)):
                if i in wanted:
                    rgb = frame.to_ndarray(format="rgb24")
                    got[i] = np.rot90(rgb, k=header.rotation // 90) if header.rotation else rgb
                    times[i] = float(frame.time - start) if frame.time is not None else i / fps
                if i >= indices[-1]:
                    break
        except av.FFmpegError as e:
            log.debug("%s: decode stopped after %d frames: %s", path, len(got), e)
    missing = sorted(wanted - got.keys())
    if missing:
        raise VideoError(
            str(path),
            f"truncated or undecodable: frame {missing[0]} of {len(pts)} could not be decoded",
        )
    frames = np.stack([got[i] for i in indices])
    return Decoded(frames, indices, [times[i] for i in indices], len(pts), fps, "pyav", reason)


def decode_video(path: Path, spec: FrameSpec) -> tuple[Decoded, Header]:
    """Decode the frames ``spec`` picks from ``path``: decord, else PyAV (reason recorded)."""
    header = read_header(path)
    if header.rotation:
        reason = f"rotation {header.rotation}: decord applies display matrices inconsistently"
        return decode_pyav(path, spec, header, reason), header
    try:
        return decode_decord(path, spec, header), header
    except VideoError:
        raise
    except Exception as e:  # decord raises bare RuntimeError/DECORDError with C++ context
        reason = f"decord failed: {type(e).__name__}: {_ffmpeg_reason(e)}"
        log.info("%s: %s; decoding with PyAV", path, reason)
        return decode_pyav(path, spec, header, reason), header
