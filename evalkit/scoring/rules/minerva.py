"""lmms-eval's MINERVA answer extraction (EvolvingLMMs-Lab/lmms-eval,
lmms_eval/tasks/minerva/utils.py ``_extract_choice_letter`` + ``minerva_process_results``),
registered as ``lmms_eval_minerva``. MINERVA's authors publish no evaluation code (the
google-deepmind/neptune repository holds only the README and the json), so there is no
official rule and the headline stays evalkit's letter rule.

The rule: the LAST "answer|option" + "is"/":" + letter (case-insensitive, the letter
upper-cased) wins; otherwise five answer phrases are deleted and the LAST capital A-E
left is the answer. With no letter lmms-eval draws one at random; here that draw is
scored by its expectation, 1/5 (so an empty reply earns 0.2: gameable).
"""

from __future__ import annotations

import re
from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.rules import rule
from evalkit.scoring.rules._options import lenient_gold_letter
from evalkit.scoring.rules._reasoning import letter_verdict
from evalkit.scoring.types import Score

_EXPLICIT = re.compile(r"(?:answer|option)\s*(?:is|:)\s*([ABCDE])", re.IGNORECASE)
_PHRASES = (
    "The best answer is",
    "The correct answer is",
    "The answer is",
    "Answer:",
    "Option:",
    "Therefore, the final answer is:",
)
_LETTER = re.compile(r"[ABCDE]")
_N_OPTIONS = 5  # lmms-eval draws from A-E


def minerva_letter(reply: str) -> tuple[str | None, str]:
    """(letter, how) as ``_extract_choice_letter`` finds it; None = its empty string."""
    text = reply.strip()
    explicit = _EXPLICIT.findall(text)
    if explicit:
        return explicit[-1].upper(), "last 'answer is X'"
    for phrase in _PHRASES:
        text = text.replace(phrase, "")
    letters = _LETTER.findall(text)
    return (letters[-1], "last capital A-E") if letters else (None, "none")


@rule(
    "lmms_eval_minerva",
    "multiple_choice",
    source="EvolvingLMMs-Lab/lmms-eval lmms_eval/tasks/minerva/utils.py _extract_choice_letter",
    gameable=True,
)
def lmms_eval_minerva(prediction: str, target: Any, sample: Sample) -> Score:
    """lmms-eval MINERVA: last explicit 'answer is X', else last capital A-E; none = 1/5."""
    got, how = minerva_letter(prediction)
    gold = lenient_gold_letter(target, sample)
    if got is None:
        meta = {"format": 0.0, "extraction": "random guess (expected value)", "target": gold}
        return Score(1 / _N_OPTIONS, None, "no letter: lmms-eval guesses at random", meta)
    return letter_verdict(got, gold, how)
