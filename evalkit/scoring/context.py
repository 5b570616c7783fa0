"""What scoring a sample needs beyond the sample and the reply, passed explicitly.

There is no process-wide judge: a run builds one :class:`ScoringContext` per benchmark
(its judge carries that benchmark's judge prompt) and hands it to the scorer, so two
benchmarks, two runs or two tests never see each other's judge.
"""

from __future__ import annotations

from dataclasses import dataclass

from evalkit.scoring.judge import LLMJudge


@dataclass(frozen=True)
class ScoringContext:
    """The judge for LLM-judged samples and judged extra metrics (None: not scored)."""

    judge: LLMJudge | None = None


NO_CONTEXT = ScoringContext()
"""No judge: judged samples are recorded as not scored, never 0."""

__all__ = ["NO_CONTEXT", "ScoringContext"]
