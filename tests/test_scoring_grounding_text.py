"""Grounding (tIoU, box IoU, tubes), ROUGE and OCR scorers against their definitions."""

from __future__ import annotations

from typing import Any

import pytest

from evalkit.scoring import score
from evalkit.scoring.grounding import box_iou, parse_span, temporal_iou

from ._scoring_helpers import sample


@pytest.mark.parametrize(
    ("a", "b", "iou"),
    [
        ((0, 10), (0, 10), 1.0),
        ((0, 10), (5, 15), 5 / 15),
        ((0, 10), (10, 20), 0.0),  # touching: no overlap
        ((0, 10), (20, 30), 0.0),
        ((5, 5), (5, 5), 1.0),  # identical zero-width spans
        ((5, 5), (0, 10), 0.0),  # a zero-width span has no area to share
        ((10, 0), (0, 10), 1.0),  # reversed input is the same span
    ],
)
def test_temporal_iou(a: tuple[float, float], b: tuple[float, float], iou: float) -> None:
    assert temporal_iou(a, b) == pytest.approx(iou)


@pytest.mark.parametrize(
    ("a", "b", "iou"),
    [
        ((0, 0, 10, 10), (0, 0, 10, 10), 1.0),
        ((0, 0, 10, 10), (5, 0, 15, 10), 50 / 150),
        ((0, 0, 10, 10), (20, 20, 30, 30), 0.0),
        ((10, 10, 0, 0), (0, 0, 10, 10), 0.0),  # reversed corners: an invalid box
        ((0, 0, 0, 10), (0, 0, 10, 10), 0.0),  # degenerate box
    ],
)
def test_box_iou(a: Any, b: Any, iou: float) -> None:
    assert box_iou(a, b) == pytest.approx(iou)


@pytest.mark.parametrize(
    ("text", "span"),
    [
        ("[12.5, 20]", (12.5, 20.0)),
        ('{"start": 3, "end": 7}', (3.0, 7.0)),
        ("from 12 to 18 seconds", (12.0, 18.0)),
        ("00:12 - 01:05", (12.0, 65.0)),
        ("12.5s-20.0s", (12.5, 20.0)),
        ("at 12", None),
    ],
)
def test_span_parsing(text: str, span: tuple[float, float] | None) -> None:
    assert parse_span(text) == span


def test_temporal_grounding_scores_tiou_and_swaps_a_reversed_span() -> None:
    s = sample("temporal grounding", [10, 20])
    good = score(s, "<answer>[12, 20]</answer>")
    assert good.value == pytest.approx(0.8) and good.metadata["format"] == 1.0
    rev = score(s, "<answer>[20, 12]</answer>")
    assert rev.value == pytest.approx(0.8)
    assert rev.metadata["reversed"] is True and rev.metadata["format"] == 0.5


@pytest.mark.parametrize("prediction", ["", "no idea", "<answer>{broken json</answer>"])
def test_temporal_grounding_unparsable_scores_zero(prediction: str) -> None:
    s = score(sample("temporal_grounding", [1, 2]), prediction)
    assert s.value == 0.0 and s.metadata["format"] == 0.0


def test_spatial_grounding_reads_qwen_bbox_json() -> None:
    s = score(sample("spatial_grounding", [0, 0, 10, 10]), '{"bbox_2d": [0, 0, 10, 5]}')
    assert s.value == pytest.approx(0.5)


def test_spatial_grounding_clips_boxes_outside_the_frame() -> None:
    # The prediction spills past the 100x100 frame; only the visible part counts.
    s = sample("spatial_grounding", [50, 50, 100, 100], width=100, height=100)
    assert score(s, "[50, 50, 300, 300]").value == pytest.approx(1.0)
    unclipped = sample("spatial_grounding", [50, 50, 100, 100])
    assert score(unclipped, "[50, 50, 300, 300]").value < 0.1


def test_spatiotemporal_is_half_tiou_half_mean_box_iou_over_common_frames() -> None:
    target = {"time": [0, 10], "boxes": {"1": [0, 0, 10, 10], "2": [0, 0, 10, 10]}}
    pred = '<answer>{"time": [0, 5], "boxes": {"1.0": [0, 0, 10, 10], "7": [0, 0, 1, 1]}}</answer>'
    s = score(sample("spatial-temporal grounding", target), pred)
    assert s.value == pytest.approx(0.5 * 0.5 + 0.5 * 1.0)
    assert s.metadata["tiou"] == pytest.approx(0.5)
    assert s.metadata["viou"] == pytest.approx(1.0 / 3)  # 1 common frame of 3 in either


def test_spatiotemporal_without_common_frames_gets_only_the_time_half() -> None:
    target = {"time": [0, 10], "boxes": {"1": [0, 0, 10, 10]}}
    s = score(sample("stvg", target), '{"time": [0, 10], "boxes": {"5": [0, 0, 10, 10]}}')
    assert s.value == pytest.approx(0.5)


def test_open_ended_is_the_mean_of_rouge_1_2_l_f1() -> None:
    s = score(sample("open-ended", "a man rides a horse"), "<answer>a man rides a horse</answer>")
    assert s.value == pytest.approx(1.0)
    part = score(sample("open_ended", "a man rides a horse"), "a man is riding a horse")
    assert 0 < part.value < 1
    assert part.value == pytest.approx(
        (part.metadata["rouge1"] + part.metadata["rouge2"] + part.metadata["rougeL"]) / 3
    )
    assert score(sample("open_ended", "x"), "").value == 0.0


@pytest.mark.parametrize(
    ("prediction", "target", "value", "exact"),
    [
        ("hello world", "hello world", 1.0, True),
        ("hello  word", "hello world", 0.5, False),
        ("a b c d e f", "x", 0.0, False),  # WER > 1 clips to 0
        ("", "hello", 0.0, False),
        ("", "", 1.0, True),
    ],
)
def test_ocr_is_one_minus_wer(prediction: str, target: str, value: float, exact: bool) -> None:
    s = score(sample("OCR", target), prediction)
    assert s.value == pytest.approx(value) and s.metadata["exact_match"] is exact


def test_rouge_matches_rouge_score_with_its_own_stemming() -> None:
    from rouge_score import rouge_scorer

    ref = "The runners were running quickly across the fields"
    pred = "a runner runs quick across fields"
    official = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    want = {k: v.fmeasure for k, v in official.score(ref, pred).items()}
    got = score(sample("open_ended", ref), pred).metadata
    assert {k: got[k] for k in want} == pytest.approx(want)
