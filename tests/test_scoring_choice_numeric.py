"""Multiple choice, boolean, numerical and MRA scorers against their official rules."""

from __future__ import annotations

from typing import Any

import pytest

from evalkit.scoring import score
from evalkit.scoring.numeric import mean_relative_accuracy, numbers

from ._scoring_helpers import sample

SIX = ["walk", "run", "jump", "sit", "swim", "fly"]


@pytest.mark.parametrize(
    ("prediction", "value", "fmt"),
    [
        ("<answer>C</answer>", 1.0, 1.0),
        ("C", 1.0, 0.5),
        ("(c)", 1.0, 0.5),
        ("<think>A is tempting, but</think><answer>C</answer>", 1.0, 1.0),
        ("<think>The answer is C? No.</think><answer>A</answer>", 0.0, 1.0),
        ("The answer is jump.", 1.0, 1.0),  # option text mapped back to its letter
        ("A or C", 0.0, 0.0),  # several letters: ambiguous
        ("", 0.0, 0.0),
        ("F", 0.0, 0.5),  # valid letter for six options, wrong
        ("G", 0.0, 0.0),  # out of range
    ],
)
def test_multiple_choice_exact_letter(prediction: str, value: float, fmt: float) -> None:
    s = score(sample("multiple_choice", "C", SIX), prediction)
    assert (s.value, s.metadata["format"]) == (value, fmt)


def test_multiple_choice_letters_reach_j() -> None:
    ten = [f"option {i}" for i in range(10)]
    assert score(sample("multiple choice", "J", ten), "<answer>J</answer>").value == 1.0


def test_multiple_choice_explanation_names_the_extraction() -> None:
    s = score(sample("multiple_choice", "B", SIX), "<answer>B</answer>")
    assert "answer_tag" in s.explanation and s.answer == "B"


@pytest.mark.parametrize(
    ("prediction", "target", "value"),
    [
        ("Yes", "yes", 1.0),
        ("<answer>no</answer>", "No", 1.0),
        ("True.", "yes", 1.0),
        ("yes", False, 0.0),
        ("No, it does not.", "no", 1.0),
        ("maybe", "yes", 0.0),
        ("答案是 是", "yes", 1.0),
    ],
)
def test_boolean_normalises_yes_no(prediction: str, target: Any, value: float) -> None:
    assert score(sample("boolean", target), prediction).value == value


@pytest.mark.parametrize("target", ["yes", "no"])
def test_boolean_reads_no_answer_in_degenerate_text(target: str) -> None:
    """A policy once learned to emit "0000...": digits and single letters count only as
    the whole answer, never as words inside other text."""
    for junk in ("0000000000", "0000 0000 0000", "1111", "n n n n", "x0 y1 0a", "10"):
        s = score(sample("boolean", target), junk)
        assert (s.value, s.answer) == (0.0, None), junk
    for whole, said in (("0", "no"), ("1.", "yes"), ("n", "no"), ("Y", "yes")):
        assert score(sample("boolean", target), whole).answer == said


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1,234.5", [1234.5]),
        ("3/4 of it", [0.75]),
        ("45%", [45.0]),
        ("-2.5e3", [-2500.0]),
        ("twelve chairs", [12.0]),
        ("one hundred and twenty-three", [123.0]),
        ("between 3 and 4", [3.0, 4.0]),
        ("1/0", []),
        ("no number", []),
    ],
)
def test_number_parsing(text: str, expected: list[float]) -> None:
    assert numbers(text) == expected


@pytest.mark.parametrize(
    ("prediction", "target", "value"),
    [
        ("<answer>12</answer>", 12, 1.0),
        ("<answer>12.00005</answer>", "12", 1.0),  # within rel_tol 1e-4
        ("<answer>12.1</answer>", 12, 0.0),
        ("There are twelve people.", 12, 1.0),
        ("I count 3, then 4, so 5 in total", 5, 1.0),  # unmarked: the last number
        ("<answer>5, not 4</answer>", 5, 1.0),  # marked: the first number
        ("", 5, 0.0),
        ("<answer>1,200</answer>", "1200", 1.0),
    ],
)
def test_numerical_with_tolerance(prediction: str, target: Any, value: float) -> None:
    assert score(sample("numerical", target), prediction).value == value


def test_numerical_tolerance_per_sample() -> None:
    s = sample("numerical", 100, abs_tol=2)
    assert score(s, "<answer>101.5</answer>").value == 1.0


@pytest.mark.parametrize(
    ("pred", "gold", "mra"),
    [
        (10, 10, 1.0),
        (9, 10, 0.9),  # rel err 0.1 <= 1-θ for θ in 0.50..0.90 -> 9/10
        (9.5, 10, 1.0),  # rel err 0.05 <= 1-0.95: the official code uses <=
        (5, 10, 0.1),  # rel err 0.5 <= 1-0.5 only
        (4.9, 10, 0.0),
        (5.4, 10, 0.1),  # 0.46 <= 0.5 only; not <= 0.45
        (20, 10, 0.0),
        (0, 0, 1.0),  # g = 0: exact 0 only
        (0.1, 0, 0.0),
        (-9, -10, 0.9),
    ],
)
def test_mra_follows_vsi_bench(pred: float, gold: float, mra: float) -> None:
    assert mean_relative_accuracy(pred, gold) == pytest.approx(mra)


def test_regression_scores_by_mra() -> None:
    assert score(sample("regression", 10), "<answer>9.2</answer>").value == pytest.approx(0.9)
    assert score(sample("regression", 10), "no idea").value == 0.0


def test_and_joins_number_words_only_after_a_scale() -> None:
    assert numbers("between two and three") == [2.0, 3.0]
    assert numbers("two thousand and five") == [2005.0]
