"""MLVU's official check (choice_bench.py check_ans), traced by hand: the character just
before the first ")", else the whole reply, compared with == to the letter."""

from __future__ import annotations

import pytest

from evalkit.bench.registry import get_benchmark
from evalkit.sample import Sample
from evalkit.scoring import score
from evalkit.scoring.rules import get_rule
from tests._official_prompts import render_official
from tests._scoring_helpers import sample

OPTIONS = ["a cat", "a dog", "a bird", "a fish"]


@pytest.mark.parametrize(
    ("reply", "value", "answer"),
    [
        ("B", 1.0, "B"),
        ("B) a dog", 1.0, "B"),  # the reply after the official "Best Option: ("
        ("(B) a dog", 1.0, "B"),
        ("The answer is (B).", 1.0, "B"),
        ("Best Option: (B)", 1.0, "B"),
        ("b", 0.0, "b"),
        ("B.", 0.0, "B."),  # no ")" -> the whole reply, nothing stripped
        (" B", 0.0, " B"),
        ("A and B", 0.0, "A and B"),
        ("(A) or (B)", 0.0, "A"),
        ("E)", 0.0, "E"),
        ("The video shows a dog (brown) running, so B) is right", 0.0, "n"),
        ("", 0.0, None),
        (")", 0.0, None),  # ")" first: Python's s[-1:0] is ""
    ],
)
def test_reply_read_by_check_ans(reply: str, value: float, answer: str | None) -> None:
    got = score(sample("multiple_choice", "B", OPTIONS), reply, rule="mlvu")
    assert (got.value, got.answer) == (value, answer)


def test_rule_is_not_gameable_and_names_its_source() -> None:
    r = get_rule("mlvu", "multiple_choice")
    assert not r.gameable
    assert "check_ans" in r.source


def test_spec_headline_is_the_official_rule() -> None:
    assert get_benchmark("MLVU").headline_rule("multiple_choice") == "mlvu"


def test_pinned_prompt_is_the_official_question_block() -> None:
    s = Sample(
        id="x",
        task_type="multiple_choice",
        question="What animal appears first?",
        options=OPTIONS,
        target="B",
    )
    # qa_template().rstrip() + "\nOnly give the best option.", by hand
    expected = (
        "Question: What animal appears first?\nOptions:\n"
        "(A) a cat\n(B) a dog\n(C) a bird\n(D) a fish\nOnly give the best option."
    )
    spec = get_benchmark("MLVU")
    assert spec.prompt.variant == "official"
    assert render_official("MLVU", "*", s) == expected
    assert spec.prompt.official["*"].system == (
        "Carefully watch this video and pay attention to every detail. Based on your "
        "observations, select the best option that accurately addresses the question."
    )
