"""LongVideoBench's official answer extraction.

The benchmark's repository (longvideobench/LongVideoBench) ships only a dataset class and
names LMMs-Eval as its automatic evaluation; this reproduces
EvolvingLMMs-Lab/lmms-eval lmms_eval/tasks/longvideobench/utils.py
``parse_multi_choice_response`` as it has read since commit c0bc79f (2024-11, "fix on
LongVideoBench"; "same as original LongVideoBench paper"), with
``longvideobench_process_results`` / ``eval_multi_choice``.
"""

from __future__ import annotations

from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.rules import rule
from evalkit.scoring.rules._options import first_match, verdict
from evalkit.scoring.types import Score

PREFIXES = (
    "The best answer is",
    "The correct answer is",
    "The answer is",
    "The answer",
    "The best option is",
    "The correct option is",
    "Best answer:",
    "Best option:",
)


@rule(
    "longvideobench",
    "multiple_choice",
    source="EvolvingLMMs-Lab/lmms-eval lmms_eval/tasks/longvideobench/utils.py "
    "parse_multi_choice_response (the evaluation named by longvideobench/LongVideoBench)",
    gameable=True,
)
def longvideobench(prediction: str, target: Any, sample: Sample) -> Score:
    """First A-E capital after deleting answer phrases; none = a random option's odds.

    The official code answers a reply without a letter with ``random.choice`` over the
    question's options; here that guess is scored by its expectation, 1 / number of
    options, so a run is reproducible and the aggregate unbiased. Gameable: an empty
    reply earns that share. The letter class is A-E whatever the option count.
    """
    got = first_match(prediction, PREFIXES, "ABCDE")
    n = len(sample.options)
    odds = 1.0 / n if n else 0.0  # the official random guess, scored by its expectation
    guess = {"random_guess": True} if not got else None
    return verdict(got, target, sample, "first A-E after answer phrases", missing=odds, meta=guess)
