"""Official aggregations of the second half of the suite (Benchmarks II).

Registered on the same ``aggregations`` registry as :mod:`evalkit.bench.aggregate`:

- ``merged_macro_mean``  VSI-Bench: mean of per-task scores where some tasks are first
  merged into one (its three relative-direction levels count as ONE task).
- ``hierarchical_mean``  OVO-Bench: per task, then the mean of tasks per category, then
  the mean of the categories.
- ``temporal_grounding`` Charades-STA: R@1 at IoU 0.3/0.5/0.7 and mIoU.
- ``spatiotemporal_grounding`` STVG: m_tIoU, m_vIoU, vIoU@0.3/0.5 and the reward form.
- ``mean_cot``           VCR-Bench: pooled accuracy plus the judged CoT score (recall,
  precision, F1; overall, perception, reasoning) from the scores' metadata.

Unscored samples (value None, e.g. no judge) are left out and counted in ``n_unscored``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evalkit.bench.aggregate import (
    AggregateResult,
    Scored,
    _pct,
    _result,
    _units,
    aggregations,
    breakdown,
    mean,
)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


@aggregations("merged_macro_mean")
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
    units = _units(scored)
    raw = breakdown(units, field)
    tasks = dict(raw)
    for merged, parts in (merge or {}).items():
        present = [raw[p] for p in parts if p in raw]
        for p in parts:
            tasks.pop(p, None)
        if present:
            tasks[merged] = sum(present) / len(present)
    out = _result(scored, units, _mean(list(tasks.values())), [b for b in breakdowns if b != field])
    out.breakdowns = {field: dict(sorted(tasks.items())), **out.breakdowns}
    out.metrics.update({f"task/{k}": v for k, v in raw.items()})
    out.metrics["pooled"] = _pct(v for _, v in units) or 0.0
    return out


@aggregations("hierarchical_mean")
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
    units = _units(scored)
    per_task = breakdown(units, task_field)
    category_of: dict[str, str] = {}
    for sample, _ in units:
        category_of[str(sample.fields[task_field])] = str(sample.fields[category_field])
    per_cat: dict[str, list[float]] = {}
    for task, value in per_task.items():
        per_cat.setdefault(category_of[task], []).append(value)
    cats = {c: sum(v) / len(v) for c, v in sorted(per_cat.items())}
    rest = [b for b in breakdowns if b not in (task_field, category_field)]
    out = _result(scored, units, _mean(list(cats.values())), rest)
    out.breakdowns = {task_field: per_task, category_field: cats, **out.breakdowns}
    out.metrics["pooled"] = _pct(v for _, v in units) or 0.0
    return out


def _iou(s: Scored, key: str) -> float | None:
    if s.value is None:
        return None
    got = s.metadata.get(key)
    return float(got) if got is not None else None


@aggregations("temporal_grounding")
def temporal_grounding(
    scored: Sequence[Scored],
    breakdowns: Sequence[str] = (),
    *,
    thresholds: Sequence[float] = (0.3, 0.5, 0.7),
) -> AggregateResult:
    """Charades-STA: ``overall`` = mIoU; ``metrics`` hold R@1,IoU=m for each threshold.

    R@1,IoU=m (Gao et al., TALL, ICCV 2017) is the share of queries whose single
    predicted moment reaches IoU m with the ground truth; mIoU is the mean IoU. The
    per-sample tIoU is the temporal-grounding scorer's value (also in its metadata).
    """
    units = [(s.sample, iou) for s in scored if (iou := _tiou(s)) is not None]
    out = _result(scored, units, _pct(v for _, v in units), breakdowns)
    for t in thresholds:
        out.metrics[f"R@{t:g}"] = _pct(float(v >= t) for _, v in units) or 0.0
    out.metrics["mIoU"] = out.overall or 0.0
    return out


def _tiou(s: Scored) -> float | None:
    got = _iou(s, "tiou")
    return s.value if got is None else got


@aggregations("spatiotemporal_grounding")
def spatiotemporal_grounding(
    scored: Sequence[Scored],
    breakdowns: Sequence[str] = (),
    *,
    thresholds: Sequence[float] = (0.3, 0.5),
) -> AggregateResult:
    """STVG: ``overall`` = m_vIoU; ``metrics`` hold m_tIoU, vIoU@t and the reward form.

    HC-STVG / VidSTG convention (Tang et al. 2021; Zhang et al. 2020): vIoU of a sample
    is the sum of per-frame box IoUs over frames in both tubes divided by the frames in
    either; m_vIoU its mean, vIoU@t the share reaching t; m_tIoU the mean temporal IoU.
    ``reward`` is the mean of EasyVideoR1's per-sample 0.5*tIoU + 0.5*mean box IoU (the
    scorer's value, or ``metadata["reward"]`` where the rule's value is another figure).
    A sample whose score carries no tube metadata (``tiou``/``viou``) cannot give these
    numbers: it is counted unscored, never as 0.
    """
    kept = [s for s in scored if s.value is not None and "viou" in s.metadata]
    vious = [(s.sample, float(s.metadata["viou"])) for s in kept]
    out = _result(scored, vious, _pct(v for _, v in vious), breakdowns)
    out.n_scored, out.n_unscored = len(kept), len(scored) - len(kept)
    out.metrics["m_vIoU"] = out.overall or 0.0
    out.metrics["m_tIoU"] = _pct(float(s.metadata.get("tiou", 0.0)) for s in kept) or 0.0
    for t in thresholds:
        out.metrics[f"vIoU@{t:g}"] = _pct(float(v >= t) for _, v in vious) or 0.0
    # a rule whose value is not the reward form (rule "stvg": vIoU) carries it in metadata
    rewards = (float(s.metadata.get("reward", s.value)) for s in kept if s.value is not None)
    out.metrics["reward"] = _pct(rewards) or 0.0
    return out


def _meta_mean(scored: Sequence[Scored], key: str) -> tuple[float | None, int]:
    got = [float(v) for s in scored if (v := s.metadata.get(key)) is not None]
    return _mean(got), len(got)


@aggregations("mean_cot")
def mean_cot(scored: Sequence[Scored], breakdowns: Sequence[str] = ()) -> AggregateResult:
    """Pooled accuracy (as ``mean``) with the judged CoT score beside it in ``metrics``.

    VCR-Bench eval_code/cau_total.py ``calculate_metrics``: for each of overall /
    perception ("Video") / reasoning ("logic"), precision = mean of the per-sample
    precisions over the samples that have one, recall likewise (each over its own
    samples), F1 = 2PR / (P + R) of those two means (not a mean of per-sample F1s).
    ``cot_f1`` is the paper's CoT score. Figures are percentages; a figure no sample
    has is left out (absent, not 0). ``cot_missing`` counts samples lacking the overall
    recall or precision (no judge, unparsable reply); ``cot_efficiency`` is the mean
    share of non-redundant response steps (eval.py ``precision``), reported as extra.
    """
    out = mean(scored, breakdowns)
    for suffix in ("", "_perception", "_reasoning"):
        recall, n_recall = _meta_mean(scored, f"cot_recall{suffix}")
        precision, n_precision = _meta_mean(scored, f"cot_precision{suffix}")
        if recall is not None:
            out.metrics[f"cot_recall{suffix}"] = 100.0 * recall
        if precision is not None:
            out.metrics[f"cot_precision{suffix}"] = 100.0 * precision
        if recall is not None and precision is not None:
            total = recall + precision
            out.metrics[f"cot_f1{suffix}"] = 100.0 * (
                2 * recall * precision / total if total else 0
            )
        if not suffix:
            out.metrics["cot_n_recall"] = float(n_recall)
            out.metrics["cot_n_precision"] = float(n_precision)
    efficiency, _ = _meta_mean(scored, "cot_efficiency")
    if efficiency is not None:
        out.metrics["cot_efficiency"] = 100.0 * efficiency
    out.metrics["cot_missing"] = float(
        sum(
            s.metadata.get("cot_recall") is None or s.metadata.get("cot_precision") is None
            for s in scored
        )
    )
    return out


def describe() -> dict[str, Any]:
    """Names of the aggregations this module adds (for ``bench show`` and tests)."""
    return {
        name: fn.__doc__.splitlines()[0] if fn.__doc__ else ""
        for name, fn in (
            ("merged_macro_mean", merged_macro_mean),
            ("hierarchical_mean", hierarchical_mean),
            ("temporal_grounding", temporal_grounding),
            ("spatiotemporal_grounding", spatiotemporal_grounding),
            ("mean_cot", mean_cot),
        )
    }
