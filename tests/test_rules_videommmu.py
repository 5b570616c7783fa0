"""Video-MMMU's official rules (VideoMMMU repo lmms_eval/tasks/videommmu/utils.py, MMMU
helpers), verdicts traced by hand; its official prompts and aggregate."""

from __future__ import annotations

import pytest

from evalkit.bench.aggregations import Scored, aggregate
from evalkit.bench.registry import get_benchmark
from evalkit.sample import Sample
from evalkit.scoring import score
from tests._official_prompts import render_official

_OPTIONS = ["red", "green", "blue", "yellow"]


def _mc(target: str = "B", **fields: str) -> Sample:
    return Sample(
        id="Perception/validation_Art_1",
        task_type="multiple_choice",
        question="Which colour is the car?",
        options=_OPTIONS,
        target=target,
        fields=fields,
    )


def _open(target: str, **fields: str) -> Sample:
    return Sample(
        id="Adaptation/validation_Math_2",
        task_type="math",
        question="x?",
        target=target,
        fields=fields,
    )


MC_CASES = [
    ("B", "B", 1.0, "B"),  # " B " -> the space scan
    ("The answer is (B).", "B", 1.0, "B"),  # trailing "." stripped, then "(B)"
    ("A. red is wrong; B. green is right", "B", 1.0, "B"),  # two "X." -> last one
    ("B. green, not A.", "B", 1.0, "B"),  # the final "." is stripped: "A." is gone
    ("Answer: A", "B", 0.0, "A"),  # "Answer:" is no "A:"; " A " by the space scan
    ("I choose C because the colour is blue", "C", 1.0, "C"),
    ("the colour of the car is clearly green today", "B", 1.0, "B"),  # option text, > 5 words
    ("it is not red but actually green in the end", "B", 1.0, "B"),  # last option text
    ("green", "B", 0.0, None),  # option text needs more than five words
    ("in DNA. so B", "B", 0.0, "A"),  # "A." inside "DNA." wins over the space scan
    ("(A) or (B)?", "B", 1.0, "B"),  # "?" stripped; last "(X)"
    ("B: green. A: red", "B", 0.0, "A"),  # two "X:" -> last one
    ("A. red\nB: green", "B", 0.0, "A"),  # a period candidate outranks a colon one
    ("c", "C", 0.0, None),  # lower case is never a letter
]


@pytest.mark.parametrize(("reply", "target", "value", "answer"), MC_CASES)
def test_videommmu_choice_matches_mmmu_parse(
    reply: str, target: str, value: float, answer: str | None
) -> None:
    got = score(_mc(target), reply, rule="videommmu")
    assert (got.value, got.answer) == (value, answer)


OPEN_CASES = [
    ("The answer is 3.14", "3.14", 1.0),  # tail after "is " -> 3.14
    ("x = 3.141", "3.14", 1.0),  # "=" on the last line; numbers rounded to 2 places
    ("There are 5 apples", "5", 1.0),  # tail "5 apples" holds the number 5
    ("I think 15", "5", 0.0),  # no indicator: the whole reply; 15 != 5
    ("The organelle is the Mitochondria.", "mitochondria", 1.0),  # answer inside the tail
    ("so x", "x", 1.0),  # one-character answers are padded: " x" in " x"
    ("the value is xy", "x", 0.0),  # " x" / "x " not in "xy"
    ("Step: total is 10\nso the answer is 12", "10", 1.0),  # every line's tail counts
    ("The total is 1,000", "1000", 1.0),
    ("it is 3\nx = 7", "7", 1.0),  # "=" counts on the last line
    ("x = 7\nit is 3", "7", 0.0),  # ... but not on an earlier one
    ("The result is 2.5e3", "2500", 1.0),  # scientific notation is a number
]


@pytest.mark.parametrize(("reply", "target", "value"), OPEN_CASES)
def test_videommmu_open_matches_mmmu_eval_open(reply: str, target: str, value: float) -> None:
    assert score(_open(target), reply, rule="videommmu").value == value


@pytest.mark.parametrize("reply", ["", "API Error"])
def test_empty_reply_is_left_out_as_the_official_aggregate_does(reply: str) -> None:
    assert score(_mc("B"), reply, rule="videommmu").value is None
    assert score(_open("5"), reply, rule="videommmu").value is None


def test_videommmu_is_the_headline_rule_for_both_task_types() -> None:
    spec = get_benchmark("Video-MMMU")
    assert spec.headline_rule("multiple_choice") == "videommmu"
    assert spec.headline_rule("math") == "videommmu"


def test_overall_is_pooled_over_answered_questions_with_per_track_figures() -> None:
    spec = get_benchmark("Video-MMMU")
    rows = [
        Scored(_mc(track="Perception"), 1.0),
        Scored(_mc(track="Perception"), 0.0),
        Scored(_mc(track="Adaptation"), 1.0),
        Scored(_mc(track="Adaptation"), None),  # empty reply: dropped, as the official code does
    ]
    got = aggregate(spec, rows)
    assert got.overall == pytest.approx(200 / 3)
    assert got.breakdowns["track"] == {"Adaptation": 100.0, "Perception": 50.0}
    assert got.n_unscored == 1


def test_official_prompt_perception_track() -> None:
    s = _mc(track="Perception")
    expected = (
        "Which colour is the car?\nA. red\nB. green\nC. blue\nD. yellow"
        "\nPlease ignore the Quiz question in last frame of the video."
    )
    assert render_official("Video-MMMU", "multiple_choice", s) == expected


def test_official_prompt_adaptation_track_multiple_choice() -> None:
    s = _mc(track="Adaptation")
    expected = (
        "You should watch and learn the video content. Then apply what you learned to answer "
        "the following multi-choice question. The image for this question is at the end of "
        "the video.\nWhich colour is the car?\nA. red\nB. green\nC. blue\nD. yellow"
    )
    assert render_official("Video-MMMU", "multiple_choice", s) == expected


def test_official_prompt_adaptation_track_open() -> None:
    s = _open("5", track="Adaptation")
    expected = (
        "You should watch and learn the video content. Then apply what you learned to answer "
        "the following open-ended question. The image for this question is at the end of the "
        "video.\nx?"
    )
    assert render_official("Video-MMMU", "math", s) == expected


def test_question_only_variant_is_the_delta_knowledge_baseline() -> None:
    spec = get_benchmark("Video-MMMU").with_variant("question_only")
    assert [f.path for f in spec.files] == ["Adaptation/test-*.parquet"]
    assert spec.image is None and spec.video is not None
    assert spec.video.pattern == "{id}_image"
    s = _mc(track="Adaptation")
    got = render_official("Video-MMMU", "multiple_choice", s, variant="question_only")
    assert got == "Which colour is the car?\nA. red\nB. green\nC. blue\nD. yellow"
    # an open question keeps the newline parse_options leaves after it
    assert render_official("Video-MMMU", "math", _open("5"), variant="question_only") == "x?\n"
