"""Grounding: temporal spans, boxes, and boxes over time (spatio-temporal tubes).

Assumed shapes (document of record):
- temporal target ``[start, end]`` in seconds; the prediction may be JSON
  (``{"start": s, "end": e}`` or ``[s, e]``), "12.5 - 20 seconds", or ``mm:ss`` stamps.
  A reversed predicted span is swapped (and scores half on format).
- spatial target ``[x1, y1, x2, y2]`` in the same coordinate system the prompt asked for
  (pixels of the frame as shown to the model); the prediction may be Qwen's
  ``{"bbox_2d": [...]}``, a bare list, or four numbers. When ``sample.fields`` has
  ``width`` and ``height``, both boxes are clipped to the frame first. A box with
  x2 < x1 or y2 < y1 is invalid and overlaps nothing (IoU 0, with the reason): corners
  are never reordered, as in EasyVideoR1's ``iou_2d`` and LLaVA-ST's ``iou``, where such
  a box has zero overlap.
- spatio-temporal target ``{"time": [s, e], "boxes": {"<frame or time key>": box}}``
  (EasyVideoR1's STVG shape). Keys are strings; numeric keys are compared as numbers
  ("3" == "3.0"). The prediction is a JSON object of the same shape. A target with no
  boxes (``"boxes": {}``) is scored on its time span alone, as EasyVideoR1's reward_fn
  does (``metadata["scored_on"] == "time"``).
"""

from __future__ import annotations

import math
import re
from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.extract import Span, final_span, format_level, json_object
from evalkit.scoring.numeric import numbers
from evalkit.scoring.types import Score

Interval = tuple[float, float]
Box = tuple[float, float, float, float]


def temporal_iou(a: Interval, b: Interval) -> float:
    """1-D IoU of two [start, end] spans; two identical zero-width spans give 1.

    Source: Charades-STA (Gao et al., TALL, ICCV 2017) "R@n, IoU=m": intersection over
    union of predicted and ground-truth moments.
    """
    s1, e1 = sorted(a)
    s2, e2 = sorted(b)
    inter = max(0.0, min(e1, e2) - max(s1, s2))
    union = (e1 - s1) + (e2 - s2) - inter
    if union <= 0:
        return 1.0 if (s1, e1) == (s2, e2) else 0.0
    return min(1.0, inter / union)


def box_valid(box: Box) -> bool:
    """True unless the corners are reversed (x2 < x1 or y2 < y1)."""
    return box[2] >= box[0] and box[3] >= box[1]


def box_iou(a: Box, b: Box) -> float:
    """IoU of two [x1, y1, x2, y2] boxes; a box with reversed corners scores 0.

    A zero-area box overlaps nothing (0), except an identical one (1), as for spans.
    Reversed corners are not reordered: EasyVideoR1 (eval script ``iou_2d``) and LLaVA-ST
    (inference/src/utils.py ``iou``) give such a box zero overlap, and reordering would
    credit a reply that got the box format wrong.

    Source: standard detection IoU (PASCAL VOC / RefCOCO Acc@0.5 uses the same ratio).
    """
    if not (box_valid(a) and box_valid(b)):
        return 0.0
    ax1, ay1, ax2, ay2 = a
    bx1, by1, bx2, by2 = b
    iw = max(0.0, min(ax2, bx2) - max(ax1, bx1))
    ih = max(0.0, min(ay2, by2) - max(ay1, by1))
    inter = iw * ih
    union = (ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1) - inter
    if union <= 0 or not math.isfinite(union):
        return 1.0 if (ax1, ay1, ax2, ay2) == (bx1, by1, bx2, by2) and union == 0 else 0.0
    return min(1.0, inter / union)


# --- parsing ---------------------------------------------------------------------------

_CLOCK = re.compile(r"(?<![\d:])(?:(\d{1,2}):)?(\d{1,2}):(\d{2}(?:\.\d+)?)(?![\d:])")


def _seconds(text: str) -> list[float]:
    # "00:12 - 01:05" -> [12, 65]; otherwise plain numbers.
    stamps = _CLOCK.findall(text)
    if stamps:
        return [int(h or 0) * 3600 + int(m) * 60 + float(s) for h, m, s in stamps]
    return numbers(text, limit=8)


def _floats(value: Any, n: int) -> tuple[float, ...] | None:
    # map() rather than generator expressions: this runs for every box of every tube
    if not isinstance(value, (list, tuple)) or len(value) < n:
        return None
    try:
        got = tuple(map(float, value[:n]))
    except (TypeError, ValueError):
        return None
    return got if all(map(math.isfinite, got)) else None


def parse_span(text: str) -> Interval | None:
    """A predicted [start, end] from JSON or text, or None."""
    obj = json_object(text)
    if isinstance(obj, dict):
        lower = {str(k).lower(): v for k, v in obj.items()}
        for keys in (("start", "end"), ("start_time", "end_time"), ("begin", "end")):
            if all(k in lower for k in keys):
                got = _floats([lower[keys[0]], lower[keys[1]]], 2)
                if got:
                    return got[0], got[1]
        for key in ("time", "span", "timestamps", "segment"):
            got = _floats(lower.get(key), 2)
            if got:
                return got[0], got[1]
    got = _floats(obj, 2)
    if got:
        return got[0], got[1]
    nums = _seconds(text)
    return (nums[0], nums[1]) if len(nums) >= 2 else None


def parse_box(value: Any) -> Box | None:
    """A box from a list, a dict with a bbox key, or text with four numbers."""
    if isinstance(value, dict):
        for key in ("bbox_2d", "bbox", "box", "bounding_box"):
            if key in value:
                return parse_box(value[key])
        return None
    if isinstance(value, list) and value and isinstance(value[0], (dict, list)):
        return parse_box(value[0])  # [{"bbox_2d": ...}] or [[x1, y1, x2, y2]]
    got = _floats(value, 4)
    if got:
        return got[0], got[1], got[2], got[3]
    if isinstance(value, str):
        obj = json_object(value)
        if obj is not None:
            return parse_box(obj)
        nums = numbers(value, limit=8)
        return (nums[0], nums[1], nums[2], nums[3]) if len(nums) >= 4 else None
    return None


def _clip(box: Box, sample: Sample) -> Box:
    w, h = sample.fields.get("width"), sample.fields.get("height")
    if not isinstance(w, (int, float)) or not isinstance(h, (int, float)):
        return box
    x1, y1, x2, y2 = box
    return (min(max(x1, 0), w), min(max(y1, 0), h), min(max(x2, 0), w), min(max(y2, 0), h))


def _fmt(span: Span, parsed: bool, reversed_: bool = False) -> float:
    return format_level(span, parsed) * (0.5 if reversed_ else 1.0)


# --- scorers ---------------------------------------------------------------------------


def temporal_grounding(prediction: str, target: Any, sample: Sample) -> Score:
    """tIoU of the predicted [start, end] with the target (Charades-STA / ActivityNet)."""
    span = final_span(prediction)
    got = parse_span(span.text)
    gold = _floats(target, 2)
    meta: dict[str, Any] = {"format": _fmt(span, got is not None), "tiou": 0.0}
    if got is None:
        return Score(0.0, None, f"no [start, end] found ({span.method})", meta)
    if gold is None:
        return Score(0.0, list(got), f"target {target!r} is not [start, end]", meta)
    reversed_ = got[0] > got[1]
    if reversed_:
        got = (got[1], got[0])
    iou = temporal_iou(got, (gold[0], gold[1]))
    meta.update(tiou=iou, reversed=reversed_, format=_fmt(span, True, reversed_))
    return Score(iou, list(got), f"tIoU {iou:.3f} via {span.method}", meta)


def spatial_grounding(prediction: str, target: Any, sample: Sample) -> Score:
    """Box IoU of the predicted box with the target box."""
    span = final_span(prediction)
    got = parse_box(span.text)
    gold = parse_box(target)
    meta: dict[str, Any] = {"format": _fmt(span, got is not None), "iou": 0.0}
    if got is None:
        return Score(0.0, None, f"no box found ({span.method})", meta)
    if gold is None:
        return Score(0.0, list(got), f"target {target!r} is not a box", meta)
    if not box_valid(got):
        meta["invalid_box"] = True
        return Score(0.0, list(got), f"invalid box {list(got)}: x2 < x1 or y2 < y1", meta)
    iou = box_iou(_clip(got, sample), _clip(gold, sample))
    meta["iou"] = iou
    return Score(iou, list(got), f"IoU {iou:.3f} via {span.method}", meta)


def _key(k: Any) -> str:
    try:
        return f"{float(k):g}"
    except (TypeError, ValueError):
        return str(k).strip()


def _tube(obj: Any) -> tuple[Interval | None, dict[str, Box]]:
    if not isinstance(obj, dict):
        return None, {}
    t = _floats(obj.get("time"), 2)
    boxes: dict[str, Box] = {}
    raw = obj.get("boxes")
    if isinstance(raw, dict):
        for k, v in list(raw.items())[:10_000]:
            b = parse_box(v) if not isinstance(v, str) else None
            if b is not None:
                boxes[_key(k)] = b
    return ((t[0], t[1]) if t else None), boxes


def spatiotemporal_grounding(prediction: str, target: Any, sample: Sample) -> Score:
    """0.5·tIoU + 0.5·mean box IoU over frames present in both (EasyVideoR1 STVG reward).

    A target without boxes is scored on tIoU alone (EasyVideoR1's reward_fn returns the
    tIoU there): halving it would cap a perfect answer at 0.5.
    ``metadata`` also carries ``tiou`` and ``viou`` for the standard m_tIoU / m_vIoU
    (HC-STVG, Tang et al. 2021: vIoU = sum of box IoUs over frames in both tubes divided
    by the number of frames in either; here the frame sets are the boxes' keys).
    """
    span = final_span(prediction)
    p_time, p_boxes = _tube(json_object(span.text))
    g_time, g_boxes = _tube(target)
    parsed = p_time is not None or bool(p_boxes)
    meta: dict[str, Any] = {"format": _fmt(span, parsed), "tiou": 0.0, "viou": 0.0}
    if not parsed:
        return Score(0.0, None, f"no {{time, boxes}} object found ({span.method})", meta)
    tiou = temporal_iou(p_time, g_time) if p_time and g_time else 0.0
    answer = {"time": list(p_time) if p_time else None, "boxes": len(p_boxes)}
    if not g_boxes:
        meta.update(tiou=tiou, scored_on="time", reason="target has no boxes: time span only")
        meta["format"] = _fmt(span, parsed) * (1.0 if p_time is not None else 0.5)
        return Score(tiou, answer, f"tIoU {tiou:.3f}, target has no boxes ({span.method})", meta)
    common = sorted(set(p_boxes) & set(g_boxes))
    ious = [box_iou(_clip(p_boxes[k], sample), _clip(g_boxes[k], sample)) for k in common]
    invalid = [k for k in common if not box_valid(p_boxes[k])]
    mean_box = sum(ious) / len(ious) if ious else 0.0
    either = len(set(p_boxes) | set(g_boxes))
    viou = sum(ious) / either if either else 0.0
    value = 0.5 * tiou + 0.5 * mean_box
    full = p_time is not None and bool(p_boxes)
    meta.update(tiou=tiou, viou=viou, box_iou=mean_box, frames_matched=len(common))
    meta.update(scored_on="time+boxes", format=_fmt(span, parsed) * (1.0 if full else 0.5))
    note = ""
    if invalid:
        meta["invalid_boxes"] = invalid
        note = f"; {len(invalid)} box(es) with x2 < x1 or y2 < y1 score 0"
    why = f"tIoU {tiou:.3f}, box IoU {mean_box:.3f}{note} ({span.method})"
    return Score(min(1.0, value), answer, why, meta)
