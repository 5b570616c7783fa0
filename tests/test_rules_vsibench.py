"""VSI-Bench's official rules (the reply's first space-separated token: exact letter, or
float -> MRA), its merged macro mean and its pinned prompts; verdicts traced by hand
through thinking-in-space lmms_eval/tasks/vsibench/utils.py."""

from __future__ import annotations

import pytest

from evalkit.bench.aggregations import aggregate
from evalkit.bench.registry import get_benchmark
from evalkit.scoring import score
from tests._official_prompts import render_official
from tests._rule_cases import real_samples, sample, scored, verdict, wrong_reply

MC_CASES = [
    ("A", 1.0),
    ("A.", 1.0),  # trailing dots cut
    ("a", 1.0),  # compared lower-cased
    ("(A)", 0.0),
    ("A)", 0.0),
    ("The answer is A", 0.0),  # first token "The"
    (" A", 0.0),  # split(" ")[0] is "" when the reply starts with a space
    ("A\nbecause", 0.0),  # no space: the token is "A\nbecause"
    ("A because", 1.0),
    ("B", 0.0),
    ("A...", 1.0),
    ("A, the chair", 0.0),  # "A," keeps its comma
]


@pytest.mark.parametrize(("reply", "expected"), MC_CASES)
def test_multiple_choice_verdicts(reply: str, expected: float) -> None:
    assert verdict("vsibench", sample(target="A"), reply).value == expected


# MRA = share of θ in linspace(.5, .95, 10) with |p - g| / g <= 1 - θ
NA_CASES = [
    ("3.5", "3.5", 1.0),
    ("3.5 meters", "3.5", 1.0),
    ("about 3.5 meters, not 4", "3.5", 0.0),  # first token "about": not a number
    ("3.5m", "3.5", 0.0),
    ("3.0", "3.5", 0.8),  # |.5|/3.5 = .143 <= 1-θ for θ = .50 .. .85
    ("4.", "3.5", 0.8),  # "4." -> "4"
    ("1_000", "1000", 1.0),  # Python's float() reads "1_000"
    ("nan", "3.5", 0.0),  # float("nan") compares False everywhere
    ("7", "3.5", 0.0),  # relative error 1
    ("-3.5", "3.5", 0.0),
    ("3.5\n", "3.5", 1.0),  # the token "3.5\n" is stripped after the dots
    ("15", "10", 0.1),  # relative error .5: only θ = .50
    ("11", "10", 0.9),  # relative error .1 passes θ = .90 with the official float θ
    ("", "10", 0.0),
]


@pytest.mark.parametrize(("reply", "target", "expected"), NA_CASES)
def test_regression_verdicts(reply: str, target: str, expected: float) -> None:
    s = sample("regression", target=target)
    assert verdict("vsibench", s, reply).value == pytest.approx(expected)


def test_numeric_target_may_be_a_number() -> None:
    assert verdict("vsibench", sample("regression", target=58), "58 cm").value == 1.0


def test_zero_target_is_an_error_as_in_the_official_division() -> None:
    with pytest.raises(ValueError, match="target 0"):
        verdict("vsibench", sample("regression", target=0), "0")


def test_headline_rules_are_the_official_ones() -> None:
    spec = get_benchmark("VSI-Bench")
    assert spec.headline_rule("multiple_choice") == "vsibench"
    assert spec.headline_rule("regression") == "vsibench"


def test_aggregate_merges_the_three_direction_levels_into_one_task() -> None:
    spec = get_benchmark("VSI-Bench")
    rows = [
        scored("multiple_choice", 1.0, question_type="object_rel_direction_easy"),
        scored("multiple_choice", 0.0, question_type="object_rel_direction_medium"),
        scored("multiple_choice", 0.0, question_type="object_rel_direction_hard"),
        scored("multiple_choice", 0.0, question_type="object_rel_direction_hard"),
        scored("regression", 0.8, question_type="object_counting"),
    ]
    res = aggregate(spec, rows)
    # direction = mean(100, 0, 0) = 33.3; counting 80; overall = mean of the two tasks
    assert res.breakdowns["question_type"]["object_rel_direction"] == pytest.approx(100 / 3)
    assert res.overall == pytest.approx((100 / 3 + 80) / 2)


def test_official_prompts_render_doc_to_text() -> None:
    spec = get_benchmark("VSI-Bench")
    mc = sample(target="D", options=["printer", "chair"], question="Which is closest?")
    assert render_official(spec, "multiple_choice", mc) == (
        "These are frames of a video.\nWhich is closest?\nOptions:\nA. printer\nB. chair\n"
        "Answer with the option's letter from the given choices directly."
    )
    na = sample("regression", target="58", question="How long is the nightstand?")
    assert render_official(spec, "regression", na) == (
        "These are frames of a video.\nHow long is the nightstand?\n"
        "Please answer the question using a single word or phrase."
    )


@pytest.mark.realdata
def test_real_rows_score_their_own_answer_right_and_another_wrong() -> None:
    for s in real_samples("vsibench.json"):
        rule = get_benchmark("VSI-Bench").headline_rule(s.task_type)
        assert rule == "vsibench"
        assert score(s, str(s.target), rule=rule).value == 1.0, s.id
        assert score(s, wrong_reply(s), rule=rule).value == 0.0, s.id
