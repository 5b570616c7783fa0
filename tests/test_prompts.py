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


def test_an_unknown_variant_is_refused() -> None:
    with pytest.raises(ConfigError, match="variant"):
        render(_sample("boolean"), "chatty")
