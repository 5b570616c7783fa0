"""LVBench's official answer reading (THUDM/LVBench, also published as zai-org/LVBench).

lvbench/utils/answer_util.py ``polish_answer`` turns a reply into an answer and
lvbench/metrics/compute_accuracy.py compares it with the answer letter by ``==``.
MotionBench ships the same function (its rule module registers this one).
"""

from __future__ import annotations

from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.rules import rule
from evalkit.scoring.rules._options import verdict
from evalkit.scoring.types import Score


def polish_answer(reply: str) -> str:
    """The first character of the reply's first word, looking inside a leading "(X)".

    Text after the first ")" is dropped, then anything up to a "(" before it; of what is
    left, the first space-separated word gives its first character ("" if none).
    """
    text = reply.strip().split(")")[0].strip()
    if "(" in text:
        text = text.split("(")[1].strip()
    word = text.split(" ")[0]
    return word[:1]


@rule(
    "lvbench",
    "multiple_choice",
    source="THUDM/LVBench lvbench/utils/answer_util.py polish_answer; "
    "lvbench/metrics/compute_accuracy.py compute_accuracy",
)
def lvbench(prediction: str, target: Any, sample: Sample) -> Score:
    """First character of the first word (inside "(X)" if present), case-sensitive ==."""
    return verdict(polish_answer(prediction), target, sample, "polish_answer")
