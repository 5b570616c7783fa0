"""MVBench's official rule (mvbench.ipynb check_ans on "(" + the reply's first line), its
pooled aggregate and its pinned prompt; verdicts traced by hand through the notebook."""

from __future__ import annotations

import pytest

from evalkit.bench.aggregations import aggregate
from evalkit.bench.registry import get_benchmark
from evalkit.scoring import score
from evalkit.scoring.rules import get_rule
from tests._official_prompts import render_official
from tests._rule_cases import real_samples, sample, scored, verdict, wrong_reply

# (reply, verdict) with the answer B = "dog": the notebook scores "(" + first line, takes
# its first space-separated token t, lower-cased, and is right if t without dots is in
# "(b)" or "(b)" is in t.
CASES = [
    ("B", 1.0),  # "(b" in "(b)"
    ("(B) dog", 1.0),  # "((b)" contains "(b)"
    ("", 1.0),  # "(" is in "(b)": an empty reply counts as right
    ("  \n ", 1.0),  # stripped to "", same
    ("B and C", 1.0),  # only the first token "(b" is read
    ("C and B", 0.0),  # "(c"
    ("b.", 1.0),  # "(b." -> "(b"
    ("B)", 1.0),  # "(b)"
    ("The answer is B", 0.0),  # "(the"
    ("A", 0.0),  # "(a"
    ("B\nBecause the dog runs.", 1.0),  # first line only
    ("Assistant: B", 1.0),  # answer() keeps the text after the last "Assistant:"
    ("B###A", 1.0),  # cut at the stop sign "###"
    (")", 0.0),  # "()" is not in "(b)"
    ("BC", 0.0),  # "(bc"
    ("Best option:(B)", 0.0),  # "(best"
]


@pytest.mark.parametrize(("reply", "expected"), CASES)
def test_check_ans_verdicts(reply: str, expected: float) -> None:
    assert verdict("mvbench", sample(target="B"), reply).value == expected


def test_answer_given_as_option_text_is_mapped_to_its_letter() -> None:
    s = sample(target="dog")
    assert verdict("mvbench", s, "B").value == 1.0
    assert verdict("mvbench", s, "A").value == 0.0


def test_a_target_that_is_no_option_is_an_error_not_a_zero() -> None:
    with pytest.raises(ValueError, match="neither an option letter"):
        verdict("mvbench", sample(target="zebra"), "B")


def test_rule_is_registered_as_gameable_with_its_source() -> None:
    r = get_rule("mvbench", "multiple_choice")
    assert r.gameable  # the empty reply scores
    assert "mvbench.ipynb" in r.source


def test_headline_rule_is_the_official_one() -> None:
    assert get_benchmark("MVBench").headline_rule("multiple_choice") == "mvbench"


def test_aggregate_is_pooled_over_questions_not_the_mean_of_tasks() -> None:
    spec = get_benchmark("MVBench")
    rows = [scored("multiple_choice", 1.0, task="Action Count")] * 3
    rows += [scored("multiple_choice", 0.0, task="Moving Count")]
    res = aggregate(spec, rows)
    assert res.overall == pytest.approx(75.0)  # 3/4; the task mean would be 50
    assert res.breakdowns["task"] == {"Action Count": 100.0, "Moving Count": 0.0}


def test_official_prompt_renders_the_notebook_text() -> None:
    spec = get_benchmark("MVBench")
    s = sample(target="B", options=["run", "dance"], question="What does the girl do?")
    system = (
        "Carefully watch the video and pay attention to the cause and sequence of events, "
        "the detail and movement of objects, and the action and pose of persons. Based on "
        "your observations, select the best option that accurately addresses the question.\n"
    )
    expected = (
        system + "Question: What does the girl do?\nOptions:\n(A) run\n(B) dance\n"
        "Only give the best option."
    )
    assert render_official(spec, "multiple_choice", s) == expected
    assert spec.prompt.official["multiple_choice"].system == system
    assert spec.prompt.variant == "official"


@pytest.mark.realdata
def test_real_rows_score_their_own_answer_right_and_another_wrong() -> None:
    for s in real_samples("mvbench.json"):
        rule = get_benchmark("MVBench").headline_rule(s.task_type)
        assert rule == "mvbench"
        assert score(s, str(s.target), rule=rule).value == 1.0, s.id
        assert score(s, wrong_reply(s), rule=rule).value == 0.0, s.id
