"""LongVideo-Reason's official check (NVlabs/Long-RL eval/eval.py accuracy_reward),
verdicts traced by hand; its official prompt."""

from __future__ import annotations

import pytest

from evalkit.bench.registry import get_benchmark
from evalkit.sample import Sample
from evalkit.scoring import score
from tests._official_prompts import render_official

_PROBLEM = "What happens first?\nD. four\nA. one\nB. two\nC. three"


def _sample(target: str = "B") -> Sample:
    return Sample(
        id="0",
        task_type="multiple_choice",
        question="What happens first?",
        options=["one", "two", "three", "four"],
        target=target,
        fields={"problem": _PROBLEM, "category": "temporal"},
    )


CASES = [
    ("<think>t</think><answer>B</answer>", 1.0),
    ("<think>t</think> <answer> B </answer>", 1.0),  # span stripped
    ("B", 1.0),  # no tag: the whole reply, stripped, is compared
    ("  B\n", 1.0),
    ("<answer>B. two</answer>", 0.0),  # byte-exact comparison
    ("<answer>(B)</answer>", 0.0),
    ("<answer>b</answer>", 0.0),  # case-sensitive
    ("<answer>\nB\n</answer>", 0.0),  # no DOTALL: a tag across lines is not found
    ("<answer>A</answer> on reflection <answer>B</answer>", 0.0),  # the FIRST tag
    ("<answer>Therefore the final answer is: B</answer>", 1.0),
    ("Therefore the final answer is: <answer>B</answer>", 0.0),  # phrase outside: whole reply
    ("<answer></answer>", 0.0),
    ("The answer is B", 0.0),
]


@pytest.mark.parametrize(("reply", "value"), CASES)
def test_longvideoreason_matches_accuracy_reward(reply: str, value: float) -> None:
    assert score(_sample(), reply, rule="longvideoreason").value == value


def test_format_is_upstreams_format_reward() -> None:
    good = score(_sample(), "<think>t</think>\n<answer>B</answer>", rule="longvideoreason")
    late = score(_sample(), "x <think>t</think><answer>B</answer>", rule="longvideoreason")
    assert (good.metadata["format"], late.metadata["format"]) == (1.0, 0.0)


def test_math_verify_step_never_passes_for_a_tagged_letter_solution() -> None:
    # accuracy_reward's first step: parse("<answer>B</answer>") gives nothing to verify.
    math_verify = pytest.importorskip("math_verify")
    assert math_verify.parse("<answer>B</answer>") == []


def test_longvideoreason_is_the_headline_rule() -> None:
    assert get_benchmark("LongVideo-Reason").headline_rule("multiple_choice") == "longvideoreason"


def test_official_prompt_is_question_template_video() -> None:
    expected = (
        "You are a helpful assistant. The user asks a question, and then you solves it.\n\n"
        "Please first think deeply about the question based on the given video, and then "
        "provide the final answer. The reasoning process and answer are enclosed within "
        "<think> </think> and <answer> </answer> tags, respectively, i.e., <think> reasoning "
        "process here </think> <answer> answer here </answer>.\n\n Question: " + _PROBLEM
    )
    assert render_official("LongVideo-Reason", "multiple_choice", _sample()) == expected
