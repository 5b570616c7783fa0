"""What every official aggregation shares: the types, the registry and the helpers.

An aggregation is a function ``(scored, breakdowns, **params) -> AggregateResult``
registered by name; a benchmark spec picks one and its parameters. Values are per-sample
scores in [0, 1] (None = not scored, e.g. no judge configured: counted in ``n_unscored``,
never as 0). Reported numbers are percentages, the unit papers publish. The families of
aggregations live beside this module (one per kind of number) and register on
``AGGREGATIONS`` when the package is imported.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from evalkit.registry import Registry
from evalkit.sample import Sample

if TYPE_CHECKING:
    from evalkit.bench.spec import BenchmarkSpec


@dataclass(frozen=True)
class Scored:
    """One sample with its score value (None when it could not be scored)."""

    sample: Sample
    value: float | None
    metadata: dict[str, Any] = field(default_factory=dict)
    """The scorer's metadata (e.g. a grounding IoU), for aggregations that need more
    than the value (recall at IoU thresholds)."""


@dataclass
class AggregateResult:
    """The official number, per-group breakdowns and counts."""

    overall: float | None
    breakdowns: dict[str, dict[str, float]] = field(default_factory=dict)
    n: int = 0
    n_scored: int = 0
    n_unscored: int = 0
    metrics: dict[str, float] = field(default_factory=dict)
    """Other official numbers reported next to ``overall`` (e.g. plain accuracy)."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form."""
        return {
            "overall": self.overall,
            "breakdowns": self.breakdowns,
            "n": self.n,
            "n_scored": self.n_scored,
            "n_unscored": self.n_unscored,
            "metrics": self.metrics,
        }


class Aggregation(Protocol):
    """Signature of a registered aggregation."""

    def __call__(
        self, scored: Sequence[Scored], breakdowns: Sequence[str] = (), **params: Any
    ) -> AggregateResult: ...


AGGREGATIONS: Registry[Callable[..., AggregateResult]] = Registry(
    "aggregation",
    group="evalkit.aggregations",
    modules=lambda: ["evalkit.bench.aggregations"],  # its families, each registering on import
)


def percent(values: Iterable[float]) -> float | None:
    """100 x the mean of ``values`` (None when there are none)."""
    vals = list(values)
    return 100.0 * sum(vals) / len(vals) if vals else None


def groups_of(sample: Sample, name: str) -> list[str]:
    """Groups a sample belongs to for field ``name`` (a list value = several groups)."""
    v = sample.fields.get(name)
    if v is None:
        return []
    return [str(x) for x in v] if isinstance(v, list | tuple) else [str(v)]


def breakdown(units: Sequence[tuple[Sample, float]], name: str) -> dict[str, float]:
    """Pooled percentage per group of ``name`` over (sample, value) units."""
    by: dict[str, list[float]] = defaultdict(list)
    for sample, value in units:
        for g in groups_of(sample, name):
            by[g].append(value)
    return {g: v for g, vals in sorted(by.items()) if (v := percent(vals)) is not None}


def mean_of(values: Sequence[float]) -> float | None:
    """Plain mean of ``values`` (None when there are none)."""
    return sum(values) / len(values) if values else None


def result_from(
    scored: Sequence[Scored],
    units: Sequence[tuple[Sample, float]],
    overall: float | None,
    breakdowns: Sequence[str],
) -> AggregateResult:
    """The result of ``overall`` over ``units``, with the counts taken from ``scored``."""
    n_scored = sum(s.value is not None for s in scored)
    return AggregateResult(
        overall=overall,
        breakdowns={b: breakdown(units, b) for b in breakdowns},
        n=len(scored),
        n_scored=n_scored,
        n_unscored=len(scored) - n_scored,
    )


def scored_units(scored: Sequence[Scored]) -> list[tuple[Sample, float]]:
    """(sample, value) of every scored sample (unscored ones left out)."""
    return [(s.sample, s.value) for s in scored if s.value is not None]


def aggregate(spec: BenchmarkSpec, scored: Sequence[Scored]) -> AggregateResult:
    """Apply ``spec.aggregation`` (a registered name, or an adapter ``"module:function"``)."""
    agg = spec.aggregation
    if ":" in agg.name and agg.name not in AGGREGATIONS:
        from evalkit.bench.loader import load_hook

        fn = load_hook(spec, agg.name)
    else:
        fn = AGGREGATIONS.get(agg.name)
    return fn(scored, agg.breakdowns, **agg.params)
