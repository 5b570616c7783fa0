"""MINERVA: lmms-eval's extraction (lmms_eval/tasks/minerva/utils.py), verdicts traced by
hand; no official rule exists, so the headline stays evalkit's."""

from __future__ import annotations

import pytest

from evalkit.bench.registry import get_benchmark
from evalkit.sample import Sample
from evalkit.scoring import score
from evalkit.scoring.rules import get_rule


def _sample(target: str = "C") -> Sample:
    # The loader turns MINERVA's answer_id index into the letter (target_kind: index).
    return Sample(
        id="k1",
        task_type="multiple_choice",
        question="How many goals?",
        options=["one", "two", "three", "four", "five"],
        target=target,
    )


CASES = [
    ("C", "C", 1.0, "C"),
    ("The answer is C", "C", 1.0, "C"),  # explicit pattern
    ("answer: c", "C", 1.0, "C"),  # explicit pattern is case-insensitive, letter upper-cased
    ("The answer is a bird", "A", 1.0, "A"),  # the article "a" is read as A
    ("Option A looks wrong; the answer is D. Or B?", "D", 1.0, "D"),  # LAST explicit match
    ("I pick B, not C", "C", 1.0, "C"),  # last capital A-E
    ("C is right, B is a decoy", "C", 0.0, "B"),
    ("The best answer is: E", "E", 1.0, "E"),  # "is:" breaks the explicit pattern
    ("Answer: D", "D", 1.0, "D"),  # explicit via "answer:" (case-insensitive)
    ("Therefore, the final answer is: (B)", "B", 1.0, "B"),  # "is:" no; phrase deleted
    ("(C) three", "C", 1.0, "C"),
    ("Eventually D", "D", 1.0, "D"),  # E of "Eventually" comes first, D last
    ("Definitely", "A", 0.0, "D"),  # the D of "Definitely"
]


@pytest.mark.parametrize(("reply", "gold", "value", "answer"), CASES)
def test_lmms_eval_minerva_matches_extract_choice_letter(
    reply: str, gold: str, value: float, answer: str | None
) -> None:
    got = score(_sample(gold), reply, rule="lmms_eval_minerva")
    assert (got.value, got.answer) == (value, answer)


@pytest.mark.parametrize("reply", ["", "no idea", "f"])
def test_no_letter_scores_the_random_guess_expectation(reply: str) -> None:
    got = score(_sample(), reply, rule="lmms_eval_minerva")
    assert got.value == pytest.approx(0.2)
    assert got.answer is None


def test_minerva_has_no_official_rule_so_the_headline_is_evalkit() -> None:
    assert get_benchmark("MINERVA").headline_rule("multiple_choice") == "evalkit"
    assert get_rule("lmms_eval_minerva", "multiple_choice").gameable
