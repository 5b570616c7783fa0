"""lmms-eval's rule-based MMVU multiple-choice check (EvolvingLMMs-Lab/lmms-eval,
lmms_eval/tasks/mmvu/utils.py ``evaluate_with_rule_based``), registered as
``lmms_eval_mmvu`` for extraction sensitivity, NOT as MMVU's official rule: the authors'
acc_evaluation.py (yale-nlp/MMVU utils/eval_utils.py ``get_acc_async``) has GPT-4o extract
and judge every answer, multiple choice included, so MMVU has no closed-form official rule
and its multiple-choice headline stays evalkit's letter rule.

The lmms-eval check is correct when ANY of these holds (case-insensitive): the first
stand-alone letter A-E is the answer letter; the answer letter stands alone anywhere; the
answer option's text is inside the reply; or the answer letter occurs anywhere (even
inside a word) and one word of more than two characters of the answer option does too.
Listing every letter therefore always scores: gameable.
"""

from __future__ import annotations

import re
import string
from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.rules import rule
from evalkit.scoring.rules._options import lenient_gold_letter
from evalkit.scoring.types import Score

_FIRST_LETTER = re.compile(r"\b([A-E])\b", re.IGNORECASE)


def _passes(reply: str, gold: str, choice: str | None) -> str | None:
    """Which of the lmms-eval checks accepts ``reply`` (None = none: wrong)."""
    pred = reply.strip()
    first = _FIRST_LETTER.search(pred)
    if first and first.group(1).upper() == gold.upper():
        return "first stand-alone letter"
    if gold.upper() in pred.upper() and re.search(rf"\b{re.escape(gold)}\b", pred, re.IGNORECASE):
        return "stand-alone answer letter"
    if choice is None:
        return None
    text, low = choice.strip().lower(), pred.lower()
    if text in low:
        return "answer option text"
    if gold.upper() in pred.upper():
        words = [w.strip(string.punctuation) for w in text.split()]
        if any(w in low for w in words if len(w) > 2):
            return "answer letter + option word"
    return None


@rule(
    "lmms_eval_mmvu",
    "multiple_choice",
    source="EvolvingLMMs-Lab/lmms-eval lmms_eval/tasks/mmvu/utils.py evaluate_with_rule_based",
    gameable=True,
)
def lmms_eval_mmvu(prediction: str, target: Any, sample: Sample) -> Score:
    """lmms-eval MMVU: right if the answer letter stands alone or its option text/words appear."""
    gold = lenient_gold_letter(target, sample)
    choices = dict(zip(sample.letters, sample.options, strict=False))
    how = _passes(prediction, gold, choices.get(gold))
    shown = re.search(r"\b([A-E])\b", prediction)  # what lmms-eval logs as the answer
    meta = {"format": 1.0 if shown else 0.0, "target": gold, "extraction": how or "none"}
    answer = shown.group(1) if shown else None
    return Score(1.0 if how else 0.0, answer, f"{how or 'no check passed'}; target {gold}", meta)
