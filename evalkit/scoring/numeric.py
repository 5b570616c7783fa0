"""Numbers: parsing model output, numerical answers with tolerance, and MRA regression."""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

import numpy as np

from evalkit.sample import Sample
from evalkit.scoring.extract import Span, final_span, format_level
from evalkit.scoring.types import Score

_UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
    "seventy": 70, "eighty": 80, "ninety": 90, "a": 1, "an": 1, "half": 0.5,
}  # fmt: skip
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 10**9}
_WORD_TOKEN = re.compile(r"[A-Za-z]+")
# 1,234.5 | -3/4 | 2.5e3 | .5 | 45% ; thousands separators need groups of exactly 3.
_NUM = re.compile(
    r"(?<![\w.])([-+−]?)(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|\.\d+)"
    r"(?:\s*/\s*(\d+(?:\.\d+)?))?(\s*%)?"
)


def _word_numbers(text: str) -> list[tuple[int, float]]:
    """(position, value) of number phrases: "twelve", "one hundred and twenty-three"."""
    out: list[tuple[int, float]] = []
    run_start, total, current, in_run, last = 0, 0.0, 0.0, False, ""
    for m in _WORD_TOKEN.finditer(text):
        w, prev = m.group(0).lower(), last
        last = w
        # "a"/"an" are numbers only inside a phrase ("a hundred"), never alone.
        is_num = w in _SCALES or (w in _UNITS and (w not in ("a", "an") or in_run))
        if w in ("a", "an") and not in_run:
            nxt = text[m.end() : m.end() + 10].lower().split()
            is_num = bool(nxt) and nxt[0] in _SCALES
        if is_num:
            if not in_run:
                run_start, total, current, in_run = m.start(), 0.0, 0.0, True
            if w in _UNITS:
                current += _UNITS[w]
            else:
                current = max(current, 1) * _SCALES[w]
                if _SCALES[w] >= 1000:
                    total, current = total + current, 0.0
        elif in_run and not (w == "and" and prev in _SCALES):  # "hundred and five"
            out.append((run_start, total + current))
            in_run = False
    if in_run:
        out.append((run_start, total + current))
    return out


def numbers(text: str, limit: int = 64) -> list[float]:
    """Numbers in ``text`` in order of appearance (digits, fractions, %, number words).

    ``x%`` parses to ``x`` (the number as written); ``3/4`` to 0.75.
    """
    found: list[tuple[int, float]] = []
    for m in _NUM.finditer(text):
        sign, num, den, _pct = m.groups()
        try:
            value = float(num.replace(",", ""))
            if den is not None:
                value = float(Fraction(num.replace(",", "")) / Fraction(den))
        except (ValueError, ZeroDivisionError, OverflowError):
            continue
        if math.isfinite(value):
            found.append((m.start(), -value if sign in ("-", "−") else value))
        if len(found) >= limit:
            break
    if len(found) < limit and re.search(r"[a-z]", text, re.I):
        found.extend(_word_numbers(text))
    found.sort(key=lambda x: x[0])
    return [v for _, v in found[:limit]]


def parse_target(target: Any) -> float | None:
    """The target as a float (numbers, numeric strings, "3/4", "1,200", words)."""
    if isinstance(target, bool):
        return None
    if isinstance(target, (int, float)):
        return float(target) if math.isfinite(target) else None
    got = numbers(str(target))
    return got[0] if got else None


def answer_number(prediction: str) -> tuple[float | None, Span]:
    """The predicted number and the span it came from.

    In a marked span (answer tag, boxed, "the answer is") the FIRST number is the answer
    ("12 meters, roughly"); in unmarked free text the LAST one is (reasoning comes first).
    """
    span = final_span(prediction)
    got = numbers(span.text)
    if not got:
        return None, span
    return (got[0] if span.marked else got[-1]), span


def _number_pair(prediction: str, target: Any) -> tuple[float, float, Span, dict[str, Any]] | Score:
    """(answer, target, span, meta), or the zero Score when either is not a number."""
    gold = parse_target(target)
    got, span = answer_number(prediction)
    meta: dict[str, Any] = {"format": format_level(span, got is not None), "target": gold}
    if got is None:
        return Score(0.0, None, f"no number found ({span.method})", meta)
    if gold is None:
        return Score(0.0, got, f"target {target!r} is not a number", meta)
    return got, gold, span, meta


# Rule: |p - g| <= max(abs_tol, rel_tol * |g|) — the usual numeric-answer check
# (EasyVideoR1 "numerical" reward compares parsed floats; tolerance is a parameter here,
# overridable per sample by fields "abs_tol" / "rel_tol").
def numerical(
    prediction: str, target: Any, sample: Sample, rel_tol: float = 1e-4, abs_tol: float = 1e-6
) -> Score:
    """1 if the predicted number is within tolerance of the target, else 0."""
    rel = float(sample.fields.get("rel_tol", rel_tol))
    ab = float(sample.fields.get("abs_tol", abs_tol))
    pair = _number_pair(prediction, target)
    if isinstance(pair, Score):
        return pair
    got, gold, span, meta = pair
    ok = abs(got - gold) <= max(ab, rel * abs(gold))
    return Score(1.0 if ok else 0.0, got, f"{got:g} vs {gold:g} via {span.method}", meta)


# The official code builds θ with np.linspace(0.5, 0.95, 10) and compares with <=; the
# same float thresholds are used here so borderline cases (|p-g|/|g| == 0.05) agree.
MRA_THRESHOLDS = tuple(float(t) for t in np.linspace(0.50, 0.95, 10))


def mean_relative_accuracy(pred: float, gold: float) -> float:
    """VSI-Bench MRA: mean over θ in {0.50, 0.55, ..., 0.95} of 1[|p-g|/|g| <= 1-θ].

    Source: Yang et al., "Thinking in Space" (VSI-Bench), Sec. 3 "Mean Relative Accuracy",
    and its evaluation code (lmms_eval/tasks/vsibench/utils.py, mean_relative_accuracy:
    ``abs_dist_norm <= 1 - conf_intervs``; the paper writes <). The official code divides
    by g; for g = 0 (undefined there) we score 1 only for an exact 0, else 0; a negative g
    uses |g|.
    """
    if not (math.isfinite(pred) and math.isfinite(gold)):
        return 0.0
    if gold == 0:
        return 1.0 if pred == 0 else 0.0
    rel = abs(pred - gold) / abs(gold)
    return sum(rel <= 1 - t for t in MRA_THRESHOLDS) / len(MRA_THRESHOLDS)


def regression(prediction: str, target: Any, sample: Sample) -> Score:
    """Mean Relative Accuracy (VSI-Bench) of the predicted number against the target."""
    pair = _number_pair(prediction, target)
    if isinstance(pair, Score):
        return pair
    got, gold, span, meta = pair
    value = mean_relative_accuracy(got, gold)
    return Score(value, got, f"MRA {value:.2f}: {got:g} vs {gold:g} via {span.method}", meta)
