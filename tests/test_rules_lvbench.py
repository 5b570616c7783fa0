"""LVBench's official reading (lvbench/utils/answer_util.py polish_answer, then == in
compute_accuracy.py), traced by hand."""

from __future__ import annotations

import pytest

from evalkit.bench.registry import get_benchmark
from evalkit.scoring import score
from evalkit.scoring.rules import get_rule
from tests._scoring_helpers import sample

OPTIONS = ["a red car", "a bus", "a bicycle", "a train"]


@pytest.mark.parametrize(
    ("reply", "value", "answer"),
    [
        ("C", 1.0, "C"),
        ("(C)", 1.0, "C"),  # "(C" before ")", then the part after "("
        ("C. a bicycle", 1.0, "C"),
        ("  C\nbecause the rider pedals", 1.0, "C"),  # only spaces split words
        ("Answer: (C) a bicycle", 1.0, "C"),  # "(" before the first ")" wins
        ("c", 0.0, "c"),  # compared case-sensitively
        ("The answer is C", 0.0, "T"),
        ("A and C", 0.0, "A"),
        ("(A) and (C)", 0.0, "A"),
        ("E", 0.0, "E"),  # beyond the options: just wrong
        ("Based on the video the answer is C", 0.0, "B"),
        ("Option C", 0.0, "O"),
        ("", 0.0, None),
        (")C", 0.0, None),  # nothing before the first ")"
    ],
)
def test_reply_read_by_polish_answer(reply: str, value: float, answer: str | None) -> None:
    got = score(sample("multiple_choice", "C", OPTIONS), reply, rule="lvbench")
    assert (got.value, got.answer) == (value, answer)


def test_rule_is_not_gameable_and_names_its_source() -> None:
    r = get_rule("lvbench", "multiple_choice")
    assert not r.gameable
    assert "answer_util.py polish_answer" in r.source


def test_spec_headline_is_the_official_rule() -> None:
    assert get_benchmark("LVBench").headline_rule("multiple_choice") == "lvbench"
