"""A test-only extraction rule, registered for the tests that ask for it and gone afterwards.

``sensitivity_test_last_letter``: the reply's LAST standalone capital A-F is its answer
(1.0 when it equals the target letter). It disagrees with evalkit's rule exactly where a
reply names several letters, which is what the sensitivity tests need. The rule registry
is process-wide and other tests list what it holds, so the rule is registered by the
``last_letter_rule`` fixture (tests/conftest.py) for one test at a time, never at import.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from evalkit.sample import Sample
from evalkit.scoring import rules
from evalkit.scoring.types import Score

LAST_LETTER = "sensitivity_test_last_letter"
TASK_TYPE = "multiple_choice"


def last_letter(prediction: str, target: Any, sample: Sample) -> Score:
    """The last standalone capital A-F of the reply."""
    letters = re.findall(r"\b([A-F])\b", prediction)
    if not letters:
        return Score(0.0, None, "no letter")
    return Score(float(letters[-1] == str(target)), letters[-1], "last letter")


@contextmanager
def last_letter_registered() -> Iterator[str]:
    """:data:`LAST_LETTER` registered for multiple choice while the block runs."""
    rules.rule(LAST_LETTER, TASK_TYPE, source="tests/_sensitivity_rules.py")(last_letter)
    try:
        yield LAST_LETTER
    finally:
        rules.unregister(LAST_LETTER, TASK_TYPE)
