"""LongVideo-Reason's official check (NVlabs/Long-RL eval/eval.py ``accuracy_reward``).

Upstream first tries math-verify on the whole reply against the whole solution
("<answer>B</answer>"); math-verify parses such a solution to nothing, so that step never
passes for this benchmark's letter answers (checked with math-verify in this
environment; tests/test_rules_longvideoreason.py keeps the check). What decides is the
string step: the FIRST "<answer>...</answer>" on one line (no DOTALL) - or, when the
reply contains "Therefore the final answer is:", the first
"<answer>Therefore the final answer is: ...</answer>" - stripped, else the whole reply
stripped, compared byte for byte with the letter. So "B" alone is right, "<answer>(B)
</answer>" and a tag spanning lines are wrong. ``format`` in the metadata is upstream's
``format_reward`` (the reply starts with <think>...</think> then <answer>...</answer>).
"""

from __future__ import annotations

import re
from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.extract import search_closed
from evalkit.scoring.rules import rule
from evalkit.scoring.types import Score

_PHRASE = "Therefore the final answer is:"
_TAGGED = re.compile(r"<answer>(.*?)</answer>")
_TAGGED_PHRASE = re.compile(r"<answer>Therefore the final answer is: (.*?)</answer>")
_CLOSE = re.compile(r"</answer>")
_FORMAT = re.compile(r"<think>.*?</think>\s*<answer>.*?</answer>", re.DOTALL)


def student_answer(reply: str) -> tuple[str, str]:
    """(the string compared with the letter, how it was found), as accuracy_reward does."""
    pattern = _TAGGED_PHRASE if _PHRASE in reply else _TAGGED
    found = search_closed(pattern, reply, _CLOSE)  # = pattern.search(reply), linear
    if found:
        return found.group(1).strip(), "answer tag"
    return reply.strip(), "whole reply"


@rule(
    "longvideoreason",
    "multiple_choice",
    source="NVlabs/Long-RL eval/eval.py accuracy_reward (string step; format_reward)",
    gameable=False,
)
def longvideoreason(prediction: str, target: Any, sample: Sample) -> Score:
    """LongVideo-Reason: first single-line <answer> span (or the whole reply) == the letter."""
    got, how = student_answer(prediction)
    gold = str(target).strip()
    meta = {
        "format": 1.0 if _FORMAT.match(prediction) else 0.0,
        "extraction": how,
        "target": gold,
    }
    value = 1.0 if got == gold else 0.0
    return Score(value, got[:200] or None, f"{got[:40]!r} via {how}; target {gold}", meta)
