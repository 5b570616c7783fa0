"""Streaming and segment questions: the model sees only the frames of the question's window.

The fixtures' videos are index videos (every frame encodes its own number), so the frame
numbers that reach the engine are read back from the pixels, not from metadata alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest

from evalkit.bench.loader import load
from evalkit.bench.registry import get_benchmark
from evalkit.cache import FrameCache, cache_key, source_identity
from evalkit.request_builder import RequestBuilder
from evalkit.sample import Sample, VideoRef
from evalkit.testing.index_video import read_indices
from evalkit.video import load_video
from tests.fixtures.bench import official_reasoning_streaming

FPS = official_reasoning_streaming.INDEX_FPS


def video(sample: Sample) -> VideoRef:
    """The sample's video reference."""
    ref = sample.media[0]
    assert isinstance(ref, VideoRef)
    return ref


def _requests(
    name: str, root: Path, cache_root: Path
) -> list[tuple[Sample, list[int], list[float]]]:
    """Each sample through the real IO stage: (sample, frame numbers read from the pixels
    the engine receives, their timestamps)."""
    spec = get_benchmark(name)
    builder = RequestBuilder(cache=FrameCache(cache_root), frame_spec=spec.frames)
    out = []
    for s in load(spec, root):
        (frames,) = builder(s).videos
        out.append((s, read_indices(frames.array), list(frames.meta.timestamps)))
    return out


def test_ovobench_no_frame_after_the_question_time_reaches_the_model(tmp_path: Path) -> None:
    root = official_reasoning_streaming.ovobench(tmp_path / "data")
    seen = _requests("OVO-Bench", root, tmp_path / "cache")
    assert len(seen) == 11
    for sample, indices, stamps in seen:
        t = video(sample).end
        assert t is not None and video(sample).start is None
        last_allowed = math.floor(t * FPS)
        assert indices == sorted(indices) and max(indices) <= last_allowed, sample.id
        assert max(stamps) <= t + 1e-9, sample.id
        # and the window is used up to its end: the latest frame is near the question time
        assert max(indices) >= last_allowed - FPS, sample.id


def test_the_same_video_asked_at_two_times_gets_two_cache_entries(tmp_path: Path) -> None:
    root = official_reasoning_streaming.ovobench(tmp_path / "data")
    spec = get_benchmark("OVO-Bench")
    by = {s.id: s for s in load(spec, root)}
    early, late = video(by["7/0"]), video(by["7/1"])
    assert early.path == late.path
    source = source_identity(early.path)
    assert cache_key(source, early, spec.frames) != cache_key(source, late, spec.frames)


def test_without_the_window_later_frames_would_be_shown(tmp_path: Path) -> None:
    """Control: the check above can fail. The full video has frames after t."""
    root = official_reasoning_streaming.ovobench(tmp_path / "data")
    spec = get_benchmark("OVO-Bench")
    sample = next(s for s in load(spec, root) if s.id == "3")  # asked at 2.5 s
    ref = video(sample)
    assert ref.end == 2.5
    full = load_video(VideoRef(path=ref.path), spec.frames)
    assert max(read_indices(full.array)) > math.floor(2.5 * FPS)
    windowed = load_video(ref, spec.frames)
    assert max(read_indices(windowed.array)) <= math.floor(2.5 * FPS)


@pytest.mark.parametrize("name, builder", [
    ("ODV-Bench", official_reasoning_streaming.odvbench),
    ("LiveSports-3K-QA", official_reasoning_streaming.livesportsqa),
])  # fmt: skip
def test_segment_questions_see_only_their_window(
    name: str, builder: Callable[[Path], Path], tmp_path: Path
) -> None:
    root = builder(tmp_path / "data")
    for sample, indices, stamps in _requests(name, root, tmp_path / "cache"):
        ref = video(sample)
        assert ref.start is not None and ref.end is not None
        assert min(indices) >= math.ceil(ref.start * FPS), sample.id
        assert max(indices) <= math.floor(ref.end * FPS), sample.id
        assert ref.start - 1e-9 <= min(stamps) and max(stamps) <= ref.end + 1e-9
