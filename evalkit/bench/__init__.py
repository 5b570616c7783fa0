"""Benchmarks: the pinned spec model, its registry, loaders and official aggregations.

``get_benchmark("Video-MME")`` returns the spec of ``benchmarks/videomme.yaml``;
``load(spec, root)`` reads a local copy of the official release into Samples (a
``Loaded`` list: bad rows are left out and listed in ``.problems``), ``validate(spec,
root)`` also checks the videos; ``load_unified`` reads EasyVideoR1-style unified files
and ``load_data`` maps their rows onto the benchmarks they name; ``aggregate(spec,
scored)`` computes the benchmark's official number with its breakdowns.
"""

from evalkit.bench.aggregations import (
    AGGREGATIONS,
    AggregateResult,
    Scored,
    aggregate,
)
from evalkit.bench.files import Loaded
from evalkit.bench.loader import ValidationReport, load, validate
from evalkit.bench.registry import get_benchmark, registry
from evalkit.bench.spec import BenchmarkSpec
from evalkit.bench.unified import load_unified, unified_spec
from evalkit.bench.unified_known import load_data
from evalkit.errors import Problem

__all__ = [
    "AGGREGATIONS",
    "AggregateResult",
    "BenchmarkSpec",
    "Loaded",
    "Problem",
    "Scored",
    "ValidationReport",
    "aggregate",
    "get_benchmark",
    "load",
    "load_data",
    "load_unified",
    "registry",
    "unified_spec",
    "validate",
]
