"""Video-MME's official answer extraction (MME-Benchmarks/Video-MME, README "Evaluation").

The README points to ``eval_your_results.py`` in github.com/thanku-all/parse_answer (the
copy in the Video-MME repository itself, evaluation/eval_your_results.py, was removed on
2024-06-18 in favour of it); this reproduces ``extract_characters_regex`` of its last
version (commit afd52cf) and the way ``eval_your_results`` counts a reply.
"""

from __future__ import annotations

from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.rules import rule
from evalkit.scoring.rules._options import first_match, verdict
from evalkit.scoring.types import Score

# Deleted from the reply before the letter search, in this order. The official list lacks
# two commas, so Python joins neighbouring literals: "The best option is", "The correct
# option is", "Best answer:" and "Best option:" are never deleted as such (a reply
# "Best option: C" then reads "B", from "Best"). The joined strings are written out.
PREFIXES = (
    "The best answer is",
    "The correct answer is",
    "The answer is",
    "The answer",
    "The best option isThe correct option is",
    "Best answer:Best option:",
    "Answer:",
    "Option:",
    "The correct answer",
    "The correct option",
)


@rule(
    "videomme",
    "multiple_choice",
    source="thanku-all/parse_answer eval_your_results.py extract_characters_regex "
    "(linked from MME-Benchmarks/Video-MME README)",
    gameable=True,
)
def videomme(prediction: str, target: Any, sample: Sample) -> Score:
    """First A-D capital after deleting answer phrases; no letter = not counted at all.

    ``eval_your_results`` adds a question to its "answered" count (the accuracy's
    denominator) only when a letter was extracted, so a reply without one is left out of
    the accuracy, not counted wrong: it scores None ("not scored"). That is why the rule
    is gameable (a model that abstains on hard questions scores higher). The letter is
    the first of A, B, C, D anywhere in the reply (a leading "Based on ..." reads "B"),
    compared case-sensitively with the answer letter.
    """
    got = first_match(prediction, PREFIXES, "ABCD")
    return verdict(got, target, sample, "first A-D after answer phrases", missing=None)
