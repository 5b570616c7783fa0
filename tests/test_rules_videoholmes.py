"""Video-Holmes' official extraction rule, verdicts traced by hand through evaluate.py."""

from __future__ import annotations

import pytest

from evalkit.bench.registry import get_benchmark
from evalkit.sample import Sample
from evalkit.scoring import score
from evalkit.scoring.rules import get_rule
from tests._official_prompts import render_official


def _sample(target: str = "C") -> Sample:
    return Sample(
        id="h1",
        task_type="multiple_choice",
        question="Who is the killer?",
        options=["the maid", "the cook", "the butler", "the twin", "the dog", "nobody"],
        target=target,
    )


# (reply, target, expected value, expected answer): each traced through evaluate.py's
# <answer> regex and its two letter passes (A..F marked, then A..F bare).
CASES = [
    ("<think>clues</think><answer>C</answer>", "C", 1.0, "C"),
    ("<think>x</think><answer> C </answer>", "C", 1.0, "C"),
    ("<answer>B</answer> then <answer>C</answer>", "C", 1.0, "C"),  # last tag wins
    ("<answer>C: the butler</answer>", "C", 1.0, "C"),
    ("<answer>[C] the butler</answer>", "C", 1.0, "C"),
    # Letter order beats position: "B: ..." is found before "...C" only because B < C.
    ("<answer>C. or B: hmm</answer>", "C", 0.0, "B"),
    # Outside a tag the capital A of "Answer" is found in the bare pass.
    ("Answer: C", "C", 0.0, "A"),
    ("The answer is C", "C", 1.0, "C"),  # no marked letter; the bare pass finds C
    ("C", "C", 1.0, "C"),
    ("c", "C", 0.0, None),  # lower case is never read
    ("", "C", 0.0, None),
    ("<answer></answer> C", "C", 0.0, None),  # an empty last tag is the span
    ("<answer>The butler (C)</answer>", "C", 1.0, "C"),  # bare pass: no A/B in it
    ("<answer>I think it is D </answer>", "D", 1.0, "D"),  # tag content is stripped: "D"
    ("<answer>Definitely E</answer>", "E", 0.0, "D"),  # bare "D" of "Definitely"
    ("<answer>E F</answer>", "F", 0.0, "E"),
    ("<answer>\nF\n</answer>", "F", 1.0, "F"),
    ("G", "C", 0.0, None),  # G is beyond evaluate.py's A-F chain
]


@pytest.mark.parametrize(("reply", "target", "value", "answer"), CASES)
def test_videoholmes_rule_matches_evaluate_py(
    reply: str, target: str, value: float, answer: str | None
) -> None:
    got = score(_sample(target), reply, rule="videoholmes")
    assert (got.value, got.answer) == (value, answer)


def test_videoholmes_is_the_spec_headline_rule() -> None:
    assert get_benchmark("Video-Holmes").headline_rule("multiple_choice") == "videoholmes"


def test_videoholmes_rule_names_its_source() -> None:
    assert "evaluate.py" in get_rule("videoholmes", "multiple_choice").source


def test_official_prompt_is_evaluate_py_question_prompt() -> None:
    s = _sample()
    # Written out by hand from evaluate.py: options joined as "A: text" with ", ".
    expected = (
        "Based on the given video, reason and answer the single-choice question. Provide your "
        "reasoning between the <think> and </think> tags, and then give your final answer "
        "between the <answer> and </answer> tags. The question is: Who is the killer?. The "
        "options are: A: the maid, B: the cook, C: the butler, D: the twin, E: the dog, "
        "F: nobody. Your answer:"
    )
    assert render_official("Video-Holmes", "multiple_choice", s) == expected
    assert get_benchmark("Video-Holmes").prompt.official["multiple_choice"].thinking
