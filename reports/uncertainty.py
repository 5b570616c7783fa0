"""Uncertainty: standard errors of official aggregates and paired run-vs-run deltas.

A pooled mean has a closed-form standard error. Every other official rule (macro means,
multi-binary groups, Video-MME-v2's non-linear group scores, adapters) is bootstrapped on
the official number itself: through an exact vectorised form of the rule where one is
verified (``reports.bootstrap``), else by re-running the official aggregation on each
replicate. Resampling draws whole clusters — the aggregation's ``group_field`` when it
has one, else single samples — because questions scored as a group are not independent.
Run-vs-run deltas use one paired draw for both runs. Every bootstrap is seeded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from evalkit.bench.aggregations import Scored, aggregate

from .bootstrap import bootstrap_counts, cluster_key, linear_form

if TYPE_CHECKING:
    from .model import BenchmarkReport

AggFn = Callable[[Sequence[Scored]], "float | None"]


def overall_fn(bench: BenchmarkReport) -> AggFn:
    """The benchmark's official overall number as a function of its scored samples."""
    spec = bench.spec
    if spec is None:
        return _pooled
    agg = spec.aggregation
    lite = spec.model_copy(update={"aggregation": agg.model_copy(update={"breakdowns": []})})
    return lambda scored: aggregate(lite, scored).overall


def is_pooled_mean(bench: BenchmarkReport) -> bool:
    """True when the official number is a plain mean over samples (closed-form errors)."""
    return bench.spec is None or bench.spec.aggregation.name == "mean"


def standard_error(
    bench: BenchmarkReport, *, n_boot: int = 1000, seed: int = 0
) -> tuple[float | None, str]:
    """(standard error in points or None, how it was computed) of the official number."""
    if is_pooled_mean(bench):
        vals = np.array([s.value for s in bench.scored if s.value is not None], dtype=float)
        if len(vals) < 2:
            return None, "n < 2"
        return float(100 * vals.std(ddof=1) / np.sqrt(len(vals))), "analytic (mean)"
    if n_boot <= 1:
        return None, "bootstrap off"
    gf = _group_field(bench)
    fn = overall_fn(bench)
    keys = list(dict.fromkeys(cluster_key(s, gf) for s in bench.scored))
    if len(keys) < 2:
        return None, "fewer than 2 clusters"
    unit = f"clusters by {gf}" if gf else "samples"
    rng = np.random.default_rng(seed)
    form = linear_form(bench.spec, bench.scored, gf, keys, fn)
    if form is not None:
        reps = np.concatenate([form(c) for c in bootstrap_counts(rng, n_boot, len(keys))])
        method = f"bootstrap ({n_boot}, {unit})"
    else:
        clusters = Clusters(bench.scored, gf)
        draws = (rng.integers(0, len(clusters), len(clusters)) for _ in range(n_boot))
        reps = np.array([_nan(fn(clusters.resample(d))) for d in draws], dtype=float)
        method = f"bootstrap ({n_boot}, {unit}, official aggregate per replicate)"
    vals = reps[~np.isnan(reps)]
    if len(vals) < 2:
        return None, "bootstrap: aggregate undefined"
    return float(vals.std(ddof=1)), method


def _nan(v: float | None) -> float:
    return float("nan") if v is None else v


def _group_field(bench: BenchmarkReport) -> str | None:
    if bench.spec is None:
        return None
    field = bench.spec.aggregation.params.get("group_field")
    return str(field) if field else None


class Clusters:
    """Scored samples grouped into resampling units, with relabelled copies on demand.

    A cluster drawn k times appears k times under distinct ids (and group labels), so a
    grouped aggregation sees k complete groups rather than one group of k x 4 questions.
    """

    def __init__(self, scored: Sequence[Scored], group_field: str | None) -> None:
        self.group_field = group_field
        self.unit = f"clusters by {group_field}" if group_field else "samples"
        by: dict[str, list[Scored]] = {}
        for s in scored:
            by.setdefault(cluster_key(s, group_field), []).append(s)
        self.keys = list(by)
        self.members = list(by.values())
        self._copies: dict[tuple[int, int], list[Scored]] = {}

    def __len__(self) -> int:
        return len(self.members)

    def copy(self, i: int, k: int) -> list[Scored]:
        """The k-th copy of cluster i (k = 0 is the original)."""
        if k == 0:
            return self.members[i]
        got = self._copies.get((i, k))
        if got is None:
            got = [self._relabel(s, k) for s in self.members[i]]
            self._copies[(i, k)] = got
        return got

    def _relabel(self, s: Scored, k: int) -> Scored:
        fields = dict(s.sample.fields)
        if self.group_field and self.group_field in fields:
            fields[self.group_field] = f"{fields[self.group_field]}#boot{k}"
        sample = s.sample.model_copy(update={"id": f"{s.sample.id}#boot{k}", "fields": fields})
        return dataclasses.replace(s, sample=sample)

    def resample(self, draws: np.ndarray) -> list[Scored]:
        """The scored samples of a bootstrap draw (cluster indices, with repeats)."""
        out: list[Scored] = []
        counts = np.bincount(draws, minlength=len(self))
        for i in np.nonzero(counts)[0]:
            for k in range(int(counts[i])):
                out.extend(self.copy(int(i), k))
        return out


def _pooled(scored: Sequence[Scored]) -> float | None:
    vals = [s.value for s in scored if s.value is not None]
    return 100.0 * sum(vals) / len(vals) if vals else None


@dataclass
class Comparison:
    """Run B minus run A on one benchmark, over the samples both runs hold."""

    benchmark: str
    a: float | None
    """Run A's official number over ALL its samples."""
    b: float | None
    """Run B's official number over ALL its samples."""
    a_common: float | None
    b_common: float | None
    delta: float | None
    """b_common - a_common, in points."""
    ci_low: float | None
    ci_high: float | None
    n_common: int
    n_only_a: int
    n_only_b: int
    method: str
    seed: int

    @property
    def significant(self) -> bool:
        """True when the 95% interval of the delta excludes 0."""
        if self.ci_low is None or self.ci_high is None:
            return False
        return not (self.ci_low <= 0.0 <= self.ci_high)

    @property
    def verdict(self) -> str:
        """A word for people: better / worse / not significant / not comparable."""
        if self.delta is None or self.ci_low is None:
            return "not comparable"
        if not self.significant:
            return "not significant"
        return "B better" if self.delta > 0 else "B worse"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form."""
        d = dataclasses.asdict(self)
        d.update(significant=self.significant, verdict=self.verdict)
        return d


def compare(
    a: BenchmarkReport, b: BenchmarkReport, *, n_boot: int = 2000, seed: int = 0
) -> Comparison:
    """Delta B - A with a seeded paired bootstrap 95% interval over common sample ids."""
    ids_a = {s.sample.id for s in a.scored}
    ids_b = {s.sample.id for s in b.scored}
    common = ids_a & ids_b
    sa = [s for s in a.scored if s.sample.id in common]
    sb_by = {s.sample.id: s for s in b.scored if s.sample.id in common}
    base: dict[str, Any] = dict(
        benchmark=a.name,
        a=a.overall,
        b=b.overall,
        n_common=len(common),
        n_only_a=len(ids_a - common),
        n_only_b=len(ids_b - common),
        seed=seed,
    )
    gf = _group_field(a)
    fa, fb = overall_fn(a), overall_fn(b)
    sb = [sb_by[s.sample.id] for s in sa]  # B in A's order: both resampled with one draw
    a_c, b_c = fa(sa), fb(sb)
    delta = None if a_c is None or b_c is None else b_c - a_c
    keys = list(dict.fromkeys(cluster_key(s, gf) for s in sa))
    unit = f"clusters by {gf}" if gf else "samples"
    rng = np.random.default_rng(seed)
    form_a = linear_form(a.spec, sa, gf, keys, fa) if len(keys) >= 2 else None
    form_b = linear_form(b.spec, sb, gf, keys, fb) if form_a is not None else None
    if len(keys) < 2:
        deltas = np.array([])
        method = "fewer than 2 common clusters"
    elif form_a is not None and form_b is not None:
        counts = bootstrap_counts(rng, n_boot, len(keys))
        deltas = np.concatenate([form_b(c) - form_a(c) for c in counts])
        method = f"paired bootstrap ({n_boot}, {unit})"
    else:
        deltas = _generic_deltas(sa, sb, gf, fa, fb, rng, n_boot)
        method = f"paired bootstrap ({n_boot}, {unit}, official aggregate per replicate)"
    lo, hi = percentile_ci(deltas)
    return Comparison(
        a_common=a_c, b_common=b_c, delta=delta, ci_low=lo, ci_high=hi, method=method, **base
    )


def _generic_deltas(
    sa: list[Scored],
    sb: list[Scored],
    gf: str | None,
    fa: AggFn,
    fb: AggFn,
    rng: np.random.Generator,
    n_boot: int,
) -> np.ndarray:
    clusters = Clusters(sa, gf)
    by_id = {x.sample.id: y for x, y in zip(sa, sb, strict=True)}
    clusters_b = Clusters([], gf)
    clusters_b.keys = clusters.keys
    clusters_b.members = [[by_id[s.sample.id] for s in m] for m in clusters.members]
    out = []
    for _ in range(n_boot):
        draws = rng.integers(0, len(clusters), len(clusters))
        out.append(_nan(fb(clusters_b.resample(draws))) - _nan(fa(clusters.resample(draws))))
    return np.array(out, dtype=float)


def percentile_ci(values: np.ndarray) -> tuple[float | None, float | None]:
    """The 95% percentile interval of bootstrap replicates; replicates whose aggregate was
    undefined (NaN) are left out, and fewer than 2 left give no interval."""
    vals = np.asarray(values, dtype=float)
    vals = vals[~np.isnan(vals)]
    if len(vals) < 2:
        return None, None
    lo, hi = np.percentile(vals, [2.5, 97.5])
    return float(lo), float(hi)
