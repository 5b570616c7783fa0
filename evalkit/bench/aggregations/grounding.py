"""Grounding: temporal (Charades-STA's R@1 and mIoU) and spatio-temporal (STVG's vIoU).

A sample's IoUs come from its scorer's metadata (``tiou``, ``viou``, ``reward``).
Unscored samples are left out and counted in ``n_unscored``.
"""

from __future__ import annotations

from collections.abc import Sequence

from evalkit.bench.aggregations.base import (
    AGGREGATIONS,
    AggregateResult,
    Scored,
    percent,
    result_from,
)


def _iou(s: Scored, key: str) -> float | None:
    if s.value is None:
        return None
    got = s.metadata.get(key)
    return float(got) if got is not None else None


@AGGREGATIONS("temporal_grounding")
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
    out = result_from(scored, units, percent(v for _, v in units), breakdowns)
    for t in thresholds:
        out.metrics[f"R@{t:g}"] = percent(float(v >= t) for _, v in units) or 0.0
    out.metrics["mIoU"] = out.overall or 0.0
    return out


def _tiou(s: Scored) -> float | None:
    got = _iou(s, "tiou")
    return s.value if got is None else got


@AGGREGATIONS("spatiotemporal_grounding")
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
    out = result_from(scored, vious, percent(v for _, v in vious), breakdowns)
    out.n_scored, out.n_unscored = len(kept), len(scored) - len(kept)
    out.metrics["m_vIoU"] = out.overall or 0.0
    out.metrics["m_tIoU"] = percent(float(s.metadata.get("tiou", 0.0)) for s in kept) or 0.0
    for t in thresholds:
        out.metrics[f"vIoU@{t:g}"] = percent(float(v >= t) for _, v in vious) or 0.0
    # a rule whose value is not the reward form (rule "stvg": vIoU) carries it in metadata
    rewards = (float(s.metadata.get("reward", s.value)) for s in kept if s.value is not None)
    out.metrics["reward"] = percent(rewards) or 0.0
    return out
