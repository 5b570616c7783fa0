"""Expected cost of a sample, for the longest-first hand-out (no Ray here).

A video sample costs its duration times the frames sampled from it (decoding scales with
the first, prefill with the second). The duration comes from the frame cache entry when
the video is cached (its header only, no frames read), else from the container header
(PyAV), else a default; images and text are cheap. Only the order matters, so estimates
need not be exact, but a wrong one must never fail the run.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from evalkit.sample import Sample, VideoRef
from evalkit.scale.queue import WorkItem
from evalkit.video.types import FrameSpec

if TYPE_CHECKING:
    from evalkit.cache import FrameCache

log = logging.getLogger(__name__)

DEFAULT_DURATION_S = 60.0
"""Duration assumed for a video whose length is unknown (unreadable header)."""
CHEAP = 1.0
"""Cost of a sample without video (text, images)."""


def frames_for(duration_s: float, spec: FrameSpec) -> int:
    """How many frames ``spec`` samples from a clip of ``duration_s`` seconds."""
    if spec.nframes:
        return int(spec.nframes)
    fps = spec.fps or 2.0
    return int(min(max(duration_s * fps, spec.min_frames), spec.max_frames))


def video_cost(duration_s: float, spec: FrameSpec) -> float:
    """Expected cost of one video: duration x frames sampled."""
    return max(duration_s, 1e-3) * frames_for(duration_s, spec)


class CostModel:
    """Durations per video, looked up once each: cache entry, else header, else default."""

    def __init__(self, cache: FrameCache | None = None) -> None:
        self.cache = cache
        self._durations: dict[str, float] = {}

    def duration(self, ref: VideoRef, spec: FrameSpec) -> float:
        """Seconds of ``ref`` that are sampled (its window when it has one)."""
        key = str(ref.path)
        if key not in self._durations:
            self._durations[key] = self._cached(ref, spec) or _from_header(ref.path)
        whole = self._durations[key]
        start = ref.start or 0.0
        end = ref.end if ref.end is not None else whole
        return max(min(end, whole) - start, 0.0) or whole

    def _cached(self, ref: VideoRef, spec: FrameSpec) -> float | None:
        if self.cache is None or getattr(self.cache, "identity", "stat") != "stat":
            return None  # a content-keyed entry is found by hashing the whole video: too dear
        try:
            from evalkit.cache.entry import read_info
            from evalkit.cache.fileformat import open_mapped

            path = self.cache.path_for(ref, spec)
            if not path.is_file():
                return None
            return float(read_info(open_mapped(path)).meta.duration_s) or None
        except Exception as exc:  # a damaged entry is the run's business, not the estimate's
            log.debug("cost: cache entry of %s unreadable (%s)", ref.path, exc)
            return None

    def cost(self, sample: Sample, spec: FrameSpec) -> float:
        """Expected cost of ``sample`` (its videos summed; CHEAP without video)."""
        videos = [m for m in sample.media if isinstance(m, VideoRef)]
        if not videos:
            return CHEAP
        return sum(video_cost(self.duration(v, spec), spec) for v in videos)

    def items(self, benchmark: str, samples: list[Sample], spec: FrameSpec) -> list[WorkItem]:
        """Work items of one benchmark's samples, grouped by their first video."""
        out = []
        for s in samples:
            videos = [m for m in s.media if isinstance(m, VideoRef)]
            group = str(videos[0].path) if videos else ""
            out.append(WorkItem((benchmark, s.id), self.cost(s, spec), group))
        return out


def _from_header(path: str) -> float:
    try:
        from evalkit.video.decode import read_header

        seconds = read_header(Path(path)).declared_duration_s
    except Exception as exc:  # unreadable: the run reports it; the estimate moves on
        log.debug("cost: no header duration for %s (%s)", path, exc)
        seconds = None
    return float(seconds) if seconds else DEFAULT_DURATION_S
