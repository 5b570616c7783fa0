"""ODV-Bench's official rule (StreamForest mcq_acc), its answered-only accuracy and its
pinned prompt; verdicts traced by hand through lmms_eval/tasks/odvbench/utils.py."""

from __future__ import annotations

import pytest

from evalkit.bench.aggregations import Scored, aggregate
from evalkit.bench.registry import get_benchmark
from evalkit.scoring.rules.odvbench import process
from tests._official_prompts import render_official
from tests._rule_cases import sample, verdict

CASES = [
    ("B", 1.0),  # process: "b" -> stand-alone letter B
    ("B. The car", 1.0),  # "X. text" gives X directly
    ("(B)", 1.0),  # brackets spaced out / stripped
    ("The answer is B.", 1.0),  # the first stand-alone letter a-e is "b"
    ("Based on a clip, C", 0.0),  # ", " removed; the article "a" is the first letter: A
    ("", 0.0),  # empty: scored 0, left out of the accuracy (see below)
    ("b", 1.0),
    ("C", 0.0),
    ("E. none of them", 0.0),
    ("I think it's B", 1.0),  # "i", "s" are no option letters
    ("Option B", 1.0),
    ("B\nC", 1.0),  # newline -> space: "b c", the first is b
    ("F", 0.0),  # no letter: compared as text "f"
    ("bc", 0.0),  # no stand-alone letter
]


@pytest.mark.parametrize(("reply", "expected"), CASES)
def test_mcq_acc_verdicts(reply: str, expected: float) -> None:
    assert verdict("odvbench", sample(target="B"), reply).value == expected


def test_process_normalises_as_mcq_acc() -> None:
    assert process("A") == "A"
    assert process("c. red car") == "C"
    assert process("I don't know!") == "i don't know"  # "!" spaced out, then stripped
    assert process("3.5, 4") == "3.5 4"  # ", " occurs: "," removed; a dot before a digit stays
    assert process("1,000 cars") == "1000 cars"  # digit,digit: every mark removed


def test_empty_reply_is_marked_unanswered() -> None:
    assert verdict("odvbench", sample(target="B"), "").metadata["answered"] is False
    assert verdict("odvbench", sample(target="B"), "C").metadata["answered"] is True


def test_answer_text_that_is_no_candidate_scores_zero() -> None:
    assert verdict("odvbench", sample(target="zebra"), "A").value == 0.0


def test_headline_rule_is_the_official_one() -> None:
    assert get_benchmark("ODV-Bench").headline_rule("multiple_choice") == "odvbench"


def test_aggregate_leaves_empty_replies_out_of_the_denominator() -> None:
    spec = get_benchmark("ODV-Bench")
    s = sample(target="B", family="static object", task="t1", subtask="st1")
    rows = [
        Scored(s, verdict("odvbench", s, reply).value, verdict("odvbench", s, reply).metadata)
        for reply in ("B", "C", "")
    ]
    res = aggregate(spec, rows)
    assert res.overall == pytest.approx(50.0)  # 1 right of 2 answered
    assert res.metrics["unanswered"] == 1.0
    assert res.metrics["all_questions"] == pytest.approx(100 / 3)
    assert res.breakdowns["task"] == {"t1": 50.0}
    assert res.n == 3


def test_official_prompt_renders_doc_to_text() -> None:
    s = sample(target="B", options=["a truck", "a bus"], question="What is ahead?")
    assert render_official(get_benchmark("ODV-Bench"), "multiple_choice", s) == (
        "What is ahead?\nA. a truck\nB. a bus\n"
        "Answer with the option's letter from the given choices directly."
    )
