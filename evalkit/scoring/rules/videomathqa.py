"""VideoMathQA's official answer extraction (EvolvingLMMs-Lab/lmms-eval, the authors'
official toolkit: lmms_eval/tasks/videomathqa/utils.py ``extract_characters_regex``,
compared in ``videomathqa_process_results`` / the aggregates with ``==``).

The reply is stripped, six answer phrases are deleted from it, and the FIRST capital A-E
anywhere in what is left is the answer. Two of the six phrases are Python's implicit
concatenations of adjacent literals ("The best option isThe correct option is",
"Best answer:Best option:"), so "The best option is" and "Best answer:" are NOT removed.
Quirks kept: "Answer: C" reads as A, "Based on the video, C" as B, "I think D" as D.
The same rule scores the multi-binary rows (two options, letters A/B, same regex).
"""

from __future__ import annotations

from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.rules import rule
from evalkit.scoring.rules._options import first_match, lenient_gold_letter
from evalkit.scoring.rules._reasoning import letter_verdict
from evalkit.scoring.types import Score

_PHRASES = (
    "The best answer is",
    "The correct answer is",
    "The answer is",
    "The answer",
    "The best option isThe correct option is",  # the official list's missing commas, kept
    "Best answer:Best option:",
)


def first_capital_letter(reply: str) -> str | None:
    """The letter ``extract_characters_regex`` returns (None for its empty string)."""
    return first_match(reply, _PHRASES, "ABCDE") or None


@rule(
    "videomathqa",
    "multiple_choice",
    source="EvolvingLMMs-Lab/lmms-eval lmms_eval/tasks/videomathqa/utils.py "
    "extract_characters_regex",
)
def videomathqa(prediction: str, target: Any, sample: Sample) -> Score:
    """VideoMathQA: first capital A-E after deleting answer phrases, exact match."""
    got = first_capital_letter(prediction)
    return letter_verdict(got, lenient_gold_letter(target, sample), "first capital A-E")
