"""Grounding answers in the shapes models write them, on loaded Charades-STA / STVG samples."""

from __future__ import annotations

import json

import pytest

from evalkit.bench.loader import load
from evalkit.bench.registry import get_benchmark
from evalkit.sample import Sample
from evalkit.scoring import score
from tests._realdata import REAL
from tests.fixtures.bench import official_reasoning_streaming

REALDATA = REAL


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    """The Charades-STA fixture query whose answer is [2.0, 6.0] seconds."""
    root = official_reasoning_streaming.charadessta(tmp_path_factory.mktemp("charades"))
    (s,) = [s for s in load(get_benchmark("Charades-STA"), root) if s.question.endswith("door")]
    assert s.target == [2.0, 6.0]
    return s


@pytest.mark.parametrize(
    "reply",
    [
        '{"start": 2, "end": 6}',
        '{"start_time": 2.0, "end_time": 6.0}',
        '{"time": [2, 6]}',
        "[2, 6]",
        "2 - 6",
        "2.0 - 6.0 seconds",
        "The event happens from 2s to 6s.",
        "00:02 - 00:06",
        "<answer>2 - 6</answer>",
        '<think>the door opens early</think><answer>{"start": 2.0, "end": 6.0}</answer>',
    ],
)
def test_common_span_shapes_parse_to_the_same_moment(door: Sample, reply: str) -> None:
    got = score(door, reply)
    assert got.value == pytest.approx(1.0), got.explanation
    assert got.answer == [2.0, 6.0]


def test_a_reversed_span_is_swapped_and_loses_format_credit(door: Sample) -> None:
    got, straight = score(door, "6 - 2"), score(door, "2 - 6")
    assert got.value == pytest.approx(1.0)
    assert got.metadata["format"] == pytest.approx(straight.metadata["format"] / 2)


def test_no_span_scores_zero_with_a_reason(door: Sample) -> None:
    got = score(door, "I cannot tell.")
    assert got.value == 0.0 and "no [start, end]" in got.explanation


def test_a_partial_overlap_is_its_iou(door: Sample) -> None:
    assert score(door, "[4, 8]").value == pytest.approx(2 / 6)


@pytest.mark.skipif(not (REALDATA / "stvg.json").exists(), reason="real EasyVideoR1 rows absent")
def test_every_real_stvg_row_gives_a_tube_target() -> None:
    samples = load(get_benchmark("STVG"), REALDATA, check_media=False)
    assert len(samples) == 30
    for s in samples:
        assert s.task_type == "spatiotemporal_grounding"
        start, end = s.target["time"]
        assert 0 <= start < end
        assert s.target["boxes"], s.id
        # the ground truth scored as a prediction is perfect
        assert score(s, f"<answer>{json.dumps(s.target)}</answer>").value == 1.0
