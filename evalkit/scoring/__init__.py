"""Task-aware scorers behind one router keyed by the sample's task type."""

from evalkit.scoring.types import Score

__all__ = ["Score"]
