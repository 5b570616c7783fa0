"""Judged figures reported beside the accuracy: VCR-Bench's CoT recall, precision and F1."""

from __future__ import annotations

from collections.abc import Sequence

from evalkit.bench.aggregations.base import AGGREGATIONS, AggregateResult, Scored, mean_of
from evalkit.bench.aggregations.means import mean


def _meta_mean(scored: Sequence[Scored], key: str) -> tuple[float | None, int]:
    got = [float(v) for s in scored if (v := s.metadata.get(key)) is not None]
    return mean_of(got), len(got)


@AGGREGATIONS("mean_cot")
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
