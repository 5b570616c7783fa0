"""Answer extraction: where the final answer is, and which letter/number/object it names."""

from __future__ import annotations

import pytest

from evalkit.scoring.extract import boxed, code_block, final_span, json_object, letter

LETTERS = list("ABCD")
OPTIONS = ["a red car", "a blue bus", "a dog", "a cat"]


@pytest.mark.parametrize(
    ("prediction", "text", "method"),
    [
        ("<answer>B</answer>", "B", "answer_tag"),
        ("<think>A looks right... no</think><answer> C </answer>", "C", "answer_tag"),
        ("<think>maybe A</think>The answer is D.", "D", "answer_is"),
        ("<think>maybe A</think> B", "B", "after_think"),
        ("so we get \\boxed{\\frac{1}{2}}", "\\frac{1}{2}", "boxed"),
        ("The final answer is: (C)", "(C)", "answer_is"),
        ("the best answer is 3.5 meters. Because...", "3.5 meters", "answer_is"),
        ("答案是 B", "B", "answer_is"),
        ("<think>still thinking about A", "", "empty"),
        ("", "", "empty"),
        ("  C  ", "C", "raw"),
        ("<answer>\\boxed{7}</answer>", "7", "answer_tag"),
    ],
)
def test_final_span_finds_the_marked_answer(prediction: str, text: str, method: str) -> None:
    span = final_span(prediction)
    assert (span.text, span.method) == (text, method)


def test_the_last_answer_tag_wins() -> None:
    assert final_span("<answer>A</answer> wait <answer>B</answer>").text == "B"


def test_boxed_balances_nested_braces() -> None:
    assert boxed("x \\boxed{\\frac{a}{b}} y") == "\\frac{a}{b}"
    assert boxed("\\boxed{unclosed") is None


@pytest.mark.parametrize(
    ("span", "expected", "rule"),
    [
        ("C", "C", "letter"),
        ("(C)", "C", "letter"),
        ("c", "C", "letter"),
        ("C. a dog", "C", "letter"),
        ("Option B", "B", "option_word"),
        ("a blue bus", "B", "option_text"),
        ("I think it is a red car", "A", "option_text"),
        ("A or B", None, "ambiguous"),
        ("A, C", None, "ambiguous"),
        ("E", None, ""),  # out of range for a 4-option question
        ("nothing here", None, ""),
    ],
)
def test_letter_extraction(span: str, expected: str | None, rule: str) -> None:
    assert letter(span, OPTIONS, LETTERS) == (expected, rule)


def test_json_object_reads_fenced_and_embedded_json() -> None:
    assert json_object('```json\n{"a": 1}\n```') == {"a": 1}
    assert json_object('the box is {"bbox_2d": [1, 2, 3, 4]} ok') == {"bbox_2d": [1, 2, 3, 4]}
    assert json_object("{'a': [1, 2]}") == {"a": [1, 2]}
    assert json_object("{not json") is None


def test_code_block_prefers_the_requested_language() -> None:
    text = "```python\nx = 1\n```\n```text\nnope\n```"
    assert code_block(text, ("python",)) == ("x = 1\n", "fence_python")
    assert code_block("print(1)", ("python",)) == ("print(1)", "raw")
