"""Video-MME's official extraction (thanku-all/parse_answer eval_your_results.py), traced
by hand: phrases deleted case-sensitively, then the first A-D capital anywhere; no
letter = left out of the accuracy (None)."""

from __future__ import annotations

import pytest

from evalkit.bench.aggregations import Scored
from evalkit.bench.aggregations.means import mean
from evalkit.bench.registry import get_benchmark
from evalkit.sample import Sample
from evalkit.scoring import score
from evalkit.scoring.rules import get_rule
from tests._official_prompts import render_official
from tests._scoring_helpers import sample

OPTIONS = ["Black.", "Gray.", "Green.", "Brown."]


def _score(reply: str, target: str = "B"):
    return score(sample("multiple_choice", target, OPTIONS), reply, rule="videomme")


@pytest.mark.parametrize(
    ("reply", "target", "value", "answer"),
    [
        ("B", "B", 1.0, "B"),
        ("(B)", "B", 1.0, "B"),
        ("B. Gray.", "B", 1.0, "B"),
        ("A and B", "B", 0.0, "A"),
        ("The answer is B", "B", 1.0, "B"),
        ("The best answer is: C", "C", 1.0, "C"),
        ("Answer: C", "C", 1.0, "C"),
        ("The answer C", "C", 1.0, "C"),
        # "The correct option is" is fused with the previous entry in the official list;
        # "The correct option" (a later entry) removes all but " is D".
        ("The correct option is D", "D", 1.0, "D"),
        # "Best option:" is fused too, so it stays and "Best" gives B.
        ("Best option: C", "C", 0.0, "B"),
        # The first capital wins even inside a word.
        ("Based on the video, the person wears black, so the answer is A.", "A", 0.0, "B"),
        ("I think it is option A.", "A", 1.0, "A"),
        ("Detailed look: the clothing is gray.", "B", 0.0, "D"),
    ],
)
def test_letter_read_as_the_official_script_reads_it(
    reply: str, target: str, value: float, answer: str
) -> None:
    got = _score(reply, target)
    assert (got.value, got.answer) == (value, answer)


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "b",  # lower case is no letter to the official regex
        "E",  # beyond A-D
        "the person in the video is wearing gray clothes and a small hat",
    ],
)
def test_reply_without_a_letter_is_left_out_not_wrong(reply: str) -> None:
    got = _score(reply)
    assert got.value is None and got.answer is None
    assert got.metadata["extracted"] == ""


def test_unanswered_replies_leave_the_official_denominator() -> None:
    s = sample("multiple_choice", "B", OPTIONS)
    values = [_score(r).value for r in ("B", "B", "C", "none")]
    result = mean([Scored(s, v) for v in values])
    assert result.overall == pytest.approx(100 * 2 / 3)  # 2 right of 3 answered
    assert result.n_unscored == 1


def test_rule_is_marked_gameable_and_names_its_source() -> None:
    r = get_rule("videomme", "multiple_choice")
    assert r.gameable
    assert "eval_your_results.py" in r.source


def test_spec_headline_is_the_official_rule() -> None:
    assert get_benchmark("Video-MME").headline_rule("multiple_choice") == "videomme"


def _example(**fields: object) -> Sample:
    return Sample(
        id="001-1",
        task_type="multiple_choice",
        question="What is the color of the clothing worn by the persons in the video?",
        options=OPTIONS,
        target="B",
        fields=dict(fields),
    )


# The README's examples ("Prompt" > "Click to expand the prompt examples"), written out.
README_WITHOUT_SUBTITLES = (
    "Select the best answer to the following multiple-choice question based on the video. "
    "Respond with only the letter (A, B, C, or D) of the correct option.\n"
    "What is the color of the clothing worn by the persons in the video?\n"
    "A. Black.\nB. Gray.\nC. Green.\nD. Brown.\n"
    "The best answer is:"
)


def test_pinned_prompt_is_the_readme_prompt() -> None:
    spec = get_benchmark("Video-MME")
    assert spec.prompt.variant == "official"
    got = render_official("Video-MME", "*", _example())
    assert got == README_WITHOUT_SUBTITLES


def test_pinned_subtitle_prompt_puts_the_lines_first() -> None:
    sample = _example(
        subtitle_path="x.srt",
        subtitles=[{"start": 0.0, "end": 1.0, "text": "Hi guys, I'm going to show you how"}],
    )
    got = render_official("Video-MME", "*", sample, "with_subtitles")
    expected = (
        "This video's subtitles are listed below:\nHi guys, I'm going to show you how\n"
        + README_WITHOUT_SUBTITLES
    )
    assert got == expected


def test_pinned_subtitle_prompt_without_subtitles_is_the_plain_one() -> None:
    got = render_official("Video-MME", "*", _example(), "with_subtitles")
    assert got == README_WITHOUT_SUBTITLES
