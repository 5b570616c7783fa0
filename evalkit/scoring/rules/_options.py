"""Option letters in the official rules: the gold letter of a row, an option's text, a
yes/no target, the Video-MME family's letter reading and its verdict, score metadata.
Not a rule module (the leading underscore keeps the registry from importing it as one).

Two gold letters, because the official rules that use them treat a bad row differently:

- :func:`lenient_gold_letter` (Video-MME, Video-MME-v2, LVBench, LongVideoBench and MLVU
  through :func:`verdict`; MMVU, Minerva, VideoMathQA, Video-Holmes, Video-MMMU): the
  target as evalkit's own multiple-choice rule reads it; it never fails (their loaders
  store letters; anything else is upper-cased and compares unequal);
- :func:`exact_gold_letter` (MVBench, TempCompass, VSI-Bench, OVO-Bench, ODV-Bench,
  LiveSports-3K-QA): a letter, or the text of an option matched exactly; None otherwise,
  and :func:`need_exact_gold_letter` turns that None into an error naming the sample.

The Video-MME family's scripts differ in how they read a letter, but they all compare it
with a single ground-truth letter by plain string equality (case-sensitive, no
normalisation), so that verdict is built here once (:func:`verdict`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from evalkit.sample import OPTION_LETTERS, Sample
from evalkit.scoring.choice import target_letter
from evalkit.scoring.types import Score


def lenient_gold_letter(target: Any, sample: Sample) -> str:
    """The target as evalkit's multiple-choice rule reads it: a letter, an option's text
    mapped to its letter, else the text upper-cased (never fails)."""
    return target_letter(target, sample)


def exact_gold_letter(target: Any, sample: Sample) -> str | None:
    """The right option's letter: the target itself (``"B"``, ``"b"``), or the letter of
    the option whose text equals the target; None when the target names neither."""
    text = str(target).strip()
    if len(text) == 1 and text.upper() in OPTION_LETTERS:
        return text.upper()
    for letter, option in zip(sample.letters, sample.options, strict=False):
        if option.strip() == text:
            return letter
    return None


def need_exact_gold_letter(target: Any, sample: Sample) -> str:
    """:func:`exact_gold_letter`, or a ValueError naming the sample (the row, not the reply,
    is wrong: the router reports it as "scorer failed" instead of a plausible 0)."""
    gold = exact_gold_letter(target, sample)
    if gold is None:
        raise ValueError(
            f"sample {sample.id!r}: target {target!r} is neither an option letter nor the "
            "text of one of its options; check the spec's mapping.target / target_kind"
        )
    return gold


def option_text(sample: Sample, letter: str) -> str:
    """The text of option ``letter`` ("" when the sample has no such option)."""
    i = OPTION_LETTERS.index(letter)
    return sample.options[i] if i < len(sample.options) else ""


def yes_no_target(target: Any) -> str | None:
    """``"Yes"`` / ``"No"`` for a yes/no target (bool, 1/0, "yes", "No", ...), else None."""
    if isinstance(target, bool):
        return "Yes" if target else "No"
    text = str(target).strip().lower()
    if text in ("yes", "1", "true", "y"):
        return "Yes"
    if text in ("no", "0", "false", "n"):
        return "No"
    return None


def meta(gold: Any, parsed: bool, **extra: Any) -> dict[str, Any]:
    """Score metadata: the target and ``format`` (1.0 when the rule read an answer)."""
    return {"target": gold, "format": 1.0 if parsed else 0.0, **extra}


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
    """Exact string comparison of the extracted answer with the (lenient) gold letter.

    ``got == ""`` means the official code found nothing; it then scores ``missing``
    (0, or None where the official accuracy leaves such replies out of its denominator).
    """
    gold = lenient_gold_letter(target, sample)
    info = {"target": gold, "extracted": got, "format": 1.0 if got else 0.0, **(meta or {})}
    if not got:
        why = "left out of the official accuracy" if missing is None else f"scores {missing:g}"
        return Score(missing, None, f"nothing extracted ({how}); {why}", info)
    value = 1.0 if got == gold else 0.0
    return Score(value, got, f"{got!r} via {how}; target {gold}", info)
