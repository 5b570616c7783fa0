"""Video-MME-v2's official extraction (test_video_mme_v2.py extract_characters_regex_v2),
traced by hand: phrases deleted, first A-H capital; no letter = 0, marked -1."""

from __future__ import annotations

import pytest

from evalkit.bench.registry import get_benchmark
from evalkit.scoring import score
from evalkit.scoring.rules import get_rule
from tests._scoring_helpers import sample

OPTIONS = [f"option {i}" for i in range(8)]


def _score(reply: str, target: str = "F"):
    return score(sample("multiple_choice", target, OPTIONS), reply, rule="videommev2")


@pytest.mark.parametrize(
    ("reply", "target", "value", "answer"),
    [
        ("F", "F", 1.0, "F"),
        ("(F)", "F", 1.0, "F"),
        ("Final Answer: F", "F", 1.0, "F"),
        # unlike Video-MME's list, "Best option:" is deleted here
        ("Best option: F", "F", 1.0, "F"),
        ("Option: E", "E", 1.0, "E"),
        ("The answer is H", "H", 1.0, "H"),
        ("A and F", "F", 0.0, "A"),
        ("G", "F", 0.0, "G"),
        ("Based on the frames, F", "F", 0.0, "B"),
        # "The answer is" goes, "Correct:" stays, and its C is the first A-H capital.
        ("Correct: The answer is F", "F", 0.0, "C"),
    ],
)
def test_letter_read_as_the_official_script_reads_it(
    reply: str, target: str, value: float, answer: str
) -> None:
    got = _score(reply, target)
    assert (got.value, got.answer) == (value, answer)
    assert "official_mark" not in got.metadata


@pytest.mark.parametrize(
    "reply", ["", "f", "I", "the man opens the door and walks out of the room then sits down"]
)
def test_reply_without_a_letter_is_wrong_and_marked_minus_one(reply: str) -> None:
    got = _score(reply)
    assert (got.value, got.answer) == (0.0, None)
    assert got.metadata["official_mark"] == -1


def test_rule_is_marked_gameable() -> None:
    assert get_rule("videommev2", "multiple_choice").gameable


def test_spec_headline_is_the_official_rule() -> None:
    assert get_benchmark("Video-MME-v2").headline_rule("multiple_choice") == "videommev2"
