"""A test-only extraction rule, registered once at import under a name no benchmark has.

``sensitivity_test_last_letter``: the reply's LAST standalone capital A-F is its answer
(1.0 when it equals the target letter). It disagrees with evalkit's rule exactly where a
reply names several letters, which is what the sensitivity tests need.
"""

from __future__ import annotations

import re
from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.rules import rule
from evalkit.scoring.types import Score

LAST_LETTER = "sensitivity_test_last_letter"
TASK_TYPE = "multiple_choice"


@rule(LAST_LETTER, TASK_TYPE, source="tests/_sensitivity_rules.py")
def last_letter(prediction: str, target: Any, sample: Sample) -> Score:
    """The last standalone capital A-F of the reply."""
    letters = re.findall(r"\b([A-F])\b", prediction)
    if not letters:
        return Score(0.0, None, "no letter")
    return Score(float(letters[-1] == str(target)), letters[-1], "last letter")
