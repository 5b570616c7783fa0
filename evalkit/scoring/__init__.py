"""Task-aware scorers behind one router keyed by the sample's task type.

``score(sample, prediction)`` routes by ``sample.task_type`` (canonical names and aliases,
see ``canonical_task_type``); ``ascore`` is the same from async code (LLM-judged samples
await the judge directly). Heavy libraries (math-verify/sympy, rouge-score, rapidfuzz,
cairosvg) are imported only when their scorer first runs.
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
    scorer,
    task_types,
)
from evalkit.scoring.types import Score


async def ascore(sample: Sample, prediction: Any, scorer_name: str | None = None) -> Score:
    """``score`` for async callers: awaits the configured judge instead of blocking."""
    current = current_judge()
    kind = canonical_task_type(scorer_name or sample.task_type)
    if sample.fields.get("extra_metrics"):
        # extra metrics (VCR-Bench's CoT judge) are sync; from a thread they submit to the
        # judge's loop and wait, where on the loop itself they would be refused
        return await asyncio.to_thread(score, sample, prediction, scorer_name)
    if current is not None and kind == "llm_judge":
        text = prediction if isinstance(prediction, str) else getattr(prediction, "text", "")
        return await current.ajudge(sample, str(text))
    return score(sample, prediction, scorer_name)


__all__ = [
    "SCORERS",
    "LLMJudge",
    "Score",
    "ScorerFn",
    "ascore",
    "canonical_task_type",
    "configure_judge",
    "current_judge",
    "format_score",
    "reward",
    "score",
    "scorer",
    "task_types",
]
