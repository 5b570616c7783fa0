"""Synthetic videos whose frames carry their own index.

Each frame is a grid of large cells (ROWS x COLS). Two cells are colour markers (top-left
pure red, bottom-right pure blue: they catch a decoder that returns BGR or a frame in the
wrong orientation); the others are black/white bits: the frame index, then a CRC-8 of it.
Cells are large and the reader looks only at the middle of each cell, so the index
survives lossy codecs, chroma subsampling and resizing down to ~56 px per side; a
misread fails the markers or the CRC and raises instead of returning a wrong index.

A test fixture (the decoder, cache, resize and request-builder tests): whatever frames a
loader returns, ``read_index`` says exactly which source frames they were. Not the SynthVideo
benchmark (``evalkit.synthvideo``), whose clips show scenes to answer questions about.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator, Sequence
from fractions import Fraction
from pathlib import Path

import numpy as np

ROWS, COLS = 5, 6
INDEX_BITS = 20  # up to ~1M frames
CRC_BITS = 8
MAX_INDEX = (1 << INDEX_BITS) - 1
_RED = (255, 0, 0)
_BLUE = (0, 0, 255)
assert 2 + INDEX_BITS + CRC_BITS == ROWS * COLS

# Default codec per container suffix. HEVC for mkv: PyAV's bundled ffmpeg has libx265.
DEFAULT_CODECS = {".mp4": "h264", ".mkv": "hevc", ".avi": "mpeg4", ".webm": "libvpx-vp9"}


def _crc8(value: int) -> int:
    """CRC-8 (polynomial 0x07) over the three bytes of ``value``."""
    crc = 0
    for byte in value.to_bytes(3, "big"):
        crc ^= byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def _bits(index: int) -> list[int]:
    word = (index << CRC_BITS) | _crc8(index)
    return [(word >> (INDEX_BITS + CRC_BITS - 1 - i)) & 1 for i in range(INDEX_BITS + CRC_BITS)]


def _bounds(n: int, parts: int) -> list[tuple[int, int]]:
    edges = [round(i * n / parts) for i in range(parts + 1)]
    return list(itertools.pairwise(edges))


def index_frame(index: int, width: int, height: int) -> np.ndarray:
    """The upright RGB frame (height x width x 3, uint8) that encodes ``index``."""
    if not 0 <= index <= MAX_INDEX:
        raise ValueError(f"index {index} outside 0..{MAX_INDEX}")
    frame = np.zeros((height, width, 3), np.uint8)
    colours = [_RED] + [(255, 255, 255) if b else (0, 0, 0) for b in _bits(index)] + [_BLUE]
    rows, cols = _bounds(height, ROWS), _bounds(width, COLS)
    for k, colour in enumerate(colours):
        (r0, r1), (c0, c1) = rows[k // COLS], cols[k % COLS]
        frame[r0:r1, c0:c1] = colour
    return frame


def _cell_means(frame: np.ndarray) -> np.ndarray:
    """Mean RGB of the central half of every cell, shape (ROWS*COLS, 3)."""
    h, w = frame.shape[:2]
    out = np.empty((ROWS * COLS, 3))
    for k in range(ROWS * COLS):
        (r0, r1), (c0, c1) = _bounds(h, ROWS)[k // COLS], _bounds(w, COLS)[k % COLS]
        dr, dc = max((r1 - r0) // 4, 0), max((c1 - c0) // 4, 0)
        cell = frame[r0 + dr : r1 - dr, c0 + dc : c1 - dc]
        out[k] = cell.reshape(-1, frame.shape[2])[:, :3].mean(axis=0)
    return out


def read_index(frame: np.ndarray) -> int:
    """The index encoded in a decoded (and possibly resized) upright RGB frame.

    Raises ValueError when the frame does not carry a valid index (wrong channel order,
    wrong orientation, a damaged frame or not a synthetic frame at all).
    """
    if frame.ndim != 3 or frame.shape[2] < 3 or min(frame.shape[:2]) < 2 * ROWS:
        raise ValueError(f"expected an HxWx3 frame of at least {2 * ROWS}px, got {frame.shape}")
    means = _cell_means(frame)
    red, blue = means[0], means[-1]
    if not (red[0] > 128 > red[2] and blue[2] > 128 > blue[0]):
        raise ValueError(f"colour markers not found (red cell {red.round()}, blue {blue.round()})")
    bits = [int(m.mean() > 128) for m in means[1:-1]]
    word = int("".join(map(str, bits)), 2)
    index, crc = word >> CRC_BITS, word & 0xFF
    if _crc8(index) != crc:
        raise ValueError(f"checksum mismatch reading index {index}")
    return index


def read_indices(frames: np.ndarray) -> list[int]:
    """``read_index`` of every frame of a T x H x W x 3 array."""
    return [read_index(f) for f in frames]


def _stream_rate(fps: float) -> Fraction:
    return Fraction(fps).limit_denominator(1001)


@contextlib.contextmanager
def _same_scheduling() -> Iterator[None]:
    """The calling thread's scheduling policy and priority, as they were before, after
    the block. SVT-AV1 (PyAV's ``libsvtav1``), run as root, makes the thread that opens an
    encoder real-time (SCHED_FIFO 99) and leaves it so: every process this one starts
    afterwards inherits it, and on a 2-core machine a real-time child that spins (headless
    Chromium did) starves everything else."""
    if not hasattr(os, "sched_getscheduler"):
        yield
        return
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        yield
    finally:
        if (os.sched_getscheduler(0), os.sched_getparam(0)) != (policy, param):
            os.sched_setscheduler(0, policy, param)


def write_index_video(
    path: str | os.PathLike[str],
    n_frames: int,
    fps: float = 30.0,
    width: int = 160,
    height: int = 120,
    *,
    codec: str | None = None,
    pix_fmt: str = "yuv420p",
    rotation: int | None = None,
    vfr_timestamps: Sequence[float] | None = None,
    options: dict[str, str] | None = None,
    container_options: dict[str, str] | None = None,
) -> Path:
    """Write ``n_frames`` index frames to ``path``; the container follows the suffix.

    ``width`` x ``height`` is the DISPLAYED size. ``codec`` defaults per suffix
    (:data:`DEFAULT_CODECS`). ``rotation`` (0/90/180/270, counter-clockwise, as PyAV's
    ``VideoFrame.rotation`` reads it) stores rotated pixels plus a display matrix, so a
    player that honours the matrix shows upright frames. ``vfr_timestamps`` (seconds,
    increasing, one per frame) gives each frame an explicit pts: variable frame rate.
    ``options`` go to the encoder, ``container_options`` to the muxer (e.g.
    ``{"movflags": "+faststart"}`` puts an mp4's index before its data).
    """
    import av

    path = Path(path)
    codec = codec or DEFAULT_CODECS.get(path.suffix.lower(), "h264")
    rot = (rotation or 0) % 360
    if rot % 90:
        raise ValueError(f"rotation must be a multiple of 90, got {rotation}")
    if vfr_timestamps is not None and len(vfr_timestamps) != n_frames:
        raise ValueError(f"{len(vfr_timestamps)} timestamps for {n_frames} frames")
    coded_w, coded_h = (height, width) if rot in (90, 270) else (width, height)
    rate = _stream_rate(fps)
    # Millisecond ticks for VFR: explicit pts; otherwise one tick per frame.
    time_base = Fraction(1, 1000) if vfr_timestamps is not None else 1 / rate
    with (
        _same_scheduling(),
        av.open(str(path), mode="w", options=dict(container_options or {})) as container,
    ):
        stream = container.add_stream(codec, rate=rate, options=dict(options or {}))
        assert isinstance(stream, av.VideoStream)
        stream.width, stream.height, stream.pix_fmt = coded_w, coded_h, pix_fmt
        stream.codec_context.time_base = time_base
        if codec in ("hevc", "libx265"):
            stream.codec_context.options = {"x265-params": "log-level=error", **(options or {})}
        if rot:
            stream.set_display_rotation(rot)
        container.start_encoding()  # writes the header even when n_frames == 0
        for i in range(n_frames):
            # The player turns the coded frame counter-clockwise by `rot`; store the inverse.
            img = np.ascontiguousarray(np.rot90(index_frame(i, width, height), k=-rot // 90))
            frame = av.VideoFrame.from_ndarray(img, format="rgb24")
            if vfr_timestamps is not None:
                frame.pts = round(vfr_timestamps[i] * 1000)
            else:
                frame.pts = i
            frame.time_base = time_base
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path
