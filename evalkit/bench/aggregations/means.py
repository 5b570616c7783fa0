"""Accuracy means: pooled, per group, over merged or nested groups, over answered questions.

Each is an official rule of one or more benchmarks (named in its docstring):

- ``mean``               pooled accuracy (Video-MME, LVBench, LongVideoBench, ...);
- ``macro_mean``         unweighted mean of per-group accuracies (MLVU's M-Avg);
- ``merged_macro_mean``  VSI-Bench: per-task mean after merging task groups into one task;
- ``hierarchical_mean``  OVO-Bench: tasks -> categories -> overall;
- ``mean_answered``      ODV-Bench: pooled accuracy over the answered questions only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evalkit.bench.aggregations.base import (
    AGGREGATIONS,
    AggregateResult,
    Scored,
    breakdown,
    mean_of,
    percent,
    result_from,
    scored_units,
)


@AGGREGATIONS("mean")
def mean(scored: Sequence[Scored], breakdowns: Sequence[str] = ()) -> AggregateResult:
    """Pooled accuracy over all scored samples, with pooled per-group breakdowns.

    The official rule of e.g. Video-MME (overall and per duration, VideoMME's
    eval_your_results.py), LVBench (overall and per question type, its scripts/eval.py)
    and LongVideoBench (per duration group).
    """
    units = scored_units(scored)
    return result_from(scored, units, percent(v for _, v in units), breakdowns)


@AGGREGATIONS("macro_mean")
def macro_mean(
    scored: Sequence[Scored],
    breakdowns: Sequence[str] = (),
    *,
    field: str,
    groups: Sequence[str] | None = None,
) -> AggregateResult:
    """Unweighted mean of per-group accuracies over ``field``.

    MLVU's M-Avg is the mean over its multiple-choice tasks (paper Sec. 4). (MVBench's
    "Avg" is NOT this: its notebook pools correct / total over all questions.) ``groups``
    restricts the mean to the named groups (others still appear in the breakdown).
    """
    units = scored_units(scored)
    per = breakdown(units, field)
    chosen = [per[g] for g in (groups or per) if g in per]
    out = result_from(
        scored,
        units,
        sum(chosen) / len(chosen) if chosen else None,
        [field, *[b for b in breakdowns if b != field]],
    )
    out.metrics["pooled"] = percent(v for _, v in units) or 0.0
    return out


@AGGREGATIONS("merged_macro_mean")
def merged_macro_mean(
    scored: Sequence[Scored],
    breakdowns: Sequence[str] = (),
    *,
    field: str,
    merge: Mapping[str, Sequence[str]] | None = None,
) -> AggregateResult:
    """Unweighted mean of per-task scores after merging task groups into single tasks.

    VSI-Bench (lmms-eval tasks/vsibench/utils.py ``vsibench_aggregate_results``, the
    benchmark authors' code): accuracy (MCQ) or MRA (numeric) per ``question_type``; the
    easy/medium/hard relative-direction tasks are averaged into ONE task score; overall is
    the mean over the resulting 8 task scores. ``breakdowns[field]`` shows the merged
    tasks; ``metrics`` keep each raw task score under ``task/<name>``.
    """
    units = scored_units(scored)
    raw = breakdown(units, field)
    tasks = dict(raw)
    for merged, parts in (merge or {}).items():
        present = [raw[p] for p in parts if p in raw]
        for p in parts:
            tasks.pop(p, None)
        if present:
            tasks[merged] = sum(present) / len(present)
    rest = [b for b in breakdowns if b != field]
    out = result_from(scored, units, mean_of(list(tasks.values())), rest)
    out.breakdowns = {field: dict(sorted(tasks.items())), **out.breakdowns}
    out.metrics.update({f"task/{k}": v for k, v in raw.items()})
    out.metrics["pooled"] = percent(v for _, v in units) or 0.0
    return out


@AGGREGATIONS("hierarchical_mean")
def hierarchical_mean(
    scored: Sequence[Scored],
    breakdowns: Sequence[str] = (),
    *,
    task_field: str,
    category_field: str,
) -> AggregateResult:
    """Accuracy per task, mean of tasks per category, mean of the categories overall.

    OVO-Bench (its utils/OVOBenchScore.py, mirrored in lmms-eval tasks/ovobench): each
    task's accuracy is over its scored units (a forward-active probe is one unit); a
    category (backward / realtime / forward) is the unweighted mean of its tasks; the
    overall number is the unweighted mean of the three category averages.
    """
    units = scored_units(scored)
    per_task = breakdown(units, task_field)
    category_of: dict[str, str] = {}
    for sample, _ in units:
        category_of[str(sample.fields[task_field])] = str(sample.fields[category_field])
    per_cat: dict[str, list[float]] = {}
    for task, value in per_task.items():
        per_cat.setdefault(category_of[task], []).append(value)
    cats = {c: sum(v) / len(v) for c, v in sorted(per_cat.items())}
    rest = [b for b in breakdowns if b not in (task_field, category_field)]
    out = result_from(scored, units, mean_of(list(cats.values())), rest)
    out.breakdowns = {task_field: per_task, category_field: cats, **out.breakdowns}
    out.metrics["pooled"] = percent(v for _, v in units) or 0.0
    return out


@AGGREGATIONS("mean_answered")
def mean_answered(scored: Sequence[Scored], breakdowns: Sequence[str] = ()) -> AggregateResult:
    """Pooled accuracy (and per-group) over the answered samples only.

    ODV-Bench (MCG-NJU/StreamForest lmms_eval/tasks/odvbench/utils.py
    ``odvbench_aggregate_results``) counts a question only when its prediction is not
    empty, overall and per task / subtask / subsubtask. Left-out samples are reported in
    ``metrics["unanswered"]``; ``metrics["all_questions"]`` is the accuracy with them as 0.
    """
    kept = [s for s in scored if s.metadata.get("answered") is not False]
    units = scored_units(kept)
    out = result_from(kept, units, percent(v for _, v in units), breakdowns)
    out.n = len(scored)
    out.metrics["unanswered"] = float(len(scored) - len(kept))
    out.metrics["all_questions"] = percent(v for _, v in scored_units(scored)) or 0.0
    return out
