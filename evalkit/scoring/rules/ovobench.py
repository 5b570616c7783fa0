"""OVO-Bench's official scoring (JoeLeelyf/OVO-Bench, utils/OVOBenchScore.py,
``OVOBenchOfflineScore``).

Substring tests on the raw reply, case-sensitive: a backward / real-time question is
right when the answer LETTER occurs anywhere in the reply (``int(gt in response)``: a
reply naming every letter is always right, and ``Based on..`` contains ``B``); an SSR /
CRR probe is right when the reply is exactly ``Y`` / ``N`` for a yes / no probe, or
contains ``Yes`` / ``No`` (``Not sure`` contains ``No``; lower-case ``yes`` does not
count); a REC probe is right when ALL the digits of the reply, joined, spell the count
(``3 times`` -> ``3``; ``1, 2, 3: 3`` -> ``1233``, wrong).
"""

from __future__ import annotations

import re
from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.rules import rule
from evalkit.scoring.rules._options import meta, need_exact_gold_letter, yes_no_target
from evalkit.scoring.types import Score

SOURCE = "JoeLeelyf/OVO-Bench utils/OVOBenchScore.py OVOBenchOfflineScore"


@rule(
    "ovobench",
    "multiple_choice",
    source=f"{SOURCE}.calculate_score_backward_realtime",
    gameable=True,
)
def ovobench_choice(prediction: str, target: Any, sample: Sample) -> Score:
    """Right when the answer letter occurs anywhere in the reply (case-sensitive)."""
    gold = need_exact_gold_letter(target, sample)
    ok = gold in prediction
    why = f"{gold!r} {'occurs' if ok else 'does not occur'} in the reply"
    return Score(1.0 if ok else 0.0, gold if ok else None, why, meta(gold, ok))


@rule("ovobench", "boolean", source=f"{SOURCE}.calculate_score_forward (SSR, CRR)", gameable=True)
def ovobench_yes_no(prediction: str, target: Any, sample: Sample) -> Score:
    """Right for a bare ``Y``/``N`` matching the probe, or when ``Yes``/``No`` occurs in it."""
    gold = yes_no_target(target)
    if gold is None:
        raise ValueError(f"sample {sample.id!r}: target {target!r} is not yes / no")
    if prediction in ("Y", "N"):
        ok = prediction == gold[0]
        return Score(
            1.0 if ok else 0.0, prediction, f"bare {prediction} vs {gold}", meta(gold, True)
        )
    ok = gold in prediction
    why = f"{gold!r} {'occurs' if ok else 'does not occur'} in the reply"
    return Score(1.0 if ok else 0.0, gold if ok else None, why, meta(gold, ok))


@rule("ovobench", "numerical", source=f"{SOURCE}.calculate_score_forward (REC)")
def ovobench_count(prediction: str, target: Any, sample: Sample) -> Score:
    """Right when the reply's digits, all joined, equal the count as written."""
    if isinstance(target, float) and target.is_integer():
        target = int(target)  # the release's counts are JSON integers
    digits = "".join(re.findall(r"\d+", prediction))
    ok = digits == str(target)
    return Score(
        1.0 if ok else 0.0,
        digits or None,
        f"digits {digits!r} vs {target}",
        meta(target, bool(digits)),
    )
