"""STVG (ST-Align-Benchmark, the data behind EasyVideoR1's stvg.json) as LLaVA-ST scores it.

Source: appletea233/LLaVA-ST inference/src/metrics.py ``eval_stvg`` (task "stvg") with
inference/src/utils.py ``temporal_iou`` and ``iou``. Per sample it computes
tIoU = overlap / hull of the two spans (``temporal_iou(gt, pred)``),
sIoU = sum of box IoUs over the frames in both tubes / max(that count, 1), and
stIoU (vIoU) = the same sum / max(frames in either tube, 1); the benchmark reports their
means (m_tIoU, m_sIoU, m_vIoU) and vIoU@0.3/0.5/0.7 with ``>=``. Box IoU there does not
clip areas at 0, but a box with x2 < x1 or y2 < y1 still has zero overlap, so it scores 0.

Extraction: LLaVA-ST's own parser reads its ``<TEMP-n>``/``{s, e}`` token format, which no
JSON answer matches. EasyVideoR1 converted the benchmark to JSON
(``{"time": [s, e], "boxes": {"<second>": [x1, y1, x2, y2]}}``) and its prompt asks for
that, so the JSON is taken as EasyVideoR1's ``extract_answer`` takes it. Predicted frame
keys are rounded to whole numbers, as LLaVA-ST rounds every predicted frame index
(``str(round(...))``, Python's half-to-even); target keys are compared as written. Only
entries whose value is four numbers count as predicted boxes (its regex drops the rest;
it would also drop negative coordinates, which are kept here).
The value is vIoU, the benchmark's headline; ``metadata["reward"]`` is EasyVideoR1's
0.5 * tIoU + 0.5 * sIoU from the same quantities.
"""

from __future__ import annotations

from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.rules import rule
from evalkit.scoring.rules._easyvideor1 import extract_answer, loads
from evalkit.scoring.types import Score

SOURCE = "appletea233/LLaVA-ST inference/src/metrics.py eval_stvg + inference/src/utils.py iou"


def llava_st_tiou(gt: tuple[float, float], pred: tuple[float, float]) -> float:
    """``temporal_iou(gt, pred)``: overlap over the hull; 0 where it would divide by 0."""
    max0, min0 = max(gt[0], pred[0]), min(gt[0], pred[0])
    max1, min1 = max(gt[1], pred[1]), min(gt[1], pred[1])
    hull = max1 - min0
    return 0.0 if hull == 0 else max(0.0, max(min1 - max0, 0.0) / hull)


def llava_st_iou(a: list[float], b: list[float]) -> float:
    """``iou``: signed areas, overlap clipped at 0, 0 when the union is 0."""
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = max(0.0, iw * ih)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union != 0 else 0.0


def _box(v: Any) -> list[float] | None:
    ok = isinstance(v, list) and len(v) == 4
    if not ok or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        return None
    return [float(x) for x in v]


def _span(v: Any) -> tuple[float, float] | None:
    if not isinstance(v, (list, tuple)) or len(v) != 2:
        return None
    try:
        return float(v[0]), float(v[1])
    except (TypeError, ValueError):
        return None


def _frame(k: str) -> str:
    try:
        return str(round(float(k)))
    except (ValueError, OverflowError):
        return k


def pred_boxes(raw: Any) -> dict[str, list[float]]:
    """Predicted boxes by whole-number frame key; malformed entries are dropped."""
    out: dict[str, list[float]] = {}
    if isinstance(raw, dict):
        for k, v in raw.items():
            box = _box(v)
            if box is not None:
                out[_frame(str(k))] = box
    return out


def _gold(target: Any) -> tuple[tuple[float, float] | None, dict[str, list[float]]]:
    if not isinstance(target, dict):
        return _span(target), {}
    raw = target.get("boxes")
    boxes = {str(k): b for k, v in raw.items() if (b := _box(v))} if isinstance(raw, dict) else {}
    return _span(target.get("time")), boxes


@rule("stvg", "spatiotemporal_grounding", source=SOURCE)
def stvg(prediction: str, target: Any, sample: Sample) -> Score:
    """LLaVA-ST's STVG per-sample vIoU (m_vIoU's unit), tIoU and sIoU in the metadata."""
    g_time, g_boxes = _gold(target)
    pred = loads(extract_answer(prediction, "spatial-temporal grounding"))
    zero = {"tiou": 0.0, "siou": 0.0, "viou": 0.0, "reward": 0.0}
    if not isinstance(pred, dict):
        return Score(0.0, None, "no JSON object in the reply", zero)
    p_time, p_boxes = _span(pred.get("time")), pred_boxes(pred.get("boxes"))
    tiou = llava_st_tiou(g_time, p_time) if g_time and p_time else 0.0
    common = set(g_boxes) & set(p_boxes)
    total = sum(llava_st_iou(g_boxes[k], p_boxes[k]) for k in common)
    siou = total / max(len(common), 1)
    viou = min(1.0, max(0.0, total / max(len(set(g_boxes) | set(p_boxes)), 1)))
    meta = {
        "tiou": tiou,
        "siou": siou,
        "viou": viou,
        "frames_matched": len(common),
        "reward": 0.5 * tiou + 0.5 * siou,
    }
    answer = {"time": list(p_time) if p_time else None, "boxes": len(p_boxes)}
    return Score(viou, answer, f"vIoU {viou:.3f}, tIoU {tiou:.3f}, sIoU {siou:.3f}", meta)
