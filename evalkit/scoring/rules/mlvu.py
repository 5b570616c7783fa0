"""MLVU's official answer check (JUNJIE99/MLVU
evaluation/multiple_choice_evaluation/choice_bench.py ``check_ans``)."""

from __future__ import annotations

from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.rules import rule
from evalkit.scoring.rules._mc_a import verdict
from evalkit.scoring.types import Score


def before_paren(reply: str) -> str:
    """The character just before the first ")", else the whole reply unchanged.

    The official prompt ends the assistant turn with "Best Option: (", so a reply reads
    "B) ..."; nothing is stripped, so without a ")" only a reply that IS the letter
    matches, and a ")" at the very start leaves "" (Python's ``s[-1:0]``).
    """
    if ")" in reply:
        i = reply.index(")")
        return reply[i - 1 : i] if i > 0 else ""
    return reply


@rule(
    "mlvu",
    "multiple_choice",
    source="JUNJIE99/MLVU evaluation/multiple_choice_evaluation/choice_bench.py check_ans",
)
def mlvu(prediction: str, target: Any, sample: Sample) -> Score:
    """Character before the first ")" (or the whole reply), compared with == to the letter."""
    return verdict(before_paren(prediction), target, sample, 'char before first ")"')
