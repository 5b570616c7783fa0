"""Official aggregations: per-sample score values -> the number a benchmark reports.

``base`` holds the types, the ``AGGREGATIONS`` registry and the helpers the families
share; each family module registers its aggregations on import, so importing this package
registers them all: ``means`` (pooled and per-group accuracy), ``question_groups``
(questions scored together), ``grounding`` (IoU figures), ``judged`` (judged figures beside
the accuracy) and ``variants`` (one headline over a spec's variants).
"""

from evalkit.bench.aggregations import grounding, judged, means, question_groups, variants
from evalkit.bench.aggregations.base import (
    AGGREGATIONS,
    AggregateResult,
    Aggregation,
    Scored,
    aggregate,
    breakdown,
)

__all__ = [
    "AGGREGATIONS",
    "AggregateResult",
    "Aggregation",
    "Scored",
    "aggregate",
    "breakdown",
    "grounding",
    "judged",
    "means",
    "question_groups",
    "variants",
]
