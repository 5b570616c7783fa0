"""Properties: any prediction string gives a Score in [0, 1] without raising; IoU laws."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalkit.sample import Sample
from evalkit.scoring import SCORERS, Score
from evalkit.scoring.grounding import box_iou, temporal_iou

from ._scoring_helpers import sample

# Fast scorers are called directly (not through the router's safety net), so a raise
# inside one fails this test. Math, code and the judge have their own tests below.
TARGETS: dict[str, tuple[Any, list[str]]] = {
    "multiple_choice": ("C", ["a cat", "a dog", "a bird", "a fish"]),
    "boolean": ("yes", []),
    "numerical": (12.5, []),
    "regression": (3.2, []),
    "temporal_grounding": ([1.5, 7.0], []),
    "spatial_grounding": ([10, 10, 50, 60], []),
    "spatiotemporal_grounding": ({"time": [0, 4], "boxes": {"1": [0, 0, 9, 9]}}, []),
    "open_ended": ("a man rides a horse", []),
    "ocr": ("STOP", []),
    "code_html": ("<html><body><p>x</p></body></html>", []),
}

# Text that looks like model output: tags, braces, numbers, letters, Chinese, LaTeX.
pieces = st.sampled_from(
    ["<answer>", "</answer>", "<think>", "</think>", "\\boxed{", "}", "{", "[", "]", '"',
     "time", "boxes", "bbox_2d", ":", ",", "-", ".", "/", "%", "1", "0.5", "1e309", "A", "C",
     "(B)", "yes", "no", "答案是", "the answer is", "twelve", "```", "json", " ", "\n"]
)  # fmt: skip
model_like = st.lists(pieces, max_size=40).map("".join)
any_text = st.one_of(st.text(max_size=300), model_like)


def _check(got: Score) -> None:
    assert isinstance(got, Score)
    json.dumps(got.to_dict(), allow_nan=False)  # the results store writes it as JSON
    assert got.value is not None and 0.0 <= got.value <= 1.0
    assert got.metadata.get("format", 0.0) in (0.0, 0.25, 0.5, 1.0)


@pytest.mark.parametrize("task_type", sorted(TARGETS))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prediction=any_text)
def test_any_prediction_scores_in_unit_interval(task_type: str, prediction: str) -> None:
    target, options = TARGETS[task_type]
    s = sample(task_type, target, options)
    _check(SCORERS.get(task_type)(prediction, target, s))


@settings(max_examples=25, deadline=None)
@given(prediction=any_text)
def test_math_never_raises(prediction: str) -> None:
    _check(SCORERS.get("math")(prediction, "\\frac{1}{2}", sample("math", "\\frac{1}{2}")))


@settings(max_examples=30, deadline=None)
@given(prediction=any_text)
def test_llm_judge_without_judge_is_none_for_any_input(prediction: str) -> None:
    got = SCORERS.get("llm_judge")(prediction, "x", sample("llm_judge", "x"))
    assert got.value is None


@settings(max_examples=30, deadline=None)
@given(
    target=st.one_of(
        st.none(), st.integers(), st.text(max_size=20), st.lists(st.floats(), max_size=5)
    )
)
def test_odd_targets_do_not_raise(target: Any) -> None:
    for task_type in ("multiple_choice", "numerical", "temporal_grounding", "spatial_grounding"):
        s = Sample(id="x", task_type=task_type, question="q", target=target, options=["a", "b"])
        _check(SCORERS.get(task_type)("<answer>[1, 2, 3, 4]</answer>", target, s))


finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@given(a=st.tuples(finite, finite), b=st.tuples(finite, finite))
def test_temporal_iou_is_symmetric_bounded_and_one_on_itself(
    a: tuple[float, float], b: tuple[float, float]
) -> None:
    assert temporal_iou(a, b) == temporal_iou(b, a)
    assert 0.0 <= temporal_iou(a, b) <= 1.0
    assert temporal_iou(a, a) == 1.0


@given(a=st.tuples(finite, finite, finite, finite), b=st.tuples(finite, finite, finite, finite))
def test_box_iou_is_symmetric_bounded_and_one_on_itself(a: Any, b: Any) -> None:
    assert box_iou(a, b) == box_iou(b, a)
    assert 0.0 <= box_iou(a, b) <= 1.0
    # a box with reversed corners (x2 < x1 or y2 < y1) is invalid and overlaps nothing
    assert box_iou(a, a) == (1.0 if a[2] >= a[0] and a[3] >= a[1] else 0.0)


@pytest.mark.parametrize("task_type", ["code_python", "code_svg"])
@settings(max_examples=8, deadline=None)
@given(prediction=any_text)
def test_sandboxed_scorers_never_raise(task_type: str, prediction: str) -> None:
    target = (
        "assert True" if task_type == "code_python" else "<svg xmlns='http://www.w3.org/2000/svg'/>"
    )
    _check(SCORERS.get(task_type)(prediction, target, sample(task_type, target)))
