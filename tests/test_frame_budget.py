"""Which budget sets a video's frame size, what the header alone predicts, and a prompt that
cannot fit the model's context failing before its video is decoded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalkit.cache import FrameCache
from evalkit.errors import PromptTooLong
from evalkit.request_builder import RequestBuilder
from evalkit.sample import Sample, VideoRef
from evalkit.video import load_video
from evalkit.video.budget import (
    MIN_UP,
    SOURCE,
    FrameLog,
    describe,
    plan_from_header,
    size_set_by,
)
from evalkit.video.resize import MAX_PIXELS, MIN_PIXELS, TOKEN_CAP, TOTAL_PIXELS
from evalkit.video.types import FrameSpec

P = 28 * 28  # pixels per token of Qwen2.5-VL (factor 28)
SMALL = FrameSpec(fps=2.0, min_pixels=4 * P)  # the 120x160 test clip keeps its size


@pytest.mark.parametrize(
    ("spec", "nframes", "src", "why"),
    [
        # 768 frames share 24576 tokens (x2 temporal patch): 64 tokens a frame, not 768
        (FrameSpec(min_pixels=4 * P, total_pixels=24576 * P), 768, (720, 1280), TOTAL_PIXELS),
        (FrameSpec(max_pixels=768 * P), 16, (720, 1280), MAX_PIXELS),
        (FrameSpec(max_pixels=4096 * P), 16, (720, 1280), TOKEN_CAP),
        (FrameSpec(min_pixels=16 * P, total_pixels=64 * P), 64, (720, 1280), MIN_PIXELS),
        (FrameSpec(min_pixels=4 * P), 16, (112, 168), SOURCE),
        (FrameSpec(), 16, (112, 168), MIN_UP),  # the default floor: 128 tokens a frame
        # the clip's own size (a processor-grid family): only max_pixels can set it
        (FrameSpec(keep_size=True), 16, (112, 168), SOURCE),
        (FrameSpec(keep_size=True, max_pixels=4096 * P), 16, (720, 1280), SOURCE),
        (FrameSpec(keep_size=True, max_pixels=768 * P), 16, (720, 1280), MAX_PIXELS),
    ],
    ids=[
        "total",
        "max_pixels",
        "token cap",
        "min floor",
        "source",
        "scaled up",
        "kept",
        "kept large",
        "kept capped",
    ],
)
def test_the_budget_that_sets_the_frame_size_is_named(
    spec: FrameSpec, nframes: int, src: tuple[int, int], why: str
) -> None:
    assert size_set_by(spec, *src, nframes) == why


@pytest.mark.parametrize(
    "spec",
    [
        FrameSpec(fps=2.0),
        FrameSpec(fps=10.0, total_pixels=20 * 128 * P, min_pixels=4 * P),
        FrameSpec(nframes=8, max_pixels=64 * P, min_pixels=4 * P),
        FrameSpec(fps=4.0, start=0.5, end=2.0),
        FrameSpec(nframes=8, max_pixels=100 * 100, keep_size=True),
    ],
)
def test_the_header_predicts_the_frames_decoding_gives(index_video: Path, spec: FrameSpec) -> None:
    plan = plan_from_header(index_video, spec)
    frames = load_video(index_video, spec)
    assert (plan.nframes, plan.height, plan.width) == frames.array.shape[:3]


def _sample(video: Path) -> Sample:
    return Sample(
        id="s1",
        task_type="multiple_choice",
        question="What is shown?",
        options=["a", "b"],
        target="A",
        media=[VideoRef(path=str(video))],
        benchmark="b",
    )


def test_a_prompt_too_long_for_the_context_fails_before_decoding(
    index_video: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = FrameCache(tmp_path / "cache")

    def no_decoding(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the video was decoded")

    monkeypatch.setattr(FrameCache, "get", no_decoding)
    builder = RequestBuilder(
        cache=cache, frame_spec=SMALL.model_copy(update={"fps": 10.0}), max_prompt_tokens=100
    )
    with pytest.raises(PromptTooLong, match=r"s1: .*30 frames of 112x168 .*context is 100"):
        builder(_sample(index_video))
    assert not any((tmp_path / "cache").rglob("*.safetensors"))


def test_a_prompt_that_fits_is_built_and_its_frames_logged(
    index_video: Path, tmp_path: Path
) -> None:
    log = FrameLog()
    builder = RequestBuilder(
        cache=FrameCache(tmp_path / "cache"),
        frame_spec=SMALL,
        max_prompt_tokens=4096,
        frame_log=log,
    )
    request = builder(_sample(index_video))
    assert request.videos[0].array.shape[:3] == (6, 112, 168)
    builder(_sample(index_video))  # a cache hit is logged too
    assert describe(log.summary()) == f"2 videos: 6 frames of 112x168 px; size set by {SOURCE} (2)"


class _ShortContext:
    """A scripted engine whose model takes 100 tokens at most."""

    max_model_len = 100
    calls = 0

    async def generate(self, request: Any) -> Any:
        self.calls += 1
        raise AssertionError("a prompt that cannot fit reached the engine")

    async def close(self) -> None:
        return None


def test_a_run_records_a_prompt_too_long_as_a_failed_sample_with_the_reason(
    index_video: Path, tmp_path: Path
) -> None:
    import json

    from evalkit.run.config import RunConfig
    from evalkit.run.execute import execute

    data = tmp_path / "data.json"
    row = {
        "problem_id": 1,
        "problem": "What is shown?",
        "problem_type": "multiple choice",
        "options": ["A. a", "B. b"],
        "solution": "<answer>A</answer>",
        "data_type": "video",
        "path": str(index_video),
    }
    data.write_text(json.dumps([row]))
    cfg = RunConfig(
        model="m",
        data=str(data),
        frames={"fps": 10.0, "min_pixels": 4 * P},
        cache_root=str(tmp_path / "cache"),
        cache_workers=1,
        runs_dir=str(tmp_path / "runs"),
        run_id="r",
    )
    engine = _ShortContext()
    result = execute(cfg, engine=engine)
    (store,) = result.path.glob("*.jsonl")
    (record,) = [json.loads(line) for line in store.read_text().splitlines()]
    assert record["status"] == "failed" and record["stage"] == "io"
    assert "PromptTooLong" in record["error"] and "max_model_len" in record["error"]
    assert engine.calls == 0
