"""Answer extraction: where the final answer is, and which letter/number/object it names."""

from __future__ import annotations

import pytest

from evalkit.scoring.extract import boxed, code_block, final_span, json_object, letter

from ._scoring_helpers import sample

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


# --- the robust rule on verbose replies (each case once misread) ------------------------

CARS = ["red car", "blue car", "green car", "white van"]
SPEEDS = ["normal speed", "time-lapse", "slow motion"]


def _mc(prediction: str, options: list[str], target: str = "A") -> str | None:
    from evalkit.scoring import score

    return score(sample("multiple_choice", target, options), prediction).answer


@pytest.mark.parametrize(
    ("prediction", "options", "expected"),
    [
        # A and I are letters when they stand as the answer, like any other letter
        ("The best option is A.", CARS, "A"),
        ("The best option is B.", CARS, "B"),
        ("Caption A", ["a man runs", "a man walks"], "A"),
        ("Caption B", ["a man runs", "a man walks"], "B"),
        ("The correct option is I.", [f"scene {i}" for i in range(10)], "I"),
        # ... and not when they are English words
        ("A dog runs across the yard.", CARS, None),
        ("I think so.", CARS, None),
        # the last explicit answer marker wins
        ("At first glance the answer is B. But on reflection, the final answer is C.", CARS, "C"),
        # an option named and then ruled out is not the answer
        ("The video is a time-lapse. This would not be possible at normal speed.", SPEEDS, "B"),
        # markdown around a letter
        (
            "**A. red car**\n\nThe red car enters first, and the blue car only appears last.",
            CARS,
            "A",
        ),
        # the concluding "option X" wins over the ones argued away
        (
            "Caption B: the car turns left. This rules out option A, where it turns right. "
            "Therefore, option B is the most accurate.",
            ["the car turns right", "the car turns left"],
            "B",
        ),
        # a leading letter followed by its explanation
        ("B\n\nExplanation: A is wrong since the car is blue.", CARS, "B"),
        # the options echoed back are not an answer
        ("A. red car\nB. blue car", CARS, None),
        # labels of caption-matching formats
        ("Sentence A", ["a man runs", "a man walks"], "A"),
        ("Option 2", ["a man runs", "a man walks"], "B"),
        ("Caption A: a man runs", ["a man runs", "a man walks"], "A"),
    ],
)
def test_multiple_choice_reads_verbose_replies(
    prediction: str, options: list[str], expected: str | None
) -> None:
    assert _mc(prediction, options) == expected


def test_letters_beyond_j_are_read_when_the_sample_has_them() -> None:
    letters = [chr(ord("A") + i) for i in range(14)]
    options = [f"scene {i}" for i in range(14)]
    assert letter("The answer is (M).", options, letters)[0] == "M"
    assert letter("Option K", options, letters)[0] == "K"
    assert letter("N", options, letters)[0] == "N"
    assert letter("K", options, letters[:4])[0] is None


@pytest.mark.parametrize(
    ("prediction", "expected"),
    [
        ("Nope", "no"),
        ("Nope, the man never opens the door.", "no"),
        ("Not at all.", "no"),
        ("Nah", "no"),
        ("Absolutely not.", "no"),
        ("Definitely yes.", "yes"),
        ("Yep", "yes"),
        ("Certainly.", "yes"),
        ("No.\nQuestion: Is the door open at the end?\nAnswer: Yes", "no"),
        ("Yes. Question: Is the cup red? Answer: No", "yes"),
        ("0000", None),
    ],
)
def test_boolean_reads_yes_no_variants(prediction: str, expected: str | None) -> None:
    from evalkit.scoring import score

    assert score(sample("boolean", "yes"), prediction).answer == expected


def test_an_invented_continuation_cuts_the_reply() -> None:
    reply = "B\n\nHuman: What colour is the van?\nAssistant: The answer is D."
    assert _mc(reply, CARS) == "B"


@pytest.mark.parametrize(
    ("prediction", "text", "method"),
    [
        ("The answer is B. On reflection, the final answer is C.", "C", "answer_is"),
        ("The answer is C.\n\nThe question asks which answer is correct.", "C", "answer_is"),
        ("**Answer:**\n\nB", "B", "answer_is"),
        ("答案是 C。因为车是绿色的", "C", "answer_is"),
        ("Question: Is it red?\nAnswer: No", "No", "answer_is"),  # restated, not invented
        ("No.\nQuestion: Is it red?\nAnswer: Yes", "No.", "raw"),
        ("<answer>B</answer>\nHuman: and now?\n<answer>C</answer>", "B", "answer_tag"),
        ("<think>Question: what is it?</think>A<|im_end|>\n<answer>C</answer>", "A", "after_think"),
    ],
)
def test_final_span_last_marker_and_continuations(prediction: str, text: str, method: str) -> None:
    span = final_span(prediction)
    assert (span.text, span.method) == (text, method)


def test_boxed_stays_linear_on_unclosed_braces() -> None:
    assert boxed("\\boxed{" * 20_000) is None  # was quadratic: minutes, not milliseconds
    assert boxed("\\boxed{1} then \\boxed{2") == "1"


@pytest.mark.parametrize(
    ("span", "expected", "rule"),
    [
        ("A man runs across the yard", None, ""),
        ("I would say the car is parked", None, ""),
        ("A is wrong and C is incorrect; B remains", "B", "lone_letter"),
        ("Option A (a red car) is unlikely, so D", "D", "verdict"),
        ("I cannot determine which car it is", None, "refusal"),
        (
            "A. a red car - incorrect\nB. a blue bus - incorrect\nC. a dog\nD. a cat - no",
            "C",
            "elimination",
        ),
        ("It could be A or B", None, "ambiguous"),
        ("It is a blue bus, not a red car", "B", "option_text"),
        ("It is a dog or a cat; it moves like a cat, so it is a cat", "D", "option_text"),
        ("None of the options fits. If forced to choose, A", "A", "verdict"),
        ("（Ｃ）", "C", "letter"),
        ("\\text{D}", "D", "letter"),
    ],
)
def test_letter_readings(span: str, expected: str | None, rule: str) -> None:
    assert letter(span, OPTIONS, LETTERS) == (expected, rule)


def test_a_marked_span_opening_with_a_letter_names_it() -> None:
    # "The answer is B because option A shows ..." -> span "B because option A shows ..."
    span = "B because option A shows a red car"
    assert letter(span, OPTIONS, LETTERS, marked=True) == ("B", "verdict")


def test_a_count_written_out_names_a_numeric_option() -> None:
    assert letter("There are two people in the video.", ["1", "2", "3"], list("ABC")) == (
        "B",
        "option_text",
    )
