"""LongVideoBench's official extraction (lmms-eval tasks/longvideobench/utils.py
parse_multi_choice_response), traced by hand: phrases deleted, first A-E capital; none =
the official random guess, scored by its odds."""

from __future__ import annotations

import pytest

from evalkit.bench.registry import get_benchmark
from evalkit.sample import Sample
from evalkit.scoring import score
from evalkit.scoring.rules import get_rule
from tests._official_prompts import render_official
from tests._scoring_helpers import sample

FIVE = ["a book", "a pen", "a cup", "a lamp", "a phone"]


def _score(reply: str, target: str = "D", options: list[str] = FIVE):
    return score(sample("multiple_choice", target, options), reply, rule="longvideobench")


@pytest.mark.parametrize(
    ("reply", "value", "answer"),
    [
        ("D", 1.0, "D"),
        ("(D)", 1.0, "D"),
        ("D. A book", 1.0, "D"),  # the case the 2024-11 rewrite fixed
        ("The answer is D", 1.0, "D"),
        ("Best option: D", 1.0, "D"),
        ("A and D", 0.0, "A"),
        ("E", 0.0, "E"),
        ("Based on the video D", 0.0, "B"),
        # "Answer:" is not in this list: the A of "Answer" is read
        ("Answer: D", 0.0, "A"),
    ],
)
def test_letter_read_as_the_official_code_reads_it(reply: str, value: float, answer: str) -> None:
    got = _score(reply)
    assert (got.value, got.answer) == (value, answer)


@pytest.mark.parametrize(
    "reply", ["", "d", "the person puts the object on the table and leaves the room quickly"]
)
def test_no_letter_scores_the_random_guess_odds(reply: str) -> None:
    got = _score(reply)
    assert got.value == pytest.approx(1 / 5) and got.answer is None
    assert got.metadata["random_guess"] is True


def test_random_guess_odds_follow_the_option_count() -> None:
    assert _score("", options=FIVE[:4]).value == pytest.approx(1 / 4)


def test_letter_class_is_a_to_e_even_with_four_options() -> None:
    got = _score("E", target="D", options=FIVE[:4])
    assert (got.value, got.answer) == (0.0, "E")


def test_rule_is_marked_gameable() -> None:
    assert get_rule("longvideobench", "multiple_choice").gameable


def test_spec_headline_is_the_official_rule() -> None:
    assert get_benchmark("LongVideoBench").headline_rule("multiple_choice") == "longvideobench"


def test_pinned_prompt_is_the_lmms_eval_val_v_prompt() -> None:
    s = Sample(
        id="x",
        task_type="multiple_choice",
        question="What is on the table when the man says hello?",
        options=FIVE,
        target="A",
    )
    # f"{''}{question}\n{post_prompt}", question = q + "\n" + "A. a book\n...", by hand
    expected = (
        "What is on the table when the man says hello?\n"
        "A. a book\nB. a pen\nC. a cup\nD. a lamp\nE. a phone\n"
        "Answer with the option's letter from the given choices directly.\n"
    )
    assert get_benchmark("LongVideoBench").prompt.variant == "official"
    assert render_official("LongVideoBench", "*", s) == expected


def test_interleaved_variant_keeps_the_subtitle_prompt() -> None:
    spec = get_benchmark("LongVideoBench").with_variant("interleaved_subtitles")
    assert spec.prompt.variant == "plain"
    assert spec.prompt.template == "multiple_choice_interleaved_subtitles"
