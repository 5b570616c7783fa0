"""Which source frames to keep: qwen-vl-utils' rule (smart_nframes + linspace/round).

Parity with qwen-vl-utils 0.0.14 (``_read_video_decord``) is the contract, checked by
tests against the installed package:

- the [start, end] window in seconds becomes frame numbers with the source's AVERAGE fps
  (``calculate_video_frame_range``): first = ceil(start*fps), last = min(floor(end*fps),
  total-1), both times clamped to [0, total/fps];
- fps mode: n = window_frames / fps_src * fps, clamped to [min_frames rounded UP to the
  temporal patch, max_frames rounded DOWN], then to window_frames, then rounded DOWN to
  the temporal patch; fixed mode: n = nframes rounded to the nearest temporal patch;
- indices = round(linspace(first, last, n)) computed the way torch does it on CPU
  (float32 with fused multiply-add, from both ends, round half to even).

A model family whose authors pick frames another way says so in ``FrameSpec.sampling``
(the count is decided as above in both cases): ``linspace`` takes
``np.linspace(first, last, n, dtype=int)`` (rounded down: lmms-eval's LLaVA-OneVision
``load_video``), ``segments`` the middle frame of each of n equal segments of the window
(InternVL's ``get_index``: ``int(first + seg/2 + round(seg * i))``, seg = (last-first)/n);
``stride`` one frame every 1/fps seconds, its index rounded up, or ``max_frames`` spread
over the window when the window holds more (GLM-4.1V's ``sample_frames``; repeated
indices dropped, the last repeated up to a multiple of the temporal patch); ``arange``
frame ``first + i * window // n`` for i < n (transformers' ``default_sample_indices_fn``,
the ``sample_frames`` of every video processor that keeps the default: Gemma 4's);
``seconds`` the frame at each 1/fps s of the window, its index rounded down (as many as
the window's duration rounded up), or, where the window is longer than ``max_frames`` /
fps, a frame every 0.1 s thinned by ``np.linspace(..., max_frames, dtype=int)``
(MiniCPM-V 4.6's ``MiniCPMV4_6VideoProcessor.sample_frames``, ``stack_frames`` 1;
repeats kept, as there); ``leading``
ERNIE-4.5-VL's rule (Baidu's FastDeploy ``ernie4_5_vl_processor``: ``_set_video_frame_args``
then ``get_frame_indices(frames_sample="leading")``): int(duration x fps) frames at the rate,
or, where that is under ``min_frames`` or over ``max_frames``, the first frame of each of
that many equal intervals (at most one per frame); the last repeated up to the temporal patch.

Where qwen-vl-utils raises, evalkit defines what happens instead (documented per case in
:func:`sample_indices`): a clip or window shorter than one temporal patch repeats its
frames to fill it, and a fixed ``nframes`` larger than the window repeats frames so the
model always sees exactly ``nframes`` frames (qwen-vl-utils pads frame lists the same
way, with the last frame).
"""

from __future__ import annotations

import math

import numpy as np

from evalkit.video.types import FrameSpec


def round_by_factor(number: float, factor: int) -> int:
    """The multiple of ``factor`` nearest to ``number`` (Python's round: half to even)."""
    return round(number / factor) * factor


def ceil_by_factor(number: float, factor: int) -> int:
    """The smallest multiple of ``factor`` >= ``number``."""
    return math.ceil(number / factor) * factor


def floor_by_factor(number: float, factor: int) -> int:
    """The largest multiple of ``factor`` <= ``number``."""
    return math.floor(number / factor) * factor


def frame_range(
    total_frames: int, source_fps: float, start: float | None, end: float | None
) -> tuple[int, int]:
    """First and last frame numbers (inclusive) of the [start, end] window in seconds.

    Times are clamped to the clip (a window past the end is cut at the end). Raises
    ValueError when the window holds no frame at all.
    """
    if total_frames <= 0:
        raise ValueError("the video has no frames")
    if source_fps <= 0:
        raise ValueError(f"source fps must be positive, got {source_fps}")
    if start is None and end is None:
        return 0, total_frames - 1
    duration = total_frames / source_fps
    first = 0 if start is None else math.ceil(max(0.0, min(start, duration)) * source_fps)
    last = total_frames - 1
    if end is not None:
        last = min(math.floor(max(0.0, min(end, duration)) * source_fps), total_frames - 1)
    if first > last:
        raise ValueError(
            f"window [{start}, {end}] s holds no frame of a {duration:.3f} s clip "
            f"({total_frames} frames at {source_fps:g} fps)"
        )
    return first, last


def count_frames(window_frames: int, source_fps: float, spec: FrameSpec) -> int:
    """How many frames to sample from a window of ``window_frames`` (qwen's smart_nframes;
    the ``stride`` rule's own count under it).

    Unlike qwen-vl-utils this never raises: the result is at least one temporal patch
    (``spec.temporal_patch``); the caller repeats frames when the window is shorter.
    """
    if spec.sampling in _RATE_RULES and spec.nframes is None:
        return len(_RATE_RULES[spec.sampling](0, window_frames - 1, source_fps, spec))
    tp = spec.temporal_patch
    if spec.nframes is not None:
        return max(tp, round_by_factor(spec.nframes, tp))
    assert spec.fps is not None  # FrameSpec guarantees fps or nframes
    min_frames = ceil_by_factor(spec.min_frames, tp)
    max_frames = floor_by_factor(spec.max_frames, tp)
    n = window_frames / source_fps * spec.fps
    n = min(min(max(n, min_frames), max_frames), window_frames)
    return max(tp, floor_by_factor(n, tp))


def torch_linspace_round(first: int, last: int, steps: int) -> list[int]:
    """``torch.linspace(first, last, steps).round().long()`` on CPU, without torch.

    torch computes in float32: step = (last-first)/(steps-1), the first half of the
    points as first + step*i and the second half as last - step*(steps-1-i), each with
    one rounding (fused multiply-add). float64 holds those products exactly, so one cast
    to float32 reproduces the fused result; numpy then rounds half to even like torch.
    """
    f32 = np.float32
    if steps == 1:
        return [round(float(f32(first)))]
    lo, hi = f32(first), f32(last)
    step = np.float64(f32((hi - lo) / f32(steps - 1)))
    i = np.arange(steps)
    up = (np.float64(lo) + step * i).astype(f32)
    down = (np.float64(hi) - step * (steps - 1 - i)).astype(f32)
    return np.round(np.where(i < steps // 2, up, down)).astype(np.int64).tolist()


def sample_indices(total_frames: int, source_fps: float, spec: FrameSpec) -> list[int]:
    """Frame numbers to decode from a clip of ``total_frames`` at ``source_fps``.

    Indices are presentation-order frame numbers, nondecreasing, all inside the window
    ``[spec.start, spec.end]``. Where qwen-vl-utils would raise, evalkit instead:
    - window of 1 frame (or a 1-frame clip): that frame repeated to one temporal patch;
    - fixed ``nframes`` > frames in the window: linspace over the window with repeats.
    Raises ValueError for an empty clip or a window that holds no frame.
    """
    first, last = frame_range(total_frames, source_fps, spec.start, spec.end)
    if spec.sampling in _RATE_RULES and spec.nframes is None:
        return _RATE_RULES[spec.sampling](first, last, source_fps, spec)
    n = count_frames(last - first + 1, source_fps, spec)
    if spec.sampling == "linspace":
        return np.linspace(first, last, n, dtype=int).tolist()
    if spec.sampling == "arange":
        return (first + np.arange(n) * (last - first + 1) // n).tolist()
    if spec.sampling == "segments":
        seg = (last - first) / n
        return [int(first + seg / 2 + np.round(seg * i)) for i in range(n)]
    return torch_linspace_round(first, last, n)


def stride_indices(first: int, last: int, source_fps: float, spec: FrameSpec) -> list[int]:
    """GLM-4.1V's ``Glm4vVideoProcessor.sample_frames`` over frames [first, last]: one
    frame every 1/fps s (index rounded up) while the window is at most ``max_frames`` /
    fps long, else ``max_frames`` spread over it; repeats dropped, the last frame repeated
    up to a multiple of the temporal patch."""
    assert spec.fps is not None  # the rule is rate-based; FrameSpec has one or nframes
    window = last - first + 1
    duration = window / source_fps
    if duration * spec.fps <= spec.max_frames:
        n = max(math.floor(duration * spec.fps), 1)
        picks = [min(last, first + math.ceil(i * source_fps / spec.fps)) for i in range(n)]
    elif spec.max_frames >= window:
        picks = list(range(first, last + 1))
    else:
        seconds = np.linspace(0, duration, spec.max_frames, endpoint=True)
        picks = [min(last, first + math.ceil(t * source_fps)) for t in seconds]
    picks = list(dict.fromkeys(picks))
    while len(picks) % spec.temporal_patch:
        picks.append(picks[-1])
    return picks


def seconds_indices(first: int, last: int, source_fps: float, spec: FrameSpec) -> list[int]:
    """MiniCPM-V 4.6's ``MiniCPMV4_6VideoProcessor.sample_frames`` (``stack_frames`` 1)
    over frames [first, last]: the frame at each 1/fps s while the window is at most
    ``max_frames`` / fps long, else one every 0.1 s thinned to ``max_frames``; the last
    frame repeated up to a multiple of the temporal patch."""
    assert spec.fps is not None  # the rule is rate-based; FrameSpec has one or nframes
    duration = (last - first + 1) / source_fps
    if duration * spec.fps > spec.max_frames:
        stamps = [round(i * 0.1, 1) for i in range(int(duration / 0.1))]
        picks = [min(int(t * source_fps), last - first) for t in stamps]
        if len(picks) > spec.max_frames:
            keep = np.linspace(0, len(picks) - 1, spec.max_frames, dtype=int)
            picks = [picks[i] for i in keep]
    else:
        n = max(math.ceil(duration * spec.fps), 1)
        picks = [int(i / spec.fps * source_fps) for i in range(n)]
    picks = [first + p for p in picks]
    while len(picks) % spec.temporal_patch:
        picks.append(picks[-1])
    return picks


def leading_indices(first: int, last: int, source_fps: float, spec: FrameSpec) -> list[int]:
    """ERNIE-4.5-VL's frames over [first, last] (FastDeploy's ``get_frame_indices`` with
    ``frames_sample="leading"``, its count from ``_set_video_frame_args``): frames at
    round(k / fps x source_fps) for k = 0, 1, ... inside the window while int(duration x
    fps) lies in [min_frames, max_frames]; else that count clamped into the range (at most
    the window's frames), each the first frame of one of as many equal intervals; the last
    repeated up to a multiple of the temporal patch (its processor copies the last frame)."""
    assert spec.fps is not None  # the rule is rate-based; FrameSpec has one or nframes
    window = last - first + 1
    duration = window / source_fps
    count = int(duration * spec.fps)
    if spec.min_frames <= count <= spec.max_frames:
        seconds = np.arange(0, duration, 1 / spec.fps)
        picks = [first + int(i) for i in np.around(seconds * source_fps) if i < window]
    else:
        n = min(max(count, spec.min_frames), spec.max_frames, window)
        starts = np.linspace(0, window, n + 1).astype(int)[:-1]
        picks = [first + int(i) for i in starts]
    while len(picks) % spec.temporal_patch:
        picks.append(picks[-1])
    return picks


_RATE_RULES = {"stride": stride_indices, "seconds": seconds_indices, "leading": leading_indices}
"""The rules that pick frames by their own rate rule (their count follows from it)."""
