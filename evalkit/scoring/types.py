"""The result of scoring one prediction."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Score:
    """A value in [0, 1], the answer extracted from the prediction, and why.

    ``value`` is None only for a sample that could not be scored at all (e.g. an LLM-judged
    sample with no judge configured); such samples are reported as "not scored", never 0.
    """

    value: float | None
    answer: Any = None
    explanation: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.value is not None and not 0.0 <= self.value <= 1.0:
            raise ValueError(f"Score value must be in [0, 1], got {self.value}")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form for the results store."""
        return {
            "value": self.value,
            "answer": self.answer,
            "explanation": self.explanation,
            "metadata": self.metadata,
        }
