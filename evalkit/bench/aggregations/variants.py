"""One headline over several variants of a spec, each run on its own.

:func:`across_variants` combines the variants' results (TempCompass's four question
formats -> its "Avg. All"), declared in the spec by ``aggregation.across_variants``;
:func:`combined_headlines` computes it for every spec of a run whose variants' results
are all present.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from evalkit.bench.aggregations.base import (
    AggregateResult,
    Scored,
    aggregate,
    percent,
    scored_units,
)

if TYPE_CHECKING:
    from evalkit.bench.spec import BenchmarkSpec

BASE = "base"
"""The name :func:`across_variants` and the spec use for the spec without a variant."""


def across_variants(
    spec: BenchmarkSpec, by_variant: Mapping[str, Sequence[Scored]]
) -> AggregateResult:
    """The spec's cross-variant headline from each variant's scored samples.

    ``by_variant`` maps a variant name (``"base"`` for the spec itself) to its samples.
    ``how: pooled`` is the accuracy over every scored question of all the variants;
    ``how: mean`` the unweighted mean of the variants' official numbers. The variants'
    own numbers are the ``variant`` breakdown; a variant with no scored sample (e.g.
    captioning without a judge) makes the headline None, listed in ``metrics``.
    """
    cross = spec.aggregation.across_variants
    if cross is None:
        raise ValueError(f"{spec.name} declares no aggregation.across_variants")
    missing = [v for v in cross.variants if v not in by_variant]
    if missing:
        raise KeyError(f"{spec.name} {cross.name}: no results for variant(s) {', '.join(missing)}")
    if spec.variant is not None:  # a variant's own spec: start again from the base
        from evalkit.bench.registry import get_benchmark

        spec = get_benchmark(spec.name)
    per: dict[str, float] = {}
    pooled: list[float] = []
    n = n_scored = 0
    for name in cross.variants:
        variant_spec = spec.with_variant(None if name == BASE else name)
        result = aggregate(variant_spec, by_variant[name])
        if result.overall is not None:
            per[name] = result.overall
        pooled += [v for _, v in scored_units(by_variant[name])]
        n, n_scored = n + result.n, n_scored + result.n_scored
    empty = [v for v in cross.variants if v not in per]
    if empty:
        overall = None
    elif cross.how == "pooled":
        overall = percent(pooled)
    else:
        overall = sum(per.values()) / len(per)
    out = AggregateResult(overall, {"variant": per}, n, n_scored, n - n_scored)
    out.metrics["mean_of_variants"] = sum(per.values()) / len(per) if per else 0.0
    out.metrics["pooled"] = percent(pooled) or 0.0
    out.metrics["variants_without_score"] = float(len(empty))
    return out


def combined_headlines(benchmarks: Iterable[Any]) -> dict[str, AggregateResult]:
    """Cross-variant headlines: ``{"<spec name>:<headline name>": result}``.

    ``benchmarks`` are per-benchmark reports of ONE model (``reports.load.BenchmarkReport``:
    ``spec``, ``variant``, ``scored``), from one run or several (a run stores one variant
    per spec). A spec is combined only when every variant its ``across_variants`` names
    is present exactly once; a variant seen twice (two runs compared) is ambiguous.
    """
    groups: dict[str, tuple[Any, dict[str, list[Sequence[Scored]]]]] = {}
    for bench in benchmarks:
        spec = getattr(bench, "spec", None)
        if spec is None or spec.aggregation.across_variants is None:
            continue
        _, seen = groups.setdefault(spec.key, (spec, {}))
        seen.setdefault(bench.variant or BASE, []).append(bench.scored)
    out: dict[str, AggregateResult] = {}
    for spec, seen in groups.values():
        cross = spec.aggregation.across_variants
        if all(len(seen.get(v, ())) == 1 for v in cross.variants):
            out[f"{spec.name}:{cross.name}"] = across_variants(
                spec, {v: seen[v][0] for v in cross.variants}
            )
    return out
