"""What a video costs before it is decoded: its frame count, frame size and visual tokens
under a FrameSpec, and which budget decided the size.

The frame size of a Qwen-style video is the source size scaled into a per-frame pixel cap
(:func:`evalkit.video.resize.video_max_pixels`) that is the smallest of ``max_pixels``,
the video's ``total_pixels`` shared by its frames, and the 768-token cap, never below
1.05 x ``min_pixels``. With many frames the total budget wins and frames come out far
smaller than ``max_pixels`` says: :func:`size_set_by` names the binding budget so that
the run summary can say so. :func:`probe` reads the container header only (no frame is
decoded), so a prompt that cannot fit the model's context is found before decoding.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.errors import VideoError
from evalkit.video.resize import MAX_PIXELS, pixel_cap, video_size
from evalkit.video.sampling import count_frames, frame_range, round_by_factor
from evalkit.video.types import Frames, FrameSpec

SOURCE = "source size (not scaled)"
MIN_UP = "min_pixels (scaled up)"
FIXED = "the model's fixed frame size"


def size_set_by(spec: FrameSpec, src_h: int, src_w: int, nframes: int) -> str:
    """Which budget set the size of ``nframes`` frames of a ``src_h`` x ``src_w`` video:
    a cap (max_pixels, total_pixels, the token cap, the min_pixels floor), the floor
    scaling a small source up, or none (the source size, rounded to the patch grid)."""
    if spec.size is not None:
        return FIXED
    if spec.keep_size:
        return MAX_PIXELS if src_h * src_w > spec.max_pixels else SOURCE
    cap, why = pixel_cap(spec, nframes)
    f = spec.factor
    rounded = max(f, round_by_factor(src_h, f)) * max(f, round_by_factor(src_w, f))
    if rounded > cap:
        return why
    return MIN_UP if rounded < spec.min_pixels else SOURCE


@dataclass(frozen=True)
class FramePlan:
    """The frames a video will give under a spec, computed from its header alone."""

    nframes: int
    height: int
    width: int
    capped_by: str
    """The budget that set the frame size (:func:`size_set_by`)."""

    def tokens(self, spec: FrameSpec) -> int:
        """Visual tokens of the video (Qwen-VL: one per factor x factor pixels per
        temporal patch of frames)."""
        groups = -(-self.nframes // spec.temporal_patch)
        return groups * (self.height // spec.factor) * (self.width // spec.factor)


def plan(src_h: int, src_w: int, window_frames: int, src_fps: float, spec: FrameSpec) -> FramePlan:
    """The frame count and size ``spec`` gives a ``src_h`` x ``src_w`` clip whose sampled
    window holds ``window_frames`` frames at ``src_fps`` (ValueError: aspect ratio)."""
    n = count_frames(window_frames, src_fps, spec)
    h, w = video_size(src_h, src_w, spec, n)
    return FramePlan(n, h, w, size_set_by(spec, src_h, src_w, n))


@dataclass(frozen=True)
class Probe:
    """What a container header says about its video stream (no frame decoded)."""

    height: int
    width: int
    fps: float
    frames: int


def probe(path: str | Path) -> Probe:
    """Size, average frame rate and frame count of ``path`` from its header (PyAV).

    The count is the declared one, or duration x rate when the container declares none
    (mkv, webm); a display rotation of 90/270 degrees is not applied (the area, hence the
    token count, is the same either way). VideoError when the header says too little.
    """
    import av

    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise VideoError(str(path), "the file has no video stream")
            stream = container.streams.video[0]
            fps = float(stream.average_rate or stream.guessed_rate or 0)
            frames = int(stream.frames or 0)
            if not frames and fps > 0:
                duration = None
                if stream.duration is not None and stream.time_base is not None:
                    duration = float(stream.duration * stream.time_base)
                elif container.duration is not None:
                    duration = container.duration / av.time_base
                frames = round((duration or 0) * fps)
            h, w = stream.codec_context.height, stream.codec_context.width
    except av.FFmpegError as exc:
        raise VideoError(str(path), f"not a readable video file ({exc})") from None
    if not (h and w and fps > 0 and frames > 0):
        raise VideoError(str(path), "the header gives no size, frame rate or frame count")
    return Probe(h, w, fps, frames)


def frames_plan(frames: Frames, spec: FrameSpec) -> FramePlan:
    """The plan of frames already loaded (a cache hit: exact, no decoding)."""
    t, h, w = frames.array.shape[:3]
    m = frames.meta
    return FramePlan(t, h, w, size_set_by(spec, m.source_height, m.source_width, t))


def plan_from_header(path: str | Path, spec: FrameSpec) -> FramePlan:
    """:func:`plan` for the video at ``path`` (its header only) under ``spec``."""
    p = probe(path)
    first, last = frame_range(p.frames, p.fps, spec.start, spec.end)
    return plan(p.height, p.width, last - first + 1, p.fps, spec)


class FrameLog:
    """Frame count, size and binding budget of every video a benchmark's run loaded
    (thread-safe: the IO threads add to it), summarised per benchmark in ``frames.json``."""

    def __init__(self) -> None:
        self._seen: Counter[tuple[int, int, int, str]] = Counter()
        self._lock = threading.Lock()

    def add(self, plan: FramePlan) -> None:
        """One video as loaded."""
        with self._lock:
            self._seen[(plan.nframes, plan.height, plan.width, plan.capped_by)] += 1

    def counts(self) -> Counter[tuple[int, int, int, str]]:
        """(frames, height, width, capped_by) -> videos (for merging logs of replicas)."""
        with self._lock:
            return Counter(self._seen)

    def add_counts(self, counts: Counter[tuple[int, int, int, str]]) -> None:
        """Add another log's :meth:`counts` to this one."""
        with self._lock:
            self._seen.update(counts)

    def summary(self) -> dict[str, Any]:
        """Counts of frame counts, sizes and budgets (JSON-able)."""
        with self._lock:
            seen = Counter(self._seen)
        out: dict[str, Counter[str]] = {
            "frames": Counter(),
            "size": Counter(),
            "capped_by": Counter(),
        }
        for (n, h, w, why), k in seen.items():
            out["frames"][str(n)] += k
            out["size"][f"{h}x{w}"] += k
            out["capped_by"][why] += k
        return {key: dict(c) for key, c in out.items()} | {"videos": sum(seen.values())}

    def write(self, path: Path, benchmark: str) -> None:
        """Merge this benchmark's summary into ``path`` (a run's ``RunDir.frames_path``;
        a resumed run adds its videos to those of the earlier sessions)."""
        doc = read_frames(path)
        mine = self.summary()
        old = doc.get(benchmark) or {}
        for key in ("frames", "size", "capped_by"):
            merged = Counter(old.get(key) or {})
            merged.update(mine[key])
            mine[key] = dict(merged)
        mine["videos"] += int(old.get("videos") or 0)
        doc[benchmark] = mine
        from evalkit.atomic import write_text_atomic

        write_text_atomic(path, json.dumps(doc, indent=1, sort_keys=True))


def read_frames(path: Path) -> dict[str, Any]:
    """A run's ``frames.json`` (``RunDir.frames_path``; {} when absent or unreadable)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def describe(entry: dict[str, Any]) -> str:
    """One line: frame count and size as run, and which budget capped the size."""

    def spread(counts: dict[str, int], sort_key: Callable[[str], Any]) -> str:
        keys = sorted(counts, key=sort_key)
        if len(keys) == 1:
            return keys[0]
        top = max(counts, key=lambda k: counts[k])
        if counts[top] == min(counts.values()):
            return f"{keys[0]}..{keys[-1]}"
        return f"{keys[0]}..{keys[-1]} (most often {top})"

    def area(s: str) -> int:
        h, _, w = s.partition("x")
        return int(h) * int(w)

    if not entry.get("videos") or not entry.get("frames") or not entry.get("size"):
        return "no video loaded"
    frames = spread(entry.get("frames") or {}, int)
    size = spread(entry.get("size") or {}, area)
    caps = entry.get("capped_by") or {}
    why = ", ".join(f"{k} ({v})" for k, v in sorted(caps.items(), key=lambda kv: -kv[1]))
    return f"{entry.get('videos', 0)} videos: {frames} frames of {size} px; size set by {why}"
