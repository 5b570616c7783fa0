"""evalkit's grounding scorers: time-only tubes and boxes with reversed corners.

EasyVideoR1's reward_fn scores an STVG row whose target has no boxes on tIoU alone, and
its ``iou_2d`` (like LLaVA-ST's ``iou``) gives a box with x2 < x1 or y2 < y1 zero overlap.
"""

from __future__ import annotations

import json

import pytest

from evalkit.sample import Sample
from evalkit.scoring import score
from evalkit.scoring.grounding import box_iou


def _tube(target: dict) -> Sample:
    return Sample(id="t", task_type="spatiotemporal_grounding", question="q", target=target)


def _box(target: list[float], **fields: int) -> Sample:
    return Sample(id="b", task_type="spatial_grounding", question="q", target=target, fields=fields)


def test_a_time_only_target_scores_a_perfect_span_one() -> None:
    got = score(_tube({"time": [16.0, 19.0], "boxes": {}}), '{"time": [16, 19], "boxes": {}}')
    assert got.value == 1.0  # was capped at 0.5
    assert got.metadata["scored_on"] == "time" and "no boxes" in got.metadata["reason"]


def test_a_time_only_target_scores_the_tiou() -> None:
    got = score(_tube({"time": [0.0, 10.0], "boxes": {}}), '{"time": [5, 10]}')
    assert got.value == pytest.approx(0.5)
    assert got.metadata["tiou"] == pytest.approx(0.5)


def test_a_time_only_target_ignores_predicted_boxes() -> None:
    reply = json.dumps({"time": [16, 19], "boxes": {"17": [0, 0, 5, 5]}})
    assert score(_tube({"time": [16.0, 19.0], "boxes": {}}), reply).value == 1.0


def test_a_target_with_boxes_still_halves_time_and_boxes() -> None:
    target = {"time": [0.0, 10.0], "boxes": {"1": [0, 0, 10, 10]}}
    got = score(_tube(target), json.dumps({"time": [0, 10], "boxes": {}}))
    assert got.value == pytest.approx(0.5) and got.metadata["scored_on"] == "time+boxes"


def test_reversed_corners_are_an_invalid_box() -> None:
    from evalkit.scoring.grounding import box_valid

    assert not box_valid((10, 10, 0, 0)) and not box_valid((0, 10, 10, 0))
    assert box_valid((0, 0, 0, 0)) and box_valid((0, 0, 10, 10))


@pytest.mark.parametrize("pred", [(10, 10, 0, 0), (10, 0, 0, 10), (0, 10, 10, 0)])
def test_a_reversed_box_overlaps_nothing(pred: tuple[float, float, float, float]) -> None:
    assert box_iou(pred, (0, 0, 10, 10)) == 0.0  # was 1.0 for (10, 10, 0, 0)


def test_spatial_grounding_scores_a_reversed_box_zero_with_the_reason() -> None:
    got = score(_box([0, 0, 10, 10]), "[10, 10, 0, 0]")
    assert got.value == 0.0 and "x2 < x1 or y2 < y1" in got.explanation
    assert got.metadata["invalid_box"] is True


def test_clipping_does_not_repair_a_reversed_box() -> None:
    got = score(_box([0, 0, 10, 10], width=5, height=5), "[20, 20, 0, 0]")
    assert got.value == 0.0


def test_a_valid_box_is_scored_as_before() -> None:
    assert score(_box([0, 0, 10, 10]), "[5, 0, 15, 10]").value == pytest.approx(50 / 150)


def test_a_reversed_box_in_a_tube_scores_zero_for_that_frame() -> None:
    target = {"time": [0.0, 2.0], "boxes": {"0": [0, 0, 10, 10], "1": [0, 0, 10, 10]}}
    reply = json.dumps({"time": [0, 2], "boxes": {"0": [0, 0, 10, 10], "1": [10, 10, 0, 0]}})
    got = score(_tube(target), reply)
    assert got.metadata["box_iou"] == pytest.approx(0.5)
    assert got.metadata["invalid_boxes"] == ["1"] and "x2 < x1" in got.explanation
    assert got.value == pytest.approx(0.5 * 1.0 + 0.5 * 0.5)
