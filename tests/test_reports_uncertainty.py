"""Bootstrap replicates through the vectorised forms equal the official aggregation."""

from __future__ import annotations

import random

import numpy as np
import pytest

from evalkit.bench.aggregations import Scored
from evalkit.bench.registry import get_benchmark
from evalkit.reports.bootstrap import cluster_key, linear_form
from evalkit.reports.reference import metric_value
from evalkit.reports.uncertainty import Clusters, percentile_ci
from evalkit.sample import Sample


def _scored(i: int, value: float | None, **fields: object) -> Scored:
    return Scored(
        Sample(id=f"s{i}", task_type="multiple_choice", question="", fields=fields), value
    )


def _official(spec):  # the official rule, overall only
    from evalkit.bench.aggregations import aggregate

    return lambda scored: aggregate(spec, scored).overall


def _cases() -> list[tuple[str, str | None, list[Scored]]]:
    rnd = random.Random(0)
    v = lambda p: None if rnd.random() < 0.05 else float(rnd.random() < p)  # noqa: E731
    mean = [_scored(i, v(0.6), duration=rnd.choice(["short", "long"])) for i in range(120)]
    macro = [_scored(i, v(0.2 + 0.1 * (i % 5)), task=f"t{i % 5}") for i in range(150)]
    mbin = [_scored(i, v(0.7), question_id=f"q{i // 2}") for i in range(160)]
    v2 = []
    for g in range(30):
        kind = "logic" if g % 2 else "relevance"
        for pos in range(4):
            v2.append(
                _scored(
                    4 * g + pos,
                    float(rnd.random() < 0.6),
                    group=f"g{g}",
                    position=pos,
                    group_type=kind,
                    group_structure="[1, 2, 3, 4]",
                )
            )
    return [
        ("Video-MME", None, mean),
        ("MLVU", None, macro),
        ("VideoMathQA", "mbin", mbin),
        ("Video-MME-v2", None, v2),
    ]


@pytest.mark.parametrize("name,variant,scored", _cases(), ids=lambda x: str(x)[:12])
def test_vectorised_replicates_equal_the_official_aggregate(
    name: str, variant: str | None, scored: list[Scored]
) -> None:
    spec = get_benchmark(name).with_variant(variant)
    gf = spec.aggregation.params.get("group_field")
    keys = list(dict.fromkeys(cluster_key(s, gf) for s in scored))
    official = _official(spec)
    form = linear_form(spec, scored, gf, keys, official)
    assert form is not None, f"{name}: no exact vectorised form"
    clusters = Clusters(scored, gf)
    assert clusters.keys == keys
    rng = np.random.default_rng(1)
    for _ in range(20):
        draws = rng.integers(0, len(keys), len(keys))
        counts = np.bincount(draws, minlength=len(keys)).astype(float)[None, :]
        want = official(clusters.resample(draws))
        got = float(form(counts)[0])
        assert (want is None and np.isnan(got)) or got == pytest.approx(want, abs=1e-9)


def test_a_form_that_does_not_reproduce_the_official_number_is_refused() -> None:
    spec = get_benchmark("MVBench")
    scored = [_scored(i, float(i % 2), task=f"t{i % 3}") for i in range(12)]
    keys = [s.sample.id for s in scored]
    wrong = lambda _: 12.345  # noqa: E731 - stands for an official rule the form does not match
    assert linear_form(spec, scored, None, keys, wrong) is None


def test_metric_value_reads_overall_breakdowns_and_extra_metrics() -> None:
    from evalkit.bench.aggregations import AggregateResult

    r = AggregateResult(50.0, {"duration": {"long": 40.0}}, metrics={"pooled": 55.0})
    assert metric_value(r, "overall") == 50.0
    assert metric_value(r, "duration/long") == 40.0
    assert metric_value(r, "duration/short") is None
    assert metric_value(r, "pooled") == 55.0


def test_the_percentile_interval_leaves_out_replicates_with_no_aggregate() -> None:
    """A replicate whose draw left the official aggregate undefined is NaN: it is no
    evidence either way, so it narrows nothing and widens nothing."""
    reps = np.concatenate([np.linspace(0.0, 1.0, 201), [np.nan] * 50])
    assert percentile_ci(reps) == pytest.approx((0.025, 0.975))
    assert percentile_ci(np.array([0.5, np.nan, np.nan])) == (None, None)  # one is no spread
