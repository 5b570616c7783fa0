"""Metrics: plain functions over lists of scores (or of values), and grouping for breakdowns.

Samples whose ``Score.value`` is None ("not scored") are left out of every mean and
counted separately in ``n_unscored``; they are never counted as 0.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.types import Score

IOU_THRESHOLDS = (0.3, 0.5, 0.7)  # Charades-STA / ActivityNet Captions R@1,IoU=m


def values(scores: Iterable[Score]) -> list[float]:
    """The scored values (None left out)."""
    return [s.value for s in scores if s.value is not None]


def mean_stderr(xs: Sequence[float]) -> tuple[float, float]:
    """Mean and its standard error (sample std / sqrt(n)); (nan, nan) for no data."""
    n = len(xs)
    if n == 0:
        return math.nan, math.nan
    m = sum(xs) / n
    if n == 1:
        return m, 0.0
    var = sum((x - m) ** 2 for x in xs) / (n - 1)
    return m, math.sqrt(var / n)


def mean(scores: Sequence[Score]) -> dict[str, float]:
    """Accuracy/mean of the values with standard error, and the counts."""
    xs = values(scores)
    m, se = mean_stderr(xs)
    return {"mean": m, "stderr": se, "n": len(xs), "n_unscored": len(scores) - len(xs)}


def _meta(scores: Sequence[Score], key: str, fallback_value: bool) -> list[float]:
    out = []
    for s in scores:
        v = s.metadata.get(key)
        if v is None and fallback_value:
            v = s.value
        if v is not None:
            out.append(float(v))
    return out


def recall_at_iou(
    ious: Sequence[float], thresholds: Sequence[float] = IOU_THRESHOLDS
) -> dict[str, float]:
    """R@1,IoU≥m: the share of samples whose IoU reaches each threshold (Charades-STA)."""
    n = len(ious)
    return {f"R@{t:g}": (sum(i >= t for i in ious) / n if n else math.nan) for t in thresholds}


def temporal_grounding_metrics(scores: Sequence[Score]) -> dict[str, float]:
    """R@0.3/0.5/0.7 and mIoU from temporal-grounding scores (tIoU in metadata)."""
    ious = _meta(scores, "tiou", fallback_value=True)
    out = recall_at_iou(ious)
    out["mIoU"] = mean_stderr(ious)[0]
    return out


def spatiotemporal_metrics(
    scores: Sequence[Score], thresholds: Sequence[float] = (0.3, 0.5)
) -> dict[str, float]:
    """m_tIoU, m_vIoU and vIoU@thresholds (HC-STVG / VidSTG convention)."""
    tious = _meta(scores, "tiou", fallback_value=False)
    vious = _meta(scores, "viou", fallback_value=False)
    out = {"m_tIoU": mean_stderr(tious)[0], "m_vIoU": mean_stderr(vious)[0]}
    for t in thresholds:
        out[f"vIoU@{t:g}"] = sum(v >= t for v in vious) / len(vious) if vious else math.nan
    return out


def mra(scores: Sequence[Score]) -> float:
    """Mean of per-sample MRA values (VSI-Bench's numerical-answer metric)."""
    return mean_stderr(values(scores))[0]


def group_by(
    samples: Sequence[Sample], scores: Sequence[Score], key: str | Callable[[Sample], Any]
) -> dict[Any, list[Score]]:
    """Scores grouped by a sample attribute, a ``fields`` entry, or a function of the sample."""
    if len(samples) != len(scores):
        raise ValueError(f"{len(samples)} samples but {len(scores)} scores")
    groups: dict[Any, list[Score]] = defaultdict(list)
    for sample, s in zip(samples, scores, strict=True):
        groups[_field(sample, key)].append(s)
    return dict(groups)


def _field(sample: Sample, key: str | Callable[[Sample], Any]) -> Any:
    if callable(key):
        return key(sample)
    if key in sample.fields:
        value = sample.fields[key]
    elif key in type(sample).model_fields:
        value = getattr(sample, key)
    else:
        raise KeyError(f"sample {sample.id} has no field {key!r} (fields: {sorted(sample.fields)})")
    return tuple(value) if isinstance(value, list) else value


def breakdown(
    samples: Sequence[Sample],
    scores: Sequence[Score],
    key: str | Callable[[Sample], Any],
    metric: Callable[[Sequence[Score]], Any] = mean,
) -> dict[Any, Any]:
    """``metric`` per group (per-category breakdowns), groups in sorted order."""
    groups = group_by(samples, scores, key)
    return {k: metric(groups[k]) for k in sorted(groups, key=str)}
