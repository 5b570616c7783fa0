"""Decode chosen frames: decord first (what qwen-vl-utils uses), PyAV when decord can't.

Frame numbers are presentation-order indices and the clip's frame rate is the AVERAGE
rate (decord's ``get_avg_fps`` / PyAV's ``average_rate``), exactly what qwen-vl-utils
samples with. For a variable-frame-rate clip that means seconds map to frames through
the average rate (window edges, fps sampling), while the timestamps reported for the
sampled frames are their real presentation times.

Several frame specs of one clip are served by ONE decode (:func:`decode_videos`): the union
of the frame numbers they sample is decoded once, chunk by chunk at source resolution, and
each spec's own frames are picked from every chunk and shrunk by that spec's ``shrink``,
so each spec gets the very arrays a decode of it alone would give.

Rotation: phone videos carry a display matrix. PyAV exposes it on decoded frames; decord
0.6.0 applies it only for some containers (mp4 yes, mkv no), so a rotated clip is always
decoded with PyAV and turned upright here: frames come out as a player shows them.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

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


@dataclass(frozen=True)
class Selection:
    """One output of a decode: the frames ``spec`` samples, turned by ``shrink``."""

    spec: FrameSpec
    shrink: Shrink = _keep


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


def decode_decord(path: Path, selections: Sequence[Selection], header: Header) -> list[Decoded]:
    """Sample and decode with decord (``VideoReader.get_batch``); raises on any failure."""
    import decord

    vr = decord.VideoReader(str(path), ctx=decord.cpu(0), num_threads=_threads)
    total, fps = len(vr), float(vr.get_avg_fps())
    if total <= 0 or fps <= 0:
        raise RuntimeError(f"decord reports {total} frames at {fps} fps")
    check_complete(path, header, total, fps)
    picks = [_sample(path, total, fps, s.spec) for s in selections]
    size = [(0, 0)]

    def read(block: list[int]) -> np.ndarray:
        raw: np.ndarray = vr.get_batch(block).asnumpy()
        size[0] = raw.shape[1:3]
        return raw

    frames = _shrink_union(read, picks, [s.shrink for s in selections])
    out = []
    for array, indices in zip(frames, picks, strict=True):
        timestamps = [float(t) for t in vr.get_frame_timestamp(indices)[:, 0]]
        out.append(Decoded(array, size[0], indices, timestamps, total, fps, "decord"))
    return out


def _shrink_union(
    read: Callable[[list[int]], np.ndarray], picks: list[list[int]], shrinks: list[Shrink]
) -> list[np.ndarray]:
    """Each pick's frames (nondecreasing indices) shrunk, from one pass over their union.

    ``read`` returns the source frames of CHUNK ascending indices at a time; every pick
    takes its own frames of that chunk (repeats included) and shrinks them, at most CHUNK
    at a time, so memory stays bounded whatever the number of specs.
    """
    union = sorted(set().union(*picks))
    parts: list[list[np.ndarray]] = [[] for _ in picks]
    for at in range(0, len(union), CHUNK):
        block = union[at : at + CHUNK]
        raw = read(block)
        row = {i: r for r, i in enumerate(block)}
        for part, indices, shrink in zip(parts, picks, shrinks, strict=True):
            lo = bisect.bisect_left(indices, block[0])
            hi = bisect.bisect_right(indices, block[-1])
            for start in range(lo, hi, CHUNK):
                rows = [row[i] for i in indices[start : min(hi, start + CHUNK)]]
                chunk = raw if rows == list(range(len(block))) else raw[rows]
                part.append(shrink(chunk, len(indices)))
    return [np.concatenate(p) for p in parts]


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


G = TypeVar("G")
Grab = Callable[[Any, int], G]  # (decoded frame, its index) -> what is kept of it


def _decode_seeking(
    container: Any, stream: Any, index: _PacketIndex, targets: list[int], grab: Grab[G]
) -> tuple[dict[int, G], int]:
    """Frames at ``targets`` (sorted, unique), jumping to a target's keyframe whenever that
    keyframe lies ahead of the decoder; frames are matched to indices by their pts."""
    position = {pts: i for i, pts in enumerate(index.pts)}
    got: dict[int, G] = {}
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
                got[t] = grab(frame, t)
            if i >= t:
                break
    return got, decoded


def _decode_sequential(
    container: Any, stream: Any, targets: list[int], grab: Grab[G]
) -> tuple[dict[int, G], int]:
    """Frames at ``targets`` counted in decode output order from the start (no pts needed)."""
    wanted = set(targets)
    got: dict[int, G] = {}
    i = -1
    for i, frame in enumerate(container.decode(stream)):
        if i in wanted:
            got[i] = grab(frame, i)
        if i >= targets[-1]:
            break
    return got, i + 1


def decode_pyav(
    path: Path, selections: Sequence[Selection], header: Header, reason: str | None
) -> list[Decoded]:
    """Sample and decode with PyAV (seeking to keyframes; sequential if pts are unusable).

    A frame is shrunk for every selection that samples it as soon as it is decoded.
    """
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
    picks = [_sample(path, total, index.fps, s.spec) for s in selections]
    targets = sorted(set().union(*picks))
    takers: dict[int, list[int]] = {t: [] for t in targets}  # index -> selections with it
    for k, indices in enumerate(picks):
        for t in dict.fromkeys(indices):
            takers[t].append(k)

    size = [(0, 0)]

    def grab(frame: Any, t: int) -> dict[int, np.ndarray]:
        rgb = frame.to_ndarray(format="rgb24")
        upright = np.rot90(rgb, k=header.rotation // 90) if header.rotation else rgb
        size[0] = upright.shape[:2]
        return {k: selections[k].shrink(upright[None], len(picks[k]))[0] for k in takers[t]}

    got: dict[int, dict[int, np.ndarray]] = {}
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
    extra = {"pyav_decoded_frames": decoded, "pyav_method": method}
    return [
        Decoded(
            np.stack([got[i][k] for i in indices]),
            size[0],
            indices,
            [index.seconds(i) for i in indices],
            total,
            index.fps,
            "pyav",
            reason,
            dict(extra),
        )
        for k, indices in enumerate(picks)
    ]


def decode_video(path: Path, spec: FrameSpec, shrink: Shrink = _keep) -> tuple[Decoded, Header]:
    """Decode the frames ``spec`` picks from ``path``: decord, else PyAV (reason recorded).

    ``shrink`` (e.g. the resize to the output size) is applied chunk by chunk as frames
    are decoded; it must raise VideoError, not other errors, for a bad input.
    """
    decoded, header = decode_videos(path, [Selection(spec, shrink)])
    return decoded[0], header


def decode_videos(path: Path, selections: Sequence[Selection]) -> tuple[list[Decoded], Header]:
    """Decode ``path`` once for several selections: one Decoded per selection, in order.

    Each is what :func:`decode_video` gives for that selection alone (frames, indices,
    timestamps), except that on the PyAV path ``extra["pyav_decoded_frames"]`` counts the
    frames this shared decode decoded. Any failure (file, decoder, a spec's window)
    fails every selection with the VideoError a decode of that spec alone raises.
    """
    header = read_header(path)
    if header.rotation:
        reason = f"rotation {header.rotation}: decord applies display matrices inconsistently"
        return decode_pyav(path, selections, header, reason), header
    try:
        return decode_decord(path, selections, header), header
    except VideoError:
        raise
    except Exception as e:  # decord raises bare RuntimeError/DECORDError with C++ context
        reason = f"decord failed: {type(e).__name__}: {_ffmpeg_reason(e)}"
        log.info("%s: %s; decoding with PyAV", path, reason)
        return decode_pyav(path, selections, header, reason), header
