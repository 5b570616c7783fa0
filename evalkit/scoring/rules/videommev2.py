"""Video-MME-v2's official answer extraction (MME-Benchmarks/Video-MME-v2,
evaluation/test_video_mme_v2.py: ``extract_characters_regex_v2`` and ``evaluate``)."""

from __future__ import annotations

from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.rules import rule
from evalkit.scoring.rules._options import first_match, verdict
from evalkit.scoring.types import Score

PREFIXES = (
    "Final Answer:",
    "The best answer is",
    "The correct answer is",
    "The answer is",
    "The answer",
    "The best option is",
    "The correct option is",
    "Best answer:",
    "Best option:",
    "Answer:",
    "Option:",
)

# ``evaluate`` marks a reply without a letter -1 (right 1, wrong 0) and the group scoring
# then uses the mark as a number: it lowers a relevance group's count of right answers,
# and, being truthy, continues a logic chain as if right. The mark is kept here for the
# group aggregation (``group_nonlinear``); the question itself scores 0.
UNEXTRACTED_MARK = -1

# The official pipeline writes the replies to a TSV and scores what pandas reads back
# (``pd.read_csv(..., sep="\t")``): a reply that is exactly one of pandas' default NA
# strings becomes NaN there, hence no letter (-1), although "N/A" holds an A. The list is
# pandas' ``_libs.parsers.STR_NA_VALUES`` (pandas 2.x), the strings ``read_csv`` maps to NaN.
PANDAS_NA = frozenset(
    {"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN"}
    | {"<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"}
)


@rule(
    "videommev2",
    "multiple_choice",
    source="MME-Benchmarks/Video-MME-v2 evaluation/test_video_mme_v2.py "
    "extract_characters_regex_v2, evaluate",
    gameable=True,
)
def videommev2(prediction: str, target: Any, sample: Sample) -> Score:
    """First A-H capital after deleting answer phrases; no letter = wrong, marked -1.

    Gameable: under the official group score an unextractable reply (mark -1) counts as
    right inside a logic chain. A reply pandas reads back as NaN ("N/A", "NA", ...:
    ``PANDAS_NA``) has no letter, as in the official TSV round trip.
    """
    got = "" if prediction in PANDAS_NA else first_match(prediction, PREFIXES, "A-H")
    mark = {"official_mark": UNEXTRACTED_MARK} if not got else None
    return verdict(got, target, sample, "first A-H after answer phrases", meta=mark)
