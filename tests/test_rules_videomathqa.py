"""VideoMathQA's official rule (lmms-eval tasks/videomathqa/utils.py, the authors' official
toolkit), verdicts traced by hand; its official prompts and the MBin aggregate."""

from __future__ import annotations

import pytest

from evalkit.bench.aggregations import Scored, aggregate
from evalkit.bench.registry import get_benchmark
from evalkit.sample import Sample
from evalkit.scoring import score
from tests._official_prompts import render_official


def _sample(target: str = "C", n: int = 5, qid: str = "q1", **fields: object) -> Sample:
    return Sample(
        id=f"{qid}-{target}",
        task_type="multiple_choice",
        question="What is x?",
        options=["1", "2", "3", "4", "5"][:n],
        target=target,
        fields={"question_id": qid, "category": "Arithmetic", "length": "short", **fields},
    )


CASES = [
    ("C", "C", 5, 1.0, "C"),
    ("The best answer is C", "C", 5, 1.0, "C"),  # phrase deleted
    ("Answer: C", "C", 5, 0.0, "A"),  # capital A of "Answer" comes first
    ("Based on the video, C", "C", 5, 0.0, "B"),  # capital B of "Based"
    ("I think D", "D", 5, 1.0, "D"),  # "I" is no option letter
    ("(C) 3", "C", 5, 1.0, "C"),
    ("c", "C", 5, 0.0, None),  # lower case never counts
    ("", "C", 5, 0.0, None),
    ("The answer: E", "E", 5, 1.0, "E"),  # "The answer" deleted, ": E" left
    ("Best answer: C", "C", 5, 0.0, "B"),  # not deleted: the official list fused two phrases
    ("The correct answer is (B).", "B", 5, 1.0, "B"),
    ("The answer is E. Because A is wrong", "E", 5, 1.0, "E"),  # first letter wins
    ("F", "C", 5, 0.0, None),  # F is outside [ABCDE]
    ("B", "B", 2, 1.0, "B"),  # multi-binary row
    ("Both are wrong, A", "A", 2, 0.0, "B"),  # capital B of "Both"
]


@pytest.mark.parametrize(("reply", "target", "n", "value", "answer"), CASES)
def test_videomathqa_rule_matches_extract_characters_regex(
    reply: str, target: str, n: int, value: float, answer: str | None
) -> None:
    got = score(_sample(target, n), reply, rule="videomathqa")
    assert (got.value, got.answer) == (value, answer)


@pytest.mark.parametrize("variant", [None, "mbin", "with_subtitles", "mbin_with_subtitles"])
def test_videomathqa_is_the_headline_rule_in_every_variant(variant: str | None) -> None:
    spec = get_benchmark("VideoMathQA").with_variant(variant)
    assert spec.headline_rule("multiple_choice") == "videomathqa"


def test_mbin_counts_a_question_only_when_all_its_pairs_are_right() -> None:
    spec = get_benchmark("VideoMathQA").with_variant("mbin")
    rows = [
        Scored(_sample("A", 2, "q1"), 1.0),
        Scored(_sample("B", 2, "q1"), 1.0),
        Scored(_sample("A", 2, "q2", category="Puzzle"), 1.0),
        Scored(_sample("B", 2, "q2", category="Puzzle"), 0.0),
    ]
    got = aggregate(spec, rows)
    assert got.overall == 50.0
    assert got.breakdowns["category"] == {"Arithmetic": 100.0, "Puzzle": 0.0}
    assert got.metrics["pair_accuracy"] == 75.0


_OPTION_PROMPT = (
    "Select the best answer to the following multiple-choice question based on the video"
)


def test_official_prompt_mcq() -> None:
    expected = (
        f"{_OPTION_PROMPT}. Respond with the letter (A, B, C, D or E) of the correct option.\n"
        "What is x?\nA. 1\nB. 2\nC. 3\nD. 4\nE. 5\n\n"
        "Answer with the option's letter (A, B, C, D or E) from the given choices directly."
    )
    assert render_official("VideoMathQA", "multiple_choice", _sample()) == expected


def test_official_prompt_mbin_pair() -> None:
    expected = (
        f"{_OPTION_PROMPT}. Respond with the letter (A or B) of the correct option.\n"
        "What is x?\nA. 1\nB. 2\n\n"
        "Answer with the option's letter (A or B) from the given choices directly."
    )
    got = render_official("VideoMathQA", "multiple_choice", _sample("A", 2), variant="mbin")
    assert got == expected


def test_official_prompt_with_subtitles() -> None:
    s = _sample(subtitle_path="v.srt", subtitles=[{"text": "hello"}, {"text": "x is 3"}])
    expected = (
        "This video's subtitles are listed below: \nhello\nx is 3\n"
        f"{_OPTION_PROMPT} and the subtitles. Respond with the letter (A, B, C, D or E) of "
        "the correct option.\nWhat is x?\nA. 1\nB. 2\nC. 3\nD. 4\nE. 5\n\n"
        "Answer with the option's letter (A, B, C, D or E) from the given choices directly."
    )
    got = render_official("VideoMathQA", "multiple_choice", s, variant="with_subtitles")
    assert got == expected


def test_official_prompt_without_a_subtitle_file() -> None:
    got = render_official("VideoMathQA", "multiple_choice", _sample(), variant="with_subtitles")
    assert got.startswith("This video's subtitles are listed below: \nNo subtitles available\n")
