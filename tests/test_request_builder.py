"""The IO stage on the real frame cache: frames from the cache, bad videos fail alone."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest

from evalkit.cache import FrameCache
from evalkit.engines.base import Completion
from evalkit.errors import CacheError, VideoError
from evalkit.pipeline import Pipeline, PipelineConfig
from evalkit.prompts import PromptPlan
from evalkit.request_builder import RequestBuilder
from evalkit.sample import Sample, VideoRef
from evalkit.scoring.types import Score
from evalkit.store import Store
from evalkit.testing.index_video import read_index, write_index_video
from evalkit.video.types import FrameSpec
from tests.scripted_engine import ScriptedEngine

SPEC = FrameSpec(fps=2.0, max_frames=8, min_pixels=28 * 28 * 4, max_pixels=112 * 112)


def sample(sid: str, path: Path, start: float | None = None, end: float | None = None) -> Sample:
    return Sample(
        id=sid,
        task_type="multiple_choice",
        question="Which?",
        options=["one", "two"],
        target="A",
        media=[VideoRef(path=str(path), start=start, end=end)],
    )


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("req")
    good = write_index_video(root / "good.mp4", 60, fps=10.0, width=160, height=120)
    bad = root / "bad.mp4"
    bad.write_text("this is not a video")
    return {"good": good, "bad": bad}


def test_frames_come_from_the_cache_in_the_window_the_sample_asks_for(
    videos: dict[str, Path], tmp_path: Path
) -> None:
    builder = RequestBuilder(cache=FrameCache(tmp_path), frame_spec=SPEC)
    first = builder(sample("a", videos["good"], start=2.0, end=4.0))
    assert first.metadata["cache_hit"] is False
    again = builder(sample("b", videos["good"], start=2.0, end=4.0))
    assert again.metadata["cache_hit"] is True
    picked = [read_index(f) for f in again.videos[0].array]
    assert picked == again.videos[0].meta.indices
    assert all(20 <= i <= 40 for i in picked)
    assert "A. one" in again.text and "B. two" in again.text


def test_an_undecodable_video_fails_only_its_sample_with_the_file_named(
    videos: dict[str, Path], tmp_path: Path
) -> None:
    builder = RequestBuilder(cache=FrameCache(tmp_path), frame_spec=SPEC)
    samples = [
        sample("ok1", videos["good"]),
        sample("broken", videos["bad"]),
        sample("ok2", videos["good"]),
    ]

    def score(s: Sample, c: Completion) -> Score:
        return Score(float(c.text == s.target), c.text)

    with Store(tmp_path / "r.jsonl") as store:
        asyncio.run(
            Pipeline(ScriptedEngine(), builder, score, store, PipelineConfig()).run(samples)
        )
        recs = {r.id: r for r in store.records()}
    assert recs["ok1"].status == recs["ok2"].status == "ok"
    assert recs["broken"].status == "failed" and "bad.mp4" in recs["broken"].error


def test_a_damaged_cache_entry_is_rebuilt_not_served(
    videos: dict[str, Path], tmp_path: Path
) -> None:
    cache = FrameCache(tmp_path)
    builder = RequestBuilder(cache=cache, frame_spec=SPEC)
    # a copy: the served frames are a view of the mapped file, and damaging the file in
    # place under a live mapping would fault (the cache itself only ever replaces files)
    fresh = builder(sample("a", videos["good"])).videos[0].array.copy()
    gc.collect()
    entry = cache.path_for(VideoRef(path=str(videos["good"])), SPEC)
    data = bytearray(entry.read_bytes())
    entry.write_bytes(bytes(data[: len(data) // 2]))  # truncated on disk
    again = builder(sample("b", videos["good"]))
    assert again.metadata["cache_hit"] is False
    assert (again.videos[0].array == fresh).all()


def test_require_cache_reports_a_miss_naming_the_sample_and_video(
    videos: dict[str, Path], tmp_path: Path
) -> None:
    builder = RequestBuilder(cache=FrameCache(tmp_path), frame_spec=SPEC, require_cache=True)
    with pytest.raises(CacheError, match=r"sample x: .*good\.mp4"):
        builder(sample("x", videos["good"]))


def test_misses_can_be_decoded_in_worker_processes(videos: dict[str, Path], tmp_path: Path) -> None:
    from evalkit.run.components import miss_pool

    with miss_pool(1) as pool:
        builder = RequestBuilder(cache=FrameCache(tmp_path), frame_spec=SPEC, miss_pool=pool)
        req = builder(sample("a", videos["good"]))
        with pytest.raises(VideoError, match=r"bad\.mp4"):
            builder(sample("b", videos["bad"]))
    assert req.metadata["cache_hit"] is False
    assert [read_index(f) for f in req.videos[0].array] == req.videos[0].meta.indices


def test_subtitles_of_the_sampled_frames_reach_the_prompt(tmp_path: Path) -> None:
    from evalkit.bench.loader import load
    from evalkit.bench.registry import get_benchmark
    from tests.fixtures.bench import official

    spec = get_benchmark("video-mme:with_subtitles")
    samples = {s.id: s for s in load(spec, official.videomme(tmp_path / "vmme"))}
    builder = RequestBuilder(
        cache=FrameCache(tmp_path / "cache"), frame_spec=SPEC, prompt=PromptPlan.for_spec(spec)
    )
    with_sub = builder(samples["001-1"])  # vidA.srt: "hello" from 0 s to 1 s
    without = builder(samples["002-1"])  # vidB has no subtitle file
    assert "hello" in with_sub.text and "Question 001-1?" in with_sub.text
    assert "hello" not in without.text and "Question 002-1?" in without.text
