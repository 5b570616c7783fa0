"""The result of scoring one prediction."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any

_FRAMES = 10  # the innermost frames of a scorer's traceback: where the bug is


@dataclass(frozen=True)
class ScorerFailure:
    """A scorer (or extraction rule) raised: a bug on evalkit's side, not the model's.

    Kept apart from the model's own failures (code that does not run in the sandbox is a
    0 with ``metadata["program_error"]``): a run records the sample as failed at stage
    ``score`` with this traceback, and reports count it as "scorer failed", never as a 0.
    """

    error: str
    """``ExceptionType: message``."""
    traceback: str
    """The formatted traceback, for whoever fixes the scorer."""

    @classmethod
    def of(cls, exc: BaseException) -> ScorerFailure:
        """The failure of ``exc``, with the innermost frames of its traceback."""
        frames = "".join(traceback.format_exception(exc, limit=-_FRAMES))
        return cls(f"{type(exc).__name__}: {exc}", frames)


@dataclass(frozen=True)
class Score:
    """A value in [0, 1], the answer extracted from the prediction, and why.

    ``value`` is None for a sample that could not be scored: it needs an LLM judge and none
    is configured (reported as "not scored"), or the scorer itself raised (``failed`` set;
    reported as "scorer failed"). Neither is ever taken for a 0.
    """

    value: float | None
    answer: Any = None
    explanation: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    failed: ScorerFailure | None = None
    """Set when the scorer raised (then ``value`` is None)."""

    def __post_init__(self) -> None:
        if self.value is not None and not 0.0 <= self.value <= 1.0:
            raise ValueError(f"Score value must be in [0, 1], got {self.value}")
        if self.failed is not None and self.value is not None:
            raise ValueError("a failed Score has no value (a scorer bug is not a 0)")

    @classmethod
    def scorer_failed(cls, exc: BaseException) -> Score:
        """The Score of a scorer that raised ``exc``."""
        failure = ScorerFailure.of(exc)
        return cls(None, explanation=f"scorer failed: {failure.error}", failed=failure)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form for the results store (a failed Score is not stored as a
        score: the run records the sample as failed at stage ``score``)."""
        return {
            "value": self.value,
            "answer": self.answer,
            "explanation": self.explanation,
            "metadata": self.metadata,
        }
