"""Aggregations on hand-made score values: unscored samples, groups, registry."""

from __future__ import annotations

import pytest

from evalkit.bench.aggregations import AGGREGATIONS, Scored
from evalkit.bench.aggregations.means import macro_mean, mean
from evalkit.bench.aggregations.question_groups import mbin
from evalkit.registry import RegistryError
from evalkit.sample import Sample


def s(i: str, **fields: object) -> Sample:
    return Sample(id=i, task_type="multiple_choice", question="q", fields=dict(fields))


def test_unscored_samples_are_counted_never_zero() -> None:
    res = mean([Scored(s("a"), 1.0), Scored(s("b"), None), Scored(s("c"), 0.0)])
    assert (res.overall, res.n, res.n_scored, res.n_unscored) == (50.0, 3, 2, 1)


def test_nothing_scored_gives_no_overall() -> None:
    res = mean([Scored(s("a"), None)], ["task"])
    assert res.overall is None and res.breakdowns == {"task": {}}


def test_macro_mean_can_be_restricted_to_named_groups() -> None:
    rows = [
        Scored(s("a", task="x"), 1.0),
        Scored(s("b", task="y"), 0.0),
        Scored(s("c", task="z"), 1.0),
    ]
    assert macro_mean(rows, field="task").overall == pytest.approx(200 / 3)
    assert macro_mean(rows, field="task", groups=["x", "y"]).overall == 50.0


def test_mbin_leaves_out_a_question_with_an_unscored_pair() -> None:
    rows = [
        Scored(s("1a", q=1), 1.0),
        Scored(s("1b", q=1), 1.0),
        Scored(s("2a", q=2), 1.0),
        Scored(s("2b", q=2), None),
        Scored(s("3a", q=3), 0.0),
        Scored(s("3b", q=3), 1.0),
    ]
    res = mbin(rows, group_field="q")
    assert res.overall == 50.0 and res.n_unscored == 1 and res.metrics["n_questions"] == 3


def test_an_unknown_aggregation_suggests_close_names() -> None:
    with pytest.raises(RegistryError, match="did you mean 'macro_mean'"):
        AGGREGATIONS.get("macro_mea")


def test_records_from_the_results_store_aggregate_without_the_dataset() -> None:
    from evalkit.records import failed_record, ok_record
    from evalkit.reports.load import scored_from_records
    from evalkit.scoring.types import Score

    def sample(i: str, target: str, task: str) -> Sample:
        return Sample(
            id=i, task_type="multiple_choice", question="q", target=target, fields={"task": task}
        )

    written = {"fingerprint": "f", "timings": {}}
    records = [
        ok_record(sample("a", "A", "x"), Score(1.0, metadata={"format": 1}), ["A"], **written),
        ok_record(sample("b", "B", "y"), Score(0.0), ["C"], **written),
        failed_record(sample("c", "C", "y"), "engine", "EngineError: x", **written),
    ]
    scored, counts = scored_from_records(records, failed="exclude")
    assert scored[0].metadata == {"format": 1} and counts.failed == 1
    res = macro_mean(scored, field="task")
    assert (res.overall, res.n) == (50.0, 2)
    scored, _ = scored_from_records(records)  # by default a failed sample counts as wrong
    assert macro_mean(scored, field="task").overall == 50.0
    assert [s.value for s in scored] == [1.0, 0.0, 0.0]
