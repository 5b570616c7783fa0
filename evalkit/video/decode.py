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

import bisect
import logging
import re
from collections.abc import Callable, Iterator
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


# Turns upright source frames (a chunk of the sample) into output frames; gets the total
# number of sampled frames too, since the per-frame pixel budget depends on it.
Shrink = Callable[[np.ndarray, int], np.ndarray]
# Frames are decoded and shrunk in chunks: 768 source frames of a 4K clip would not fit.
CHUNK = 32


# Decoder threads per process (0 = the decoder's own choice: one per core). Processes that
# decode side by side (cache build workers) set 1 so that N workers use N cores: decord
# already decodes on a thread of its own, overlapping with the resize of earlier frames.
_threads = 0


def set_decoder_threads(n: int) -> None:
    """Decoder threads for this process's decodes (0 = one per core, the default)."""
    global _threads
    if n < 0:
        raise ValueError(f"decoder threads must be >= 0, got {n}")
    _threads = n


def _keep(frames: np.ndarray, n: int) -> np.ndarray:
    return frames


@dataclass
class Decoded:
    """Frames at ``indices`` (upright, after ``shrink``) and what is known about the clip."""

    frames: np.ndarray  # T x H x W x 3 uint8
    source_size: tuple[int, int]  # upright (H, W) of the source frames
    indices: list[int]
    timestamps: list[float]
    total_frames: int
    source_fps: float
    decoder: str
    fallback_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# decord's messages start with "[hh:mm:ss] /path/to/source.cc:123: "; people need the rest.
_DECORD_PREFIX = re.compile(r"^\[[\d:]+\] \S+:\d+: ")


def _ffmpeg_reason(e: Exception) -> str:
    msg = str(getattr(e, "strerror", None) or e).strip()
    first = msg.splitlines()[0] if msg else type(e).__name__
    return _DECORD_PREFIX.sub("", first)[:200]


def read_header(path: Path) -> Header:
    """Open ``path`` with PyAV and decode its first frame; VideoError if that fails."""
    import av

    try:
        container = av.open(str(path))
    except av.EOFError as e:  # e.g. a header written and not one frame after it
        raise VideoError(str(path), "the file ends before any video frame (0 frames)") from e
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


def decode_decord(path: Path, spec: FrameSpec, header: Header, shrink: Shrink = _keep) -> Decoded:
    """Sample and decode with decord (``VideoReader.get_batch``); raises on any failure."""
    import decord

    vr = decord.VideoReader(str(path), ctx=decord.cpu(0), num_threads=_threads)
    total, fps = len(vr), float(vr.get_avg_fps())
    if total <= 0 or fps <= 0:
        raise RuntimeError(f"decord reports {total} frames at {fps} fps")
    check_complete(path, header, total, fps)
    indices = _sample(path, total, fps, spec)
    chunks, size = [], (0, 0)
    for at in range(0, len(indices), CHUNK):
        raw = vr.get_batch(indices[at : at + CHUNK]).asnumpy()
        size = raw.shape[1:3]
        chunks.append(shrink(raw, len(indices)))
    timestamps = [float(t) for t in vr.get_frame_timestamp(indices)[:, 0]]
    return Decoded(np.concatenate(chunks), size, indices, timestamps, total, fps, "decord")


def _sample(path: Path, total: int, fps: float, spec: FrameSpec) -> list[int]:
    try:
        return sample_indices(total, fps, spec)
    except ValueError as e:
        raise VideoError(str(path), str(e)) from e


@dataclass
class _PacketIndex:
    """Every video packet in presentation order: pts ticks and which ones are keyframes."""

    pts: list[int]
    keyframes: list[int]  # presentation indices of keyframes, ascending
    time_base: float
    start: int  # the stream's first pts
    fps: float

    def seconds(self, i: int) -> float:
        return (self.pts[i] - self.start) * self.time_base


def _packet_index(path: Path) -> _PacketIndex:
    """Demux (no decoding) the video stream of ``path``."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        packets: list[tuple[int, bool]] = []
        for p in container.demux(stream):
            ts = p.pts if p.pts is not None else p.dts
            if p.size and ts is not None:
                packets.append((ts, bool(p.is_keyframe)))
        packets.sort()
        rate = stream.average_rate or stream.guessed_rate
        tb = float(stream.time_base or 0)
        start = stream.start_time if stream.start_time is not None else 0
    pts = [p for p, _ in packets]
    keyframes = [i for i, (_, k) in enumerate(packets) if k] or [0]
    index = _PacketIndex(pts, keyframes, tb, start, 0.0)
    index.fps = float(rate) if rate else 0.0
    if not index.fps and len(pts) > 1 and pts[-1] > pts[0]:
        index.fps = (len(pts) - 1) / ((pts[-1] - pts[0]) * tb)
    return index


Grab = Callable[[Any], np.ndarray]


def _decode_seeking(
    container: Any, stream: Any, index: _PacketIndex, targets: list[int], grab: Grab
) -> tuple[dict[int, np.ndarray], int]:
    """Frames at ``targets`` (sorted, unique), jumping to a target's keyframe whenever that
    keyframe lies ahead of the decoder; frames are matched to indices by their pts."""
    position = {pts: i for i, pts in enumerate(index.pts)}
    got: dict[int, np.ndarray] = {}
    frames: Iterator[Any] | None = None
    pos, decoded = -1, 0
    for t in targets:
        k = index.keyframes[max(bisect.bisect_right(index.keyframes, t) - 1, 0)]
        if frames is None or k > pos:
            container.seek(index.pts[k], stream=stream, backward=True)
            frames = container.decode(stream)
        for frame in frames:
            decoded += 1
            i = position.get(frame.pts)
            if i is None:
                continue
            pos = i
            if i == t:
                got[t] = grab(frame)
            if i >= t:
                break
    return got, decoded


def _decode_sequential(
    container: Any, stream: Any, targets: list[int], grab: Grab
) -> tuple[dict[int, np.ndarray], int]:
    """Frames at ``targets`` counted in decode output order from the start (no pts needed)."""
    wanted = set(targets)
    got: dict[int, np.ndarray] = {}
    i = -1
    for i, frame in enumerate(container.decode(stream)):
        if i in wanted:
            got[i] = grab(frame)
        if i >= targets[-1]:
            break
    return got, i + 1


def decode_pyav(
    path: Path, spec: FrameSpec, header: Header, reason: str | None, shrink: Shrink = _keep
) -> Decoded:
    """Sample and decode with PyAV (seeking to keyframes; sequential if pts are unusable)."""
    import av

    try:
        index = _packet_index(path)
    except av.FFmpegError as e:
        raise VideoError(str(path), f"unreadable video data ({_ffmpeg_reason(e)})") from e
    total = len(index.pts)
    if not total:
        raise VideoError(str(path), "the video has 0 frames")
    if index.fps <= 0:
        raise VideoError(str(path), "the video has no usable frame rate")
    check_complete(path, header, total, index.fps)
    indices = _sample(path, total, index.fps, spec)
    targets = sorted(set(indices))

    size = [(0, 0)]

    def grab(frame: Any) -> np.ndarray:
        rgb = frame.to_ndarray(format="rgb24")
        upright = np.rot90(rgb, k=header.rotation // 90) if header.rotation else rgb
        size[0] = upright.shape[:2]
        return shrink(upright[None], len(indices))[0]

    got: dict[int, np.ndarray] = {}
    decoded = 0
    for method in ("seek", "sequential"):
        try:
            with av.open(str(path)) as container:
                stream = container.streams.video[0]
                stream.thread_type = "AUTO"
                if _threads:
                    stream.thread_count = _threads
                if method == "seek":
                    got, n = _decode_seeking(container, stream, index, targets, grab)
                else:
                    got, n = _decode_sequential(container, stream, targets, grab)
                decoded += n
        except av.FFmpegError as e:
            log.debug("%s: %s decode stopped: %s", path, method, e)
        if len(got) == len(targets):
            break
    missing = sorted(set(targets) - got.keys())
    if missing:
        reason = f"truncated or undecodable: frame {missing[0]} of {total} could not be decoded"
        raise VideoError(str(path), reason)
    frames = np.stack([got[i] for i in indices])
    times = [index.seconds(i) for i in indices]
    extra = {"pyav_decoded_frames": decoded, "pyav_method": method}
    return Decoded(frames, size[0], indices, times, total, index.fps, "pyav", reason, extra)


def decode_video(path: Path, spec: FrameSpec, shrink: Shrink = _keep) -> tuple[Decoded, Header]:
    """Decode the frames ``spec`` picks from ``path``: decord, else PyAV (reason recorded).

    ``shrink`` (e.g. the resize to the output size) is applied chunk by chunk as frames
    are decoded; it must raise VideoError, not other errors, for a bad input.
    """
    header = read_header(path)
    if header.rotation:
        reason = f"rotation {header.rotation}: decord applies display matrices inconsistently"
        return decode_pyav(path, spec, header, reason, shrink), header
    try:
        return decode_decord(path, spec, header, shrink), header
    except VideoError:
        raise
    except Exception as e:  # decord raises bare RuntimeError/DECORDError with C++ context
        reason = f"decord failed: {type(e).__name__}: {_ffmpeg_reason(e)}"
        log.info("%s: %s; decoding with PyAV", path, reason)
        return decode_pyav(path, spec, header, reason, shrink), header
