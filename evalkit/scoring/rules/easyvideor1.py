"""EasyVideoR1's evaluation rule for every problem type its evaluation script scores.

Source: cyuQ1n/EasyVideoR1 (arXiv 2604.16893), eval/code/
AsyncLLMEngine_eval_videobench_qwen3vl_multi_task.py, ``reward_fn`` with ``extract_answer``.
One function dispatches on the row's own ``problem_type`` string, as ``reward_fn`` does:

- ``multiple choice``: the extracted letter must equal the target letter exactly;
- ``numerical``: both strings must agree on containing "." or "," (so "3" vs "3.0" is
  wrong and "1,000" counts as a decimal), then the numbers must agree to 2 decimals;
- ``regression``: MRA in float32 with a strict ``<`` (VSI-Bench's rule is ``<=``);
- ``REC`` (OVO-Bench counting): all digits of the answer joined must equal the target's;
- ``SSR`` / ``CRR`` (OVO-Bench yes/no): "Y"/"N" or the target word anywhere in the
  upper-cased answer ("NOT SURE" holds "NO");
- ``temporal grounding``: JSON ``time`` span IoU (union = hull; reversed spans score 0);
- ``spatial-temporal grounding``: 0.5 * tIoU + 0.5 * mean box IoU over the predicted keys
  present in the target (keys compared as strings); a target with no boxes is scored on
  tIoU alone.

Before scoring, ``extract_answer`` takes the ``<answer>`` body, else walks a ladder of
letter patterns (for every non-grounding type), else strips ``<think>`` blocks. When
nothing is extracted, the whole reply is used. Any other problem type (open-ended,
free-form, OCR, boolean rows that are not OVO-Bench's, spatial grounding, math, code)
falls through to 0 in ``reward_fn``; open-ended rows are re-scored by eval/code/
llm_judge.py afterwards. Those types are not registered under "easyvideor1": a rule that
is 0 whatever the reply says nothing about extraction.

Rule "easyvideor1_reward" covers three of them with EasyVideoR1's training reward
(examples/unified_rl/reward_function/: boolean.py, ocr.py, grounding.py
``spatial_reward``, with utils.py ``normalize_response`` and ``extract_answer``): the
``<answer>`` body, else the last ``\\boxed{}``, else the WHOLE reply, ``<think>``
included. Open-ended (ROUGE), math (mathruler) and code (its sandbox) are not reproduced.
"""

from __future__ import annotations

import re
from typing import Any

from evalkit import tasks
from evalkit.sample import Sample
from evalkit.scoring.rules import rule
from evalkit.scoring.rules._easyvideor1 import (
    extract_answer,
    iou_1d,
    iou_2d,
    json_from_text,
    loads,
    mean_iou_over_intersection,
    mean_relative_accuracy,
    normalize_number,
    normalize_response,
    reward_answer,
    word_error_rate,
)
from evalkit.scoring.types import Score

SOURCE = (
    "cyuQ1n/EasyVideoR1 eval/code/AsyncLLMEngine_eval_videobench_qwen3vl_multi_task.py "
    "reward_fn + extract_answer"
)

# evalkit task type -> the problem_type string reward_fn branches on, for samples that do
# not carry the row's own problem_type (specs other than unified files). Boolean takes the
# SSR/CRR branch, the script's only yes/no rule.
_DEFAULT = {
    "multiple_choice": "multiple choice",
    "numerical": "numerical",
    "regression": "regression",
    "boolean": "CRR",
    "temporal_grounding": "temporal grounding",
    "spatiotemporal_grounding": "spatial-temporal grounding",
}


def _question_type(sample: Sample) -> str:
    raw = sample.fields.get("problem_type")
    if isinstance(raw, str):
        return raw
    return _DEFAULT.get(tasks.canonical(sample.task_type), "")


def _gt_text(target: Any) -> str:
    # The script re-extracts the answer from the row's solution; evalkit keeps the parsed
    # target, whose text form gives the same string ("58", "2.1", "B", "Yes").
    if isinstance(target, bool):
        return "Yes" if target else "No"
    return str(target)


def _yes_no(answer: str, gt_ans: str, sample: Sample) -> float:
    if not answer:
        return 0.0
    upper = answer.strip().upper()
    if "ovo_type" in sample.fields:
        gt = "YES" if sample.fields["ovo_type"] == 1 else "NO"
    else:
        g = gt_ans.strip().upper()
        gt = "YES" if g in ("YES", "Y", "1") else "NO" if g in ("NO", "N", "0") else g
    if (upper == "N" and gt == "NO") or (upper == "Y" and gt == "YES"):
        return 1.0
    return 1.0 if gt in upper else 0.0


def _numerical(answer: str, gt_ans: str) -> float:
    if ("." in gt_ans or "," in gt_ans) != ("." in answer or "," in answer):
        return 0.0
    gt, got = normalize_number(gt_ans), normalize_number(answer)
    if gt is None or got is None:
        return 0.0
    return 1.0 if round(gt, 2) == round(got, 2) else 0.0


def _regression(answer: str, gt_ans: str) -> float:
    gt, got = normalize_number(gt_ans), normalize_number(answer)
    return 0.0 if gt is None or got is None else mean_relative_accuracy(got, gt)


def _rec(answer: str, gt_ans: str) -> float:
    digits, gt = "".join(re.findall(r"\d+", answer)), "".join(re.findall(r"\d+", gt_ans))
    return 1.0 if digits == gt and gt != "" else 0.0


def _gold_tube(target: Any) -> dict[str, Any]:
    # Unified Charades-STA targets are the bare [s, e]; the script reads {"time": ...}.
    if isinstance(target, dict):
        return target
    return {"time": list(target) if isinstance(target, (list, tuple)) else target}


def _grounding(answer: str, target: Any, qt: str) -> tuple[float, dict[str, Any]]:
    pred, gold = loads(answer), _gold_tube(target)
    if not isinstance(pred, dict):
        return 0.0, {"tiou": 0.0, "reason": "answer is not a JSON object"}
    tiou = iou_1d(pred.get("time"), gold.get("time"))
    meta: dict[str, Any] = {"tiou": tiou}
    if qt == "temporal grounding":
        return tiou, meta
    p_boxes, g_boxes = pred.get("boxes"), gold.get("boxes")
    if not isinstance(g_boxes, dict) or not g_boxes:
        meta.update(viou=0.0, scored_on="time only (target has no boxes)")
        return tiou, meta
    p_boxes = p_boxes if isinstance(p_boxes, dict) else {}
    box, common = mean_iou_over_intersection(p_boxes, g_boxes)
    either = len(set(p_boxes) | set(g_boxes))
    meta.update(
        box_iou=box,
        frames_matched=len(common),
        viou=sum(iou_2d(p_boxes[k], g_boxes[k]) for k in common) / either,
    )
    return 0.5 * tiou + 0.5 * box, meta


def _value(qt: str, answer: str, gt_ans: str, sample: Sample) -> tuple[float, dict[str, Any]]:
    if qt == "multiple choice":
        return (1.0 if answer.strip() == gt_ans.strip() else 0.0), {}
    if qt == "numerical":
        return _numerical(answer, gt_ans), {}
    if qt == "regression":
        return _regression(answer, gt_ans), {}
    if qt == "REC":
        return _rec(answer, gt_ans), {}
    if qt in ("SSR", "CRR"):
        return _yes_no(answer, gt_ans, sample), {}
    if qt in ("temporal grounding", "spatial-temporal grounding"):
        return _grounding(answer, sample.target, qt)
    return 0.0, {"reason": f"reward_fn has no branch for problem_type {qt!r} (scores 0)"}


# The yes/no branch is gameable: "yes no" holds both target words, so it always scores 1.
@rule("easyvideor1", "boolean", source=SOURCE, gameable=True)
@rule(
    "easyvideor1",
    "multiple_choice",
    "numerical",
    "regression",
    "temporal_grounding",
    "spatiotemporal_grounding",
    source=SOURCE,
)
def easyvideor1(prediction: str, target: Any, sample: Sample) -> Score:
    """EasyVideoR1's reward_fn: its extract_answer, then its per-problem-type comparison."""
    qt = _question_type(sample)
    answer = extract_answer(prediction, qt)
    if answer == "":
        answer = prediction  # reward_fn scores the whole reply when nothing was extracted
    gt_ans = extract_answer(_gt_text(target), qt)
    value, meta = _value(qt, answer, gt_ans, sample)
    meta.update(problem_type=qt, extracted=answer[:200], gold=gt_ans[:200])
    if qt in ("temporal grounding", "spatial-temporal grounding"):
        meta.setdefault("tiou", 0.0)
    return Score(value, answer, f"EasyVideoR1 {qt or '?'}: {value:.3f}", meta)


REWARD_SOURCE = "cyuQ1n/EasyVideoR1 examples/unified_rl/reward_function/{}"
_YES, _NO = ("yes", "true", "1"), ("no", "false", "0")


def _yn(text: str) -> str:
    low = text.lower().strip()
    return "yes" if low in _YES else "no" if low in _NO else low


@rule("easyvideor1_reward", "boolean", source=REWARD_SOURCE.format("boolean.py accuracy_reward"))
def reward_boolean(prediction: str, target: Any, sample: Sample) -> Score:
    """EasyVideoR1's training reward for yes/no: the answer equals the target word."""
    answer = reward_answer(normalize_response(prediction))
    value = 1.0 if _yn(answer) == _yn(reward_answer(_gt_text(target))) else 0.0
    return Score(value, answer, f"EasyVideoR1 reward boolean: {value:.0f}", {})


@rule("easyvideor1_reward", "ocr", source=REWARD_SOURCE.format("ocr.py accuracy_reward"))
def reward_ocr(prediction: str, target: Any, sample: Sample) -> Score:
    """EasyVideoR1's training reward for OCR: 1 - WER of the lower-cased words, in [0, 1]."""
    answer = reward_answer(normalize_response(prediction))
    wer = word_error_rate(reward_answer(_gt_text(target)).lower(), answer.lower())
    value = max(0.0, min(1.0, 1.0 - wer))
    return Score(value, answer, f"EasyVideoR1 reward OCR: WER {wer:.3f}", {"wer": wer})


@rule(
    "easyvideor1_reward",
    "spatial_grounding",
    source=REWARD_SOURCE.format("grounding.py spatial_reward"),
)
def reward_spatial(prediction: str, target: Any, sample: Sample) -> Score:
    """EasyVideoR1's training reward for a box: IoU of the JSON ``boxes`` with the target."""
    answer = reward_answer(normalize_response(prediction))
    pred = json_from_text(answer)
    gold = target.get("boxes", []) if isinstance(target, dict) else target
    if not isinstance(pred, dict):  # .get on a list or number raises there: 0
        return Score(0.0, answer, "no JSON object with boxes", {"iou": 0.0})
    iou = iou_2d(pred.get("boxes", []), list(gold) if isinstance(gold, tuple) else gold)
    return Score(iou, pred.get("boxes"), f"EasyVideoR1 reward box IoU {iou:.3f}", {"iou": iou})
