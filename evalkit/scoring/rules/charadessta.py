"""Charades-STA as lmms-eval scores it: "s - e" timestamps read out of free text.

Source: EvolvingLMMs-Lab/lmms-eval lmms_eval/tasks/charades_sta/utils.py (commit 75571cf,
Aug 2026): ``extract_time``, ``_time_to_seconds``, ``iou`` and
``_temporal_grounding_compute_metrics`` (R@1 at IoU 0.3/0.5/0.7 with ``>=``, and mIoU,
over all queries, an unreadable reply counting IoU 0). Earlier versions did the same in
tasks/charades_sta/eval_tvg.py, run by hand on the dumped submissions.

Its parser, traced: the whole reply (``<think>`` included) is lower-cased, the prompt's
example sentence removed and every "to" replaced by "-" ("from 2 to 7" -> "2 - 7",
"toward" -> "-ward"); it is split into sentences at ``!``, ``?`` and newlines (not at
"."); the sentences holding "start", "end" or "happen" (substrings: "attend" counts) are
the candidates, else all sentences. Then, first hit wins: (1) ``m:ss - m:ss`` clock
ranges in the first candidate that has one; (2) ``a - b`` number ranges likewise; (3) all
clock stamps of all candidates, paired; (4) the FIRST number of each candidate, paired
(so "starts at 5 and ends at 9" on one line gives one number and no span); (5) ``as - bs``
with an "s" unit. Only the first span is kept, its ends put in order. Nothing found ->
IoU 0. IoU divides by the hull of the two spans (0 when that is not positive).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.rules import rule
from evalkit.scoring.types import Score

SOURCE = "EvolvingLMMs-Lab/lmms-eval lmms_eval/tasks/charades_sta/utils.py extract_time + iou"

_PROMPT_EXAMPLE = "a specific example is : 20.8 - 30.0 seconds"
_KEYWORDS = ("starts", "ends", "happens in", "start time", "end time", "start", "end", "happen")
_CLOCK = r"\d{1,2}:\d{2}(?::\d{2})?"
_CLOCK_RANGE = re.compile(rf"\b({_CLOCK})\s*[–-]\s*({_CLOCK})\b")
# Its patterns, each with a ``(?<!\d)`` guard added in front: unguarded, a run of digits
# costs time quadratic in its length (every start inside the run rescans it: 16k digits,
# 47 s). A match never starts inside a digit run (one starting there also matches from
# the run's start, which is tried first, and no match ends inside a run), so ``findall``
# returns the same (tests/test_scoring_linear_rules.py checks both on the same inputs).
_RANGE = re.compile(r"(?<!\d)(\d+(?:\.\d+)?)\s*[–-]\s*(\d+(?:\.\d+)?)")
_NUMBER = re.compile(r"\b(\d+(?:\.\d+)?)\b")
_CLOCK_ONE = re.compile(rf"\b({_CLOCK})\b")
# (and the first ``\s*`` possessive: giving spaces back to the second one cannot change
# a match, but trying to is quadratic in a run of spaces after a number)
_RANGE_S = re.compile(r"(?<!\d)(\d+(?:\.\d+)?)\s*+s?\s*[–-]\s*(\d+(?:\.\d+)?)\s*s?")
# Every pattern above needs a digit, so a sentence without one can give nothing: such
# sentences are dropped before any pattern runs (a reply of 64k newlines is 64k empty
# sentences, each tried five times otherwise). No keyword holds a separator, so "some
# sentence holds a keyword" is "the text holds one", asked once.
_HAS_DIGIT = re.compile(r"\d")
_SENTENCE_END = re.compile(r"[!?\n]")

Span = tuple[float, float]


def clock_seconds(stamp: str) -> float:
    """``h:mm:ss`` or ``m:ss`` in seconds."""
    parts = [float(p) for p in stamp.split(":")]
    if len(parts) == 3:
        return parts[0] * 3600 + parts[1] * 60 + parts[2]
    return parts[0] * 60 + parts[1]


def _first_ranges(
    candidates: list[str], pattern: re.Pattern[str], conv: Callable[[str], float]
) -> list[Span]:
    for sentence in candidates:
        hits = pattern.findall(sentence)
        if hits:
            return [(conv(a), conv(b)) for a, b in hits]
    return []


def _pairs(times: list[float]) -> list[Span]:
    times = times[: len(times) // 2 * 2]
    return [(times[i], times[i + 1]) for i in range(0, len(times), 2)]


def extract_time(reply: str) -> list[Span]:
    """lmms-eval's ``extract_time``: at most one (start, end) span, ends in order."""
    text = reply.lower().replace(_PROMPT_EXAMPLE, "").replace("to", "-")
    sentences = list(filter(_HAS_DIGIT.search, _SENTENCE_END.split(text)))
    if any(k in text for k in _KEYWORDS):
        candidates = [s for s in sentences if any(k in s for k in _KEYWORDS)]
    else:
        candidates = sentences
    spans = _first_ranges(candidates, _CLOCK_RANGE, clock_seconds)
    if not spans:
        spans = _first_ranges(candidates, _RANGE, float)
    if not spans:
        spans = _pairs([clock_seconds(t) for s in candidates for t in _CLOCK_ONE.findall(s)])
    if not spans:
        firsts = [_NUMBER.findall(s) for s in candidates]
        spans = _pairs([float(f[0]) for f in firsts if f])
    if not spans:
        spans = _first_ranges(candidates, _RANGE_S, float)
    return [(a, b) if b > a else (b, a) for a, b in spans[:1]]


def lmms_iou(gt: Span, pred: Span) -> float:
    """lmms-eval's ``iou``: overlap over the hull of both spans, 0 if the hull is empty."""
    max0, min0 = max(gt[0], pred[0]), min(gt[0], pred[0])
    max1, min1 = max(gt[1], pred[1]), min(gt[1], pred[1])
    denom = max1 - min0
    return 0.0 if denom <= 0 else max(min1 - max0, 0.0) / denom


def _gold(target: Any) -> Span | None:
    # its _parse_ground_truth: literal_eval of the stringified timestamp, then float()
    try:
        raw = ast.literal_eval(target) if isinstance(target, str) else target
        if isinstance(raw, dict):
            raw = raw.get("time")
        return float(raw[0]), float(raw[1])
    except (ValueError, TypeError, IndexError, KeyError, SyntaxError):
        return None


@rule("lmms_eval_charadessta", "temporal_grounding", source=SOURCE)
def lmms_eval_charadessta(prediction: str, target: Any, sample: Sample) -> Score:
    """lmms-eval's Charades-STA parser: the first "s - e" span of the reply, hull IoU."""
    gold = _gold(target)
    if gold is None:
        return Score(0.0, None, f"target {target!r} is not [start, end]", {"tiou": 0.0})
    spans = extract_time(prediction)
    if len(spans) != 1:
        return Score(0.0, None, "no start - end span found (lmms-eval: IoU 0)", {"tiou": 0.0})
    iou = min(1.0, lmms_iou(gold, spans[0]))
    return Score(iou, list(spans[0]), f"tIoU {iou:.3f} (lmms-eval extract_time)", {"tiou": iou})
