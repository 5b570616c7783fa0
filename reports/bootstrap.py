"""Official aggregates as vectorised functions of bootstrap counts — checked, not trusted.

A bootstrap replicate is a vector of counts (how often each cluster was drawn). For the
registered rules that are ratios of sums — a pooled mean, a macro mean over groups, and
mean-of-group-scores rules (``mbin``, ``group_nonlinear``: each cluster's score comes
from running the OFFICIAL aggregation on that cluster alone) — the overall number of a
replicate is a matrix product, so a thousand replicates of a 4,000-sample benchmark take
milliseconds instead of a minute. Each form is accepted only if, on the original data
(every count 1), it reproduces the official aggregate exactly; otherwise the caller falls
back to re-running the official aggregation on every replicate.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from evalkit.bench.aggregations import Scored
from evalkit.bench.aggregations.base import groups_of

if TYPE_CHECKING:
    from evalkit.bench.spec import BenchmarkSpec

Form = Callable[[np.ndarray], np.ndarray]
"""counts (B, C) -> overall number per replicate (B,), NaN where undefined."""
Official = Callable[[Sequence[Scored]], "float | None"]


def cluster_key(s: Scored, group_field: str | None) -> str:
    """The resampling unit of a scored sample: its group, or the sample itself."""
    if group_field:
        return str(s.sample.fields.get(group_field, s.sample.id))
    return s.sample.id


def linear_form(
    spec: BenchmarkSpec | None,
    scored: Sequence[Scored],
    group_field: str | None,
    keys: Sequence[str],
    official: Official,
) -> Form | None:
    """A vectorised official overall over clusters ``keys``, or None if none is exact."""
    index = {k: i for i, k in enumerate(keys)}
    name = spec.aggregation.name if spec is not None else "mean"
    rows = [index[cluster_key(s, group_field)] for s in scored]
    form: Form | None
    if name == "mean":
        form = _mean_form(scored, rows, len(keys))
    elif name == "macro_mean":
        params = spec.aggregation.params if spec is not None else {}
        form = _macro_form(scored, rows, len(keys), params["field"], params.get("groups"))
    elif group_field:
        form = _unit_form(scored, rows, len(keys), official)
    else:
        form = None
    if form is None:
        return None
    got = float(form(np.ones((1, len(keys))))[0])
    want = official(scored)
    exact = np.isnan(got) if want is None else (not np.isnan(got) and abs(got - want) < 1e-6)
    return form if exact else None


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, 100.0 * num / np.where(den > 0, den, 1), np.nan)


def _mean_form(scored: Sequence[Scored], rows: list[int], n: int) -> Form:
    total, count = np.zeros(n), np.zeros(n)
    for s, r in zip(scored, rows, strict=True):
        if s.value is not None:
            total[r] += s.value
            count[r] += 1
    return lambda c: _ratio(c @ total, c @ count)


def _macro_form(
    scored: Sequence[Scored], rows: list[int], n: int, field: str, groups: Sequence[str] | None
) -> Form:
    names = sorted({g for s in scored if s.value is not None for g in groups_of(s.sample, field)})
    col = {g: j for j, g in enumerate(names)}
    total, count = np.zeros((n, len(names))), np.zeros((n, len(names)))
    for s, r in zip(scored, rows, strict=True):
        if s.value is None:
            continue
        for g in groups_of(s.sample, field):
            total[r, col[g]] += s.value
            count[r, col[g]] += 1
    keep = [col[g] for g in groups if g in col] if groups else list(range(len(names)))

    def form(c: np.ndarray) -> np.ndarray:
        per = _ratio(c @ total, c @ count)[:, keep]  # groups absent from a draw are NaN
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # "mean of empty slice"
            return np.nanmean(per, axis=1) if keep else np.full(len(c), np.nan)

    return form


def _unit_form(scored: Sequence[Scored], rows: list[int], n: int, official: Official) -> Form:
    members: list[list[Scored]] = [[] for _ in range(n)]
    for s, r in zip(scored, rows, strict=True):
        members[r].append(s)
    unit, valid = np.zeros(n), np.zeros(n)
    for i, m in enumerate(members):
        v = official(m) if m else None  # the official rule on this cluster alone
        if v is not None:
            unit[i], valid[i] = v / 100.0, 1.0
    return lambda c: _ratio(c @ unit, c @ valid)


def bootstrap_counts(rng: np.random.Generator, n_boot: int, n: int) -> list[np.ndarray]:
    """Seeded replicate counts, in blocks of bounded memory (B_block, n)."""
    block = max(1, 4_000_000 // max(n, 1))
    out, done = [], 0
    while done < n_boot:
        m = min(block, n_boot - done)
        out.append(rng.multinomial(n, np.full(n, 1.0 / n), size=m).astype(float))
        done += m
    return out
