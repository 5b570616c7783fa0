"""Task-aware scorers behind one router keyed by the sample's task type.

``score(sample, prediction)`` routes by ``sample.task_type`` (canonical names and aliases,
see ``canonical_task_type``); ``ascore`` is the same from async code (LLM-judged samples
await the judge directly). ``score_all``/``ascore_all`` score a sample under its headline
rule and every other extraction rule of its task type (``Verdicts``). Heavy libraries
(math-verify/sympy, rouge-score, rapidfuzz, cairosvg) are imported only when their scorer
first runs; each task type names its scorer in :mod:`evalkit.tasks`.
"""

from typing import Any

from evalkit import tasks
from evalkit.sample import Sample
from evalkit.scoring.judge import JUDGED_EXTRAS, LLMJudge, configure_judge, current_judge
from evalkit.scoring.reward import format_score, reward
from evalkit.scoring.router import (
    SCORERS,
    ScorerFn,
    _text,
    canonical_task_type,
    score,
    score_rules,
    scorer,
    task_types,
)
from evalkit.scoring.rules import EVALKIT
from evalkit.scoring.types import Score, ScorerFailure
from evalkit.scoring.verdicts import Verdicts, score_all


def needs_judge(sample: Sample, scorer_name: str | None = None) -> bool:
    """Whether scoring ``sample`` asks an LLM judge (a judged task type or a judged extra)."""
    if tasks.get(scorer_name or sample.task_type).judged:
        return True
    return any(str(n) in JUDGED_EXTRAS for n in sample.fields.get("extra_metrics") or ())


async def ascore(
    sample: Sample,
    prediction: Any,
    scorer_name: str | None = None,
    rule: str | None = None,
    judge: LLMJudge | None = None,
) -> Score:
    """``score`` for async callers: awaits the judge (``judge``, else the configured one).

    ``rule`` picks the extraction rule (None = evalkit's); a judged task type always goes
    to its judge. Judge requests run on the caller's loop under the judge's guard (bounded,
    timed, breaker), so many samples can await one judge at once.
    """
    judge = judge or current_judge()
    judged = tasks.get(scorer_name or sample.task_type).judged
    if judge is None or not needs_judge(sample, scorer_name):
        return score(sample, prediction, scorer_name, None if judged else rule)
    reply = _text(prediction)
    if judged:
        primary = await judge.ascore(sample, reply)
    else:  # an extraction rule, then the judged extras (VCR-Bench's CoT figures)
        primary = score(sample, prediction, scorer_name, rule, extras=False)
    return await judge.aextras(sample, reply, primary)


async def ascore_all(
    sample: Sample,
    prediction: Any,
    rule: str | None = None,
    scorer_name: str | None = None,
    judge: LLMJudge | None = None,
) -> Verdicts:
    """``score_all`` for async callers: the headline through ``ascore``, then other rules."""
    kind = canonical_task_type(scorer_name or sample.task_type)
    if tasks.get(kind).judged:
        return Verdicts(await ascore(sample, prediction, scorer_name, judge=judge), EVALKIT)
    headline = rule or EVALKIT
    main = await ascore(sample, prediction, scorer_name, headline, judge)
    return Verdicts(main, headline, score_rules(sample, prediction, scorer_name, skip=headline))


__all__ = [
    "SCORERS",
    "LLMJudge",
    "Score",
    "ScorerFailure",
    "ScorerFn",
    "Verdicts",
    "ascore",
    "ascore_all",
    "canonical_task_type",
    "configure_judge",
    "current_judge",
    "format_score",
    "needs_judge",
    "reward",
    "score",
    "score_all",
    "scorer",
    "task_types",
]
