"""Prompt templates: one per task type, plain and thinking, stable (snapshots), strict."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evalkit.errors import ConfigError
from evalkit.prompts import letter_range, render, render_template
from evalkit.sample import Sample
from evalkit.scoring import task_types

SNAPSHOTS = Path(__file__).parent / "snapshots" / "prompts"
UPDATE = os.environ.get("EVALKIT_UPDATE_SNAPSHOTS") == "1"


def _sample(task_type: str) -> Sample:
    options = ["a cat", "a dog", "a bird", "a fish", "a horse", "a cow"]
    return Sample(
        id="p1",
        task_type=task_type,
        question="Which animal appears first?",
        options=options if task_type == "multiple_choice" else [],
        fields={"duration": 42.0} if task_type == "temporal_grounding" else {},
    )


@pytest.mark.parametrize("variant", ["plain", "thinking"])
@pytest.mark.parametrize("task_type", task_types())
def test_rendered_prompt_matches_its_snapshot(task_type: str, variant: str) -> None:
    text = render(_sample(task_type), variant)
    path = SNAPSHOTS / f"{task_type}.{variant}.txt"
    if UPDATE or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
        if not UPDATE:
            pytest.fail(f"snapshot {path.name} was missing and has been written; rerun")
    assert text + "\n" == path.read_text()


@pytest.mark.parametrize("task_type", task_types())
def test_thinking_variant_asks_for_think_then_answer_tags(task_type: str) -> None:
    text = render(_sample(task_type), "thinking")
    assert "<think> </think>" in text and "<answer> </answer>" in text
    assert "<answer>" not in render(_sample(task_type), "plain")


@pytest.mark.parametrize("n", [2, 4, 6, 10])
def test_options_get_exactly_as_many_letters_as_there_are_options(n: int) -> None:
    s = Sample(
        id="x", task_type="multiple choice", question="Q?", options=[f"t{i}" for i in range(n)]
    )
    text = render(s, "plain")
    letters = "ABCDEFGHIJ"[:n]
    for i, letter in enumerate(letters):
        assert f"\n{letter}. t{i}\n" in text + "\n"
    if n < 10:
        assert f"\n{'ABCDEFGHIJ'[n]}. " not in text
    assert f"({letter_range(list(letters))})" in text


def test_letter_range_wording() -> None:
    assert letter_range(list("ABCDEF")) == "A, B, C, D, E or F"
    assert letter_range(["A", "B"]) == "A or B"
    assert letter_range(["A"]) == "A"


def test_an_unknown_variable_in_a_template_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="nonexistent"):
        from jinja2 import Environment, StrictUndefined

        Environment(undefined=StrictUndefined).from_string("{{ nonexistent }}").render()
    with pytest.raises(ConfigError, match="not found"):
        render(_sample("boolean"), "plain", template="no_such_template")


def test_strict_undefined_is_on_for_shipped_templates() -> None:
    with pytest.raises(Exception, match="question"):
        render_template("boolean.jinja", thinking=False)


def _instructed() -> list[str]:
    from evalkit.bench.registry import registry

    return [s.name for s in registry().specs() if s.prompt.instruction]


@pytest.mark.parametrize("name", _instructed())
def test_a_benchmarks_plain_prompt_says_its_pinned_instruction(name: str) -> None:
    from evalkit.bench.registry import get_benchmark
    from evalkit.prompts import PromptPlan

    spec = get_benchmark(name)
    text, _ = PromptPlan.for_spec(spec, "plain").render(_sample("multiple_choice"))
    assert text.endswith("F. a cow\n" + str(spec.prompt.instruction))
    path = SNAPSHOTS / "bench" / f"{spec.key}.plain.txt"
    if UPDATE or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
        if not UPDATE:
            pytest.fail(f"snapshot {path.name} was missing and has been written; rerun")
    assert text + "\n" == path.read_text()


def test_an_unknown_variant_is_refused() -> None:
    with pytest.raises(ConfigError, match="variant"):
        render(_sample("boolean"), "chatty")


# Subtitle templates of Video-MME / VideoMathQA / Video-MME-v2 and LongVideoBench.

SUBTITLE_TEMPLATES = ["multiple_choice_subtitles", "multiple_choice_interleaved_subtitles"]


def _subtitled(**fields: object) -> Sample:
    return Sample(
        id="p1",
        task_type="multiple_choice",
        question="Which cup does she pick?",
        options=["the red cup", "the blue cup", "the green cup", "none"],
        fields=fields,
    )


SUBTITLES = [
    {"start": -1.5, "end": 2.0, "text": "Welcome back."},
    {"start": 3.0, "end": 4.25, "text": "Now I take the red cup."},
]


@pytest.mark.parametrize("variant", ["plain", "thinking"])
@pytest.mark.parametrize("template", SUBTITLE_TEMPLATES)
def test_subtitle_prompt_matches_its_snapshot(template: str, variant: str) -> None:
    sample = _subtitled(subtitle_path="v.srt", subtitles=SUBTITLES)
    text = render(sample, variant, template=template)
    path = SNAPSHOTS / f"{template}.{variant}.txt"
    if UPDATE or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
        if not UPDATE:
            pytest.fail(f"snapshot {path.name} was missing and has been written; rerun")
    assert text + "\n" == path.read_text()


@pytest.mark.parametrize("template", SUBTITLE_TEMPLATES)
def test_subtitles_come_before_the_question_in_time_order(template: str) -> None:
    text = render(_subtitled(subtitle_path="v.srt", subtitles=SUBTITLES), "plain", template)
    first, second = text.index("Welcome back."), text.index("Now I take the red cup.")
    assert first < second < text.index("Which cup does she pick?")
    # the question part is the plain multiple-choice prompt, letters and all
    assert text.endswith(render(_subtitled(), "plain"))


def test_interleaved_lines_carry_their_times() -> None:
    text = render(
        _subtitled(subtitle_path="v.json", subtitles=SUBTITLES), "plain", SUBTITLE_TEMPLATES[1]
    )
    assert "[0.0s - 2.0s] Welcome back." in text  # a line begun before the clip starts at 0
    assert "[3.0s - 4.2s] Now I take the red cup." in text


@pytest.mark.parametrize("template", SUBTITLE_TEMPLATES)
def test_no_subtitle_file_or_no_lines_gives_the_plain_prompt(template: str) -> None:
    plain = render(_subtitled(), "thinking")
    assert render(_subtitled(), "thinking", template) == plain
    assert render(_subtitled(subtitle_path="v.srt", subtitles=[]), "thinking", template) == plain


@pytest.mark.parametrize("template", SUBTITLE_TEMPLATES)
def test_a_subtitle_file_whose_lines_were_never_attached_is_an_error(template: str) -> None:
    with pytest.raises(ConfigError, match="subtitles"):
        render(_subtitled(subtitle_path="v.srt"), "plain", template)


def test_video_mme_srt_lines_at_the_sampled_frames_reach_the_prompt(tmp_path: Path) -> None:
    from evalkit.bench.subtitles import with_subtitles

    srt = tmp_path / "v.srt"
    srt.write_text(
        '1\n00:00:00,500 --> 00:00:01,500\n<font color="white" size=".72c">first</font>\n\n'
        "2\n00:00:02,000 --> 00:00:02,400\nbetween frames\n\n"
        "3\n00:00:03,000 --> 00:00:05,000\n<i>third</i>\n"
    )
    sample = with_subtitles(_subtitled(subtitle_path=str(srt)), [0.0, 1.0, 3.0, 4.0], 6.0)
    assert [x["text"] for x in sample.fields["subtitles"]] == ["first", "third"]
    text = render(sample, "plain", SUBTITLE_TEMPLATES[0])
    assert "first\nthird\n" in text and "between" not in text and "<font" not in text
    # a video without a subtitle file: nothing attached, plain prompt
    assert with_subtitles(_subtitled(), [0.0], 1.0) == _subtitled()


def test_longvideobench_lines_follow_the_authors_interleaving_rule(tmp_path: Path) -> None:
    import json

    from evalkit.bench.subtitles import with_subtitles

    path = tmp_path / "v_en.json"
    lines = [
        {"start": "0:00:10.0", "end": "0:00:12.0", "line": "kept: frame at 11 s inside"},
        {"timestamp": [13.2, 13.4], "text": "kept: widened to 12.8-13.8 s, frame at 13 s"},
        {"timestamp": [15.1, 15.9], "text": "dropped: no frame in 15-16 s"},
        {"timestamp": [16.5, None], "text": "kept: runs to the video's end"},
    ]
    path.write_text(json.dumps(lines))
    sample = _subtitled(subtitle_path=str(path), starting_timestamp_for_subtitles=10.0)
    out = with_subtitles(sample, [1.0, 3.0, 5.0, 7.0], duration=18.0)
    got = out.fields["subtitles"]
    assert [x["text"].split(":")[0] for x in got] == ["kept", "kept", "kept"]
    assert (got[0]["start"], got[0]["end"]) == (0.0, 2.0)  # on the clip's clock
    assert got[2]["end"] == 8.0  # the video's end, shifted
    text = render(out, "plain", SUBTITLE_TEMPLATES[1])
    assert "[0.0s - 2.0s] kept: frame at 11 s inside" in text


def test_video_mme_v2_words_become_one_transcript(tmp_path: Path) -> None:
    import json

    from evalkit.bench.subtitles import with_subtitles

    path = tmp_path / "001.jsonl"
    words = [("Hello", 0.1, 0.4), ("world", 0.5, 0.9), ("again", 30.0, 30.5)]
    path.write_text(
        "".join(json.dumps({"text": t, "start_time": s, "end_time": e}) + "\n" for t, s, e in words)
    )
    out = with_subtitles(_subtitled(subtitle_path=str(path)), [0.0, 10.0], 40.0)
    assert [x["text"] for x in out.fields["subtitles"]] == ["Hello world again"]
