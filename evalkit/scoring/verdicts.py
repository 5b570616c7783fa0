"""A sample scored under its headline rule and every other rule of its task type.

The headline verdict is the one a run reports; the others are kept, compactly, beside it
in the record so a report can show how much the number depends on answer extraction
(``reports.sensitivity``). LLM-judged task types keep their judge and get no other rules:
a judge is not an extraction rule, and asking it again per rule would cost judge calls.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from evalkit import tasks
from evalkit.sample import Sample
from evalkit.scoring.context import NO_CONTEXT, ScoringContext
from evalkit.scoring.router import Prediction, score, score_rules
from evalkit.scoring.rules import EVALKIT
from evalkit.scoring.types import Score

_ANSWER_CHARS = 120  # an extracted answer longer than this is cut (free-text rules)


@dataclass(frozen=True)
class Verdicts:
    """The headline score, the rule that gave it, and the score under each other rule."""

    score: Score
    rule: str = EVALKIT
    others: dict[str, Score] = field(default_factory=dict)

    def compact_others(self) -> dict[str, dict[str, Any]]:
        """The other rules' verdicts as they go into a record (``compact_verdict``)."""
        return {name: compact_verdict(s) for name, s in self.others.items()}


def score_all(
    sample: Sample,
    prediction: Prediction,
    ctx: ScoringContext = NO_CONTEXT,
    *,
    rule: str | None = None,
    scorer_name: str | None = None,
    headline: Score | None = None,
) -> Verdicts:
    """``prediction`` under the headline ``rule`` (None = evalkit) and every other rule.

    ``headline``: the headline verdict when the caller scored it already (under
    :func:`headline_rule`); ``evalkit.scoring.ascore_all`` awaits it from the judge and
    hands it here, so the verdicts are put together in this one place.
    """
    under = headline_rule(sample, rule, scorer_name)
    if headline is None:
        headline = score(sample, prediction, ctx, scorer_name=scorer_name, rule=under)
    if under is None:  # a judged task type: its judge is the verdict, no other rules
        return Verdicts(headline, EVALKIT)
    return Verdicts(headline, under, score_rules(sample, prediction, scorer_name, skip=under))


def headline_rule(sample: Sample, rule: str | None, scorer_name: str | None = None) -> str | None:
    """The rule the headline verdict is scored under: ``rule`` or evalkit's; None for an
    LLM-judged task type, whose judge gives it."""
    if tasks.get(scorer_name or sample.task_type).judged:
        return None
    return rule or EVALKIT


def compact_verdict(s: Score) -> dict[str, Any]:
    """``{"value", "answer"}`` (+ numeric metadata such as an IoU, + ``error`` when the rule
    raised: value None then): small.

    Numeric metadata is kept because some official aggregations read it (a tube's vIoU);
    the rest (explanations, echoed targets) is left out to keep records small.
    """
    out: dict[str, Any] = {"value": s.value, "answer": _compact_answer(s.answer)}
    numbers = {
        k: round(float(v), 4)
        for k, v in s.metadata.items()
        if k != "format" and isinstance(v, int | float) and not isinstance(v, bool)
    }
    if numbers:
        out["metadata"] = numbers
    if s.failed is not None:  # the rule raised: shown as an error, not taken for a 0
        out["error"] = s.explanation
    return out


def _compact_answer(answer: Any) -> Any:
    if isinstance(answer, str):
        return answer if len(answer) <= _ANSWER_CHARS else answer[:_ANSWER_CHARS] + "…"
    if answer is None or isinstance(answer, int | float | bool):
        return answer
    text = json.dumps(answer, default=str)
    return answer if len(text) <= _ANSWER_CHARS else text[:_ANSWER_CHARS] + "…"
