"""Video-MME-v2's official extraction (test_video_mme_v2.py extract_characters_regex_v2),
traced by hand: phrases deleted, first A-H capital; no letter = 0, marked -1."""

from __future__ import annotations

import pytest

from evalkit.bench.aggregations import Scored, aggregate
from evalkit.bench.registry import get_benchmark
from evalkit.sample import Sample
from evalkit.scoring import score
from evalkit.scoring.rules import get_rule
from tests._official_prompts import render_official
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


def _example(**fields: object) -> Sample:
    return Sample(
        id="001",
        task_type="multiple_choice",
        question="What does the man do first?",
        options=[f"step {i}" for i in range(1, 9)],
        target="A",
        fields=dict(fields),
    )


OPTION_LINES = "\n".join(f"{letter}. step {i}" for i, letter in enumerate("ABCDEFGH", 1))
INSTRUCT = (
    "Select the best answer to the following multiple-choice question based on the video. "
    "Respond with only the letter (A, B, C, D, E, F, G, or H) of the correct option."
)


def test_pinned_prompt_is_the_official_text_items_joined() -> None:
    # WO_SUB_PROMPT + f"Question: {question}\n{options}\n{INSTRUCT_PROMPT}", by hand
    expected = (
        "These are the frames of a video."
        f"Question: What does the man do first?\n{OPTION_LINES}\n{INSTRUCT}"
    )
    assert get_benchmark("Video-MME-v2").prompt.variant == "official"
    assert render_official("Video-MME-v2", "*", _example()) == expected


def test_pinned_subtitle_prompt_joins_the_words() -> None:
    sample = _example(
        subtitle_path="001.jsonl",
        subtitles=[{"start": 0.0, "end": 2.0, "text": "hello there friends"}],
    )
    expected = (
        "These are the frames of a video. This video's subtitles are listed below:\n"
        "hello there friends\n"
        f"Question: What does the man do first?\n{OPTION_LINES}\n{INSTRUCT}"
    )
    got = render_official("Video-MME-v2", "*", sample, "with_subtitles")
    assert got == expected


def test_pinned_subtitle_prompt_without_a_file_leaves_the_line_empty() -> None:
    got = render_official("Video-MME-v2", "*", _example(), "with_subtitles")
    assert "listed below:\n\nQuestion: What" in got


def _grouped(group: str, kind: str, position: int) -> Sample:
    return Sample(
        id=f"{group}-{position}",
        task_type="multiple_choice",
        question=f"Q{position}",
        options=OPTIONS,
        target="F",
        fields={
            "group": group,
            "position": position,
            "group_type": kind,
            "group_structure": "[1, 2, 3, 4]",
            "level": 1,
        },
    )


def test_group_score_uses_the_official_minus_one_mark() -> None:
    # get_final_rating by hand: relevance marks [1, 1, 1, -1] sum to 2 -> 4/16 (linear
    # 2 * 25); logic marks [-1, 1, 1, 1] are all truthy -> prefix 4 -> 1; "valid only"
    # accuracy leaves the two -1 out.
    replies = {"rel": ["F", "F", "F", ""], "log": ["", "F", "F", "F"]}
    scored = []
    for group, kind in (("rel", "relevance"), ("log", "logic")):
        for i, reply in enumerate(replies[group], 1):
            s = _grouped(group, kind, i)
            got = score(s, reply, rule="videommev2")
            scored.append(Scored(s, got.value, got.metadata))
    res = aggregate(get_benchmark("Video-MME-v2"), scored)
    assert res.overall == pytest.approx((25.0 + 100.0) / 2)
    assert res.metrics["relevance_linear"] == pytest.approx(50.0)
    assert res.metrics["avg_acc"] == pytest.approx(100.0)


def test_without_the_mark_an_empty_reply_is_just_wrong() -> None:
    # evalkit's rule has no mark: relevance 3 right -> 9/16, logic first wrong -> 0
    replies = {"rel": ["F", "F", "F", ""], "log": ["", "F", "F", "F"]}
    scored = []
    for group, kind in (("rel", "relevance"), ("log", "logic")):
        for i, reply in enumerate(replies[group], 1):
            s = _grouped(group, kind, i)
            got = score(s, reply, rule="evalkit")
            scored.append(Scored(s, got.value, got.metadata))
    res = aggregate(get_benchmark("Video-MME-v2"), scored)
    assert res.overall == pytest.approx((100 * 9 / 16 + 0.0) / 2)
    assert res.metrics["avg_acc"] == pytest.approx(100 * 6 / 8)
