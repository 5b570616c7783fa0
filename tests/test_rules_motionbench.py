"""MotionBench's official reading: the same polish_answer as LVBench
(motionbench/utils/answer_util.py), compared with == (compute_accuracy.py)."""

from __future__ import annotations

import pytest

from evalkit.bench.registry import get_benchmark
from evalkit.scoring import score
from evalkit.scoring.rules import get_rule
from tests._scoring_helpers import sample

OPTIONS = ["wave", "clap", "jump", "turn left", "turn right", "stand still"]


@pytest.mark.parametrize(
    ("reply", "value", "answer"),
    [
        ("E", 1.0, "E"),
        ("(E)", 1.0, "E"),
        ("E. turn right", 1.0, "E"),
        ("E) turn right", 1.0, "E"),
        ("The motion is (E) turn right", 1.0, "E"),
        ("e", 0.0, "e"),
        ("The answer is E", 0.0, "T"),
        ("D or E", 0.0, "D"),
        ("(D) and (E)", 0.0, "D"),
        ("G", 0.0, "G"),
        # right by accident: the first word "Explanation:" starts with E
        ("Explanation: the person turns right, so E", 1.0, "E"),
        ("Turning right means E", 0.0, "T"),
        ("", 0.0, None),
        ("()", 0.0, None),
    ],
)
def test_reply_read_by_polish_answer(reply: str, value: float, answer: str | None) -> None:
    got = score(sample("multiple_choice", "E", OPTIONS), reply, rule="motionbench")
    assert (got.value, got.answer) == (value, answer)


def test_motionbench_registers_lvbench_function() -> None:
    assert get_rule("motionbench", "mc").fn is get_rule("lvbench", "mc").fn
    assert "THUDM/MotionBench" in get_rule("motionbench", "mc").source


def test_spec_headline_is_the_official_rule() -> None:
    assert get_benchmark("MotionBench").headline_rule("multiple_choice") == "motionbench"
