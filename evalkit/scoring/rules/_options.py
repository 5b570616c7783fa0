"""Shared pieces of the official multiple-choice rules (Video-MME, Video-MME-v2, LVBench,
LongVideoBench, MLVU, MotionBench, VideoMathQA, and the gold letter of the reasoning
benchmarks' rules); imported explicitly, not a rule module itself.

Those evaluation scripts differ in how they read a letter, but they all compare it with a
single ground-truth letter by plain string equality (case-sensitive, no normalisation),
so the verdict is built here once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.choice import _target_letter
from evalkit.scoring.types import Score


def gold_letter(target: Any, sample: Sample) -> str:
    """The target as an option letter (the loaders already store letters)."""
    return _target_letter(target, sample)


def strip_phrases(text: str, phrases: Sequence[str]) -> str:
    """Delete every occurrence of each phrase, in order, case-sensitively (``str.replace``)."""
    for phrase in phrases:
        text = text.replace(phrase, "")
    return text


def first_match(reply: str, phrases: Sequence[str], letters: str) -> str:
    """The Video-MME family's reading: strip the reply, delete the answer phrases, then the
    first character of the class ``letters`` (e.g. ``"ABCD"``) anywhere in what is left,
    or ``""``.

    The scripts also return ``""`` early for a reply of more than ten words without such
    a letter; the search that follows returns ``""`` for it anyway, so no separate test.
    """
    text = strip_phrases(reply.strip(), phrases)
    m = re.search(f"[{letters}]", text)
    return m.group(0) if m else ""


def verdict(
    got: str,
    target: Any,
    sample: Sample,
    how: str,
    *,
    missing: float | None = 0.0,
    meta: dict[str, Any] | None = None,
) -> Score:
    """Exact string comparison of the extracted answer with the target letter.

    ``got == ""`` means the official code found nothing; it then scores ``missing``
    (0, or None where the official accuracy leaves such replies out of its denominator).
    """
    gold = gold_letter(target, sample)
    info = {"target": gold, "extracted": got, "format": 1.0 if got else 0.0, **(meta or {})}
    if not got:
        why = "left out of the official accuracy" if missing is None else f"scores {missing:g}"
        return Score(missing, None, f"nothing extracted ({how}); {why}", info)
    value = 1.0 if got == gold else 0.0
    return Score(value, got, f"{got!r} via {how}; target {gold}", info)
