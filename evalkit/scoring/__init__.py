"""Task-aware scorers behind one router keyed by the sample's task type.

``score(sample, prediction)`` routes by ``sample.task_type`` (canonical names and aliases,
see ``canonical_task_type``); ``ascore`` is the same from async code (LLM-judged samples
await the judge directly). ``score_all``/``ascore_all`` score a sample under its headline
rule and every other extraction rule of its task type (``Verdicts``). Heavy libraries
(math-verify/sympy, rouge-score, rapidfuzz, cairosvg) are imported only when their scorer
first runs.
"""

import asyncio
from typing import Any

from evalkit.sample import Sample

# Built-in scorer modules register themselves on import; the order does not matter.
from evalkit.scoring import choice, code, grounding, judge, mathverify, numeric, text  # noqa: F401
from evalkit.scoring.judge import LLMJudge, configure_judge, current_judge
from evalkit.scoring.reward import format_score, reward
from evalkit.scoring.router import (
    SCORERS,
    ScorerFn,
    canonical_task_type,
    score,
    score_rules,
    scorer,
    task_types,
)
from evalkit.scoring.rules import EVALKIT
from evalkit.scoring.types import Score
from evalkit.scoring.verdicts import JUDGED, Verdicts, score_all


async def ascore(
    sample: Sample, prediction: Any, scorer_name: str | None = None, rule: str | None = None
) -> Score:
    """``score`` for async callers: awaits the configured judge instead of blocking.

    ``rule`` picks the extraction rule (None = evalkit's); a judged task type always goes
    to its judge.
    """
    current = current_judge()
    kind = canonical_task_type(scorer_name or sample.task_type)
    judged = kind in JUDGED
    if sample.fields.get("extra_metrics"):
        # extra metrics (VCR-Bench's CoT judge) are sync; from a thread they submit to the
        # judge's loop and wait, where on the loop itself they would be refused
        return await asyncio.to_thread(
            score, sample, prediction, scorer_name, None if judged else rule
        )
    if current is not None and judged:
        text = prediction if isinstance(prediction, str) else getattr(prediction, "text", "")
        return await current.ajudge(sample, str(text))
    return score(sample, prediction, scorer_name, None if judged else rule)


async def ascore_all(
    sample: Sample, prediction: Any, rule: str | None = None, scorer_name: str | None = None
) -> Verdicts:
    """``score_all`` for async callers: the headline through ``ascore``, then other rules."""
    kind = canonical_task_type(scorer_name or sample.task_type)
    if kind in JUDGED:
        return Verdicts(await ascore(sample, prediction, scorer_name), EVALKIT)
    headline = rule or EVALKIT
    main = await ascore(sample, prediction, scorer_name, headline)
    return Verdicts(main, headline, score_rules(sample, prediction, scorer_name, skip=headline))


__all__ = [
    "SCORERS",
    "LLMJudge",
    "Score",
    "ScorerFn",
    "Verdicts",
    "ascore",
    "ascore_all",
    "canonical_task_type",
    "configure_judge",
    "current_judge",
    "format_score",
    "reward",
    "score",
    "score_all",
    "scorer",
    "task_types",
]
