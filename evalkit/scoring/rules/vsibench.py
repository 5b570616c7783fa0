"""VSI-Bench's official scoring (vision-x-nyu/thinking-in-space,
lmms_eval/tasks/vsibench/utils.py ``vsibench_process_results``).

Both question kinds read ONLY the reply's first space-separated token, trailing dots
removed (``fuzzy_matching``): a multiple-choice reply is right when that token equals
the answer letter ignoring case (``exact_match``); a numeric reply is ``float()`` of that
token scored by Mean Relative Accuracy over thresholds 0.50, 0.55, .., 0.95
(``mean_relative_accuracy``), and 0 when the token is not a number. So ``"A."`` is right
but ``"(A)"`` and ``"The answer is A"`` are not, and ``"about 3.5 meters"`` reads
``about``: not a number, 0 — the number must come first.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evalkit.sample import Sample
from evalkit.scoring.rules import rule
from evalkit.scoring.rules._options import meta, need_exact_gold_letter
from evalkit.scoring.types import Score

SOURCE = "vision-x-nyu/thinking-in-space lmms_eval/tasks/vsibench/utils.py vsibench_process_results"


def first_token(reply: str) -> str:
    """``fuzzy_matching``: the text before the first space, trailing dots cut, stripped."""
    return reply.split(" ")[0].rstrip(".").strip()


def to_float(text: Any) -> float | None:
    """Python's ``float()`` of ``text`` (so ``1_000``, ``nan`` and ``1e3`` parse), or None."""
    try:
        return float(text)
    except (TypeError, ValueError, OverflowError):
        return None


def mra(
    pred: float, gold: float, start: float = 0.5, end: float = 0.95, step: float = 0.05
) -> float:
    """``mean_relative_accuracy``: share of thresholds θ with |p-g|/g <= 1-θ.

    The thresholds are built exactly as the official code builds them (the point count
    ``int((end - start) / step + 2)`` comes out as 10 in floating point), and g is not
    made positive, as there.
    """
    thresholds = np.linspace(start, end, int((end - start) / step + 2))
    return float(np.mean(abs(pred - gold) / gold <= 1 - thresholds))


@rule("vsibench", "multiple_choice", source=f"{SOURCE} (fuzzy_matching, exact_match)")
def vsibench_choice(prediction: str, target: Any, sample: Sample) -> Score:
    """Right when the first token, trailing dots cut, is the answer letter (any case)."""
    gold = need_exact_gold_letter(target, sample)
    token = first_token(prediction)
    ok = token.lower() == gold.lower()
    return Score(
        1.0 if ok else 0.0, token, f"first token {token!r} vs {gold}", meta(gold, bool(token))
    )


@rule(
    "vsibench", "regression", source=f"{SOURCE} (fuzzy_matching, to_float, mean_relative_accuracy)"
)
def vsibench_regression(prediction: str, target: Any, sample: Sample) -> Score:
    """MRA of ``float(first token)`` against the target; 0 when that token is no number."""
    gold = to_float(target)
    token = first_token(prediction)
    got = to_float(token)
    if got is None or gold is None:
        # The official code catches the TypeError of None and scores the worst case, 0.
        why = f"first token {token!r} is not a number" if got is None else "target not a number"
        return Score(0.0, got, why, meta(gold, got is not None))
    if gold == 0:
        raise ValueError(f"sample {sample.id!r}: target 0 (the official MRA divides by it)")
    value = mra(got, gold)
    return Score(value, got, f"MRA {value:.2f}: {got:g} vs {gold:g}", meta(gold, True))
