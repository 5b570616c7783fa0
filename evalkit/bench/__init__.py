"""Benchmarks: the pinned spec model, its registry, loaders and official aggregations.

``get_benchmark("Video-MME")`` returns the spec of ``benchmarks/videomme.yaml``;
``load(spec, root)`` reads a local copy of the official release into Samples (DataError
at the first problem), ``validate(spec, root)`` lists every problem; ``load_unified``
reads EasyVideoR1-style unified files; ``aggregate(spec, scored)`` computes the
benchmark's official number with its breakdowns.
"""

from evalkit.bench import aggregate_ext, aggregate_official  # noqa: F401  (register aggregations)
from evalkit.bench.aggregate import (
    AggregateResult,
    Scored,
    aggregate,
    aggregations,
)
from evalkit.bench.loader import ValidationReport, load, validate
from evalkit.bench.registry import get_benchmark, registry
from evalkit.bench.rows import Problem
from evalkit.bench.spec import BenchmarkSpec
from evalkit.bench.unified import load_unified, unified_spec

__all__ = [
    "AggregateResult",
    "BenchmarkSpec",
    "Problem",
    "Scored",
    "ValidationReport",
    "aggregate",
    "aggregations",
    "get_benchmark",
    "load",
    "load_unified",
    "registry",
    "unified_spec",
    "validate",
]
