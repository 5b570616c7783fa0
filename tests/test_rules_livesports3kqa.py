"""LiveSports-3K-QA's official rule (LiveCC: the chosen option's first character against
the answer letter), its pooled accuracy and its pinned prompt; traced by hand through
livecc evaluation/livesports3kqa/distributed_evaluate_livesports3kqa.py."""

from __future__ import annotations

import pytest

from evalkit.bench.aggregations import aggregate
from evalkit.bench.registry import get_benchmark
from evalkit.scoring import score
from tests._official_prompts import render_official
from tests._rule_cases import real_samples, sample, scored, verdict, wrong_reply

CASES = [
    ("C", 1.0),
    ("C: a third option text", 1.0),  # the letter, then the option text
    (" C", 1.0),  # the letter token after "Answer:" carries a space
    ("\nC.", 1.0),
    ("c", 0.0),  # the letter tokens are upper case
    ("The answer is C", 0.0),  # chooses "T"
    ("(C)", 0.0),
    ("", 0.0),
    ("B", 0.0),
    ("Answer: C", 0.0),  # chooses "A"
    ("C and D", 1.0),
    ("CD", 1.0),
]


@pytest.mark.parametrize(("reply", "expected"), CASES)
def test_first_letter_verdicts(reply: str, expected: float) -> None:
    assert verdict("livesports3kqa", sample(target="C"), reply).value == expected


def test_headline_rule_is_the_official_one() -> None:
    assert get_benchmark("LiveSports-3K-QA").headline_rule("multiple_choice") == "livesports3kqa"


def test_aggregate_is_pooled_with_question_type_and_ocr_groups() -> None:
    spec = get_benchmark("LiveSports-3K-QA")
    rows = [
        scored("multiple_choice", 1.0, question_type="Who", ocr=1),
        scored("multiple_choice", 1.0, question_type="Who", ocr=0),
        scored("multiple_choice", 1.0, question_type="Who", ocr=0),
        scored("multiple_choice", 0.0, question_type="What", ocr=1),
    ]
    res = aggregate(spec, rows)
    assert res.overall == pytest.approx(75.0)
    assert res.breakdowns["question_type"] == {"What": 0.0, "Who": 100.0}
    assert res.breakdowns["ocr"]["1"] == pytest.approx(50.0)


def test_official_prompt_renders_the_mcq_dataset_query() -> None:
    s = sample(
        target="C",
        options=["Sprint relay", "High jump", "Long jump"],
        question="What challenge is it?",
    )
    assert render_official(get_benchmark("LiveSports-3K-QA"), "multiple_choice", s) == (
        "What challenge is it?\nA: Sprint relay\nB: High jump\n"
        "C: Long jump\nPlease select the correct answer."
    )


@pytest.mark.realdata
def test_real_rows_score_their_own_answer_right_and_another_wrong() -> None:
    for s in real_samples("livesports3k_qa.json"):
        rule = get_benchmark("LiveSports-3K-QA").headline_rule(s.task_type)
        assert rule == "livesports3kqa"
        assert score(s, str(s.target), rule=rule).value == 1.0, s.id
        assert score(s, wrong_reply(s), rule=rule).value == 0.0, s.id
