"""Video-Holmes' official answer extraction (TencentARC/Video-Holmes, evaluate.py).

``evaluate()`` takes the last ``<answer>...</answer>`` span of the reply (the whole reply
when there is none) and looks for the letters A-F in it in two passes, in letter order:
first a letter followed by a space or a colon or preceded by "[", then any occurrence of
the bare capital letter. The first letter found is the answer, compared with ``Answer``.
Quirks kept: "Answer: C" outside any tag reads as A (the capital "A" of "Answer"), and
"B: ... A " reads as A (letter order beats position).
"""

from __future__ import annotations

from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.rules import rule
from evalkit.scoring.rules._options import lenient_gold_letter
from evalkit.scoring.rules._reasoning import last_tagged, letter_verdict
from evalkit.scoring.types import Score

_LETTERS = "ABCDEF"  # evaluate.py's chain stops at F (six options per question)


def holmes_letter(reply: str) -> tuple[str | None, str]:
    """(letter, how) as evaluate.py's if/elif chain picks it; (None, ...) = its 'WRONG'."""
    tagged = last_tagged(reply, "answer")
    span = reply if tagged is None else tagged
    where = "answer tag" if tagged is not None else "whole reply"
    for letter in _LETTERS:
        if f"{letter} " in span or f"{letter}:" in span or f"[{letter}" in span:
            return letter, f"{where}/marked letter"
    for letter in _LETTERS:
        if letter in span:
            return letter, f"{where}/bare letter"
    return None, where


@rule(
    "videoholmes",
    "multiple_choice",
    source="TencentARC/Video-Holmes evaluate.py evaluate",
)
def videoholmes(prediction: str, target: Any, sample: Sample) -> Score:
    """Video-Holmes: first of A-F marked ("X ", "X:", "[X") else bare, in the last <answer>."""
    got, how = holmes_letter(prediction)
    return letter_verdict(got, lenient_gold_letter(target, sample), how)
