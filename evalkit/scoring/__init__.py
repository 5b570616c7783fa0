"""Task-aware scorers behind one router keyed by the sample's task type.

``score(sample, prediction, ctx)`` routes by ``sample.task_type`` (canonical names and
aliases, see ``evalkit.tasks``); ``ctx`` (a ``ScoringContext``) carries the judge, if any:
there is no process-wide judge. ``ascore`` is the same from async code (LLM-judged
samples await the judge directly, on the caller's loop). ``score_all``/``ascore_all``
score a sample under its headline rule and every other extraction rule of its task type
(``Verdicts``). Heavy libraries (math-verify/sympy, rouge-score, rapidfuzz, cairosvg) are
imported only when their scorer first runs; each task type names its scorer in
:mod:`evalkit.tasks`.
"""

from evalkit import tasks
from evalkit.sample import Sample
from evalkit.scoring.context import NO_CONTEXT, ScoringContext
from evalkit.scoring.judge import JUDGED_EXTRAS, LLMJudge
from evalkit.scoring.judge_fallback import ascore_with_judge, fallback_of
from evalkit.scoring.reward import format_score, reward
from evalkit.scoring.router import (
    SCORERS,
    Prediction,
    ScorerFn,
    _text,
    canonical_task_type,
    score,
    scorer,
    task_types,
)
from evalkit.scoring.types import Score, ScorerFailure
from evalkit.scoring.verdicts import Verdicts, headline_rule, score_all


def needs_judge(sample: Sample, scorer_name: str | None = None) -> bool:
    """Whether scoring ``sample`` asks an LLM judge (a judged task type or a judged extra)."""
    if tasks.get(scorer_name or sample.task_type).judged:
        return True
    return any(str(n) in JUDGED_EXTRAS for n in sample.fields.get("extra_metrics") or ())


async def ascore(
    sample: Sample,
    prediction: Prediction,
    ctx: ScoringContext = NO_CONTEXT,
    *,
    scorer_name: str | None = None,
    rule: str | None = None,
) -> Score:
    """``score`` for async callers: awaits the context's judge (none: not scored).

    ``rule`` picks the extraction rule (None = evalkit's); a judged task type always goes
    to its judge; a ``<name>+judge`` rule sends the replies its base rule cannot decide to
    the judge (``evalkit.scoring.judge_fallback``). Judge requests run on the caller's loop
    under the judge's guard (bounded, timed, breaker), so many samples can await one judge
    at once.
    """
    judge = ctx.judge
    judged = tasks.get(scorer_name or sample.task_type).judged
    fallback = None if judged else fallback_of(rule, scorer_name or sample.task_type)
    if judge is not None and fallback is not None:  # the rule, then the authors' judge
        primary = await ascore_with_judge(fallback, sample, _text(prediction), judge)
        return await judge.aextras(sample, _text(prediction), primary)
    if judge is None or not needs_judge(sample, scorer_name):
        headline = None if judged else rule
        return score(sample, prediction, ctx, scorer_name=scorer_name, rule=headline)
    reply = _text(prediction)
    if judged:
        primary = await judge.ascore(sample, reply)
    else:  # an extraction rule, then the judged extras (VCR-Bench's CoT figures)
        primary = score(sample, prediction, ctx, scorer_name=scorer_name, rule=rule, extras=False)
    return await judge.aextras(sample, reply, primary)


async def ascore_all(
    sample: Sample,
    prediction: Prediction,
    ctx: ScoringContext = NO_CONTEXT,
    *,
    rule: str | None = None,
    scorer_name: str | None = None,
) -> Verdicts:
    """``score_all`` for async callers: only the headline verdict (the part that may ask the
    judge) is awaited, through ``ascore``; ``score_all`` adds the other rules."""
    under = headline_rule(sample, rule, scorer_name)
    main = await ascore(sample, prediction, ctx, scorer_name=scorer_name, rule=under)
    return score_all(sample, prediction, ctx, rule=rule, scorer_name=scorer_name, headline=main)


__all__ = [
    "SCORERS",
    "LLMJudge",
    "Score",
    "ScorerFailure",
    "ScorerFn",
    "ScoringContext",
    "Verdicts",
    "ascore",
    "ascore_all",
    "canonical_task_type",
    "format_score",
    "needs_judge",
    "reward",
    "score",
    "score_all",
    "scorer",
    "task_types",
]
