"""Helpers shared by the official rules of MVBench, TempCompass, VSI-Bench, OVO-Bench,
ODV-Bench and LiveSports-3K-QA (not a rule module: underscore modules are not loaded)."""

from __future__ import annotations

from typing import Any

from evalkit.sample import OPTION_LETTERS, Sample


def gold_letter(target: Any, sample: Sample) -> str | None:
    """The right option's letter: the target itself (``"B"``, ``"b"``), or the letter of
    the option whose text equals the target; None when the target names neither."""
    text = str(target).strip()
    if len(text) == 1 and text.upper() in OPTION_LETTERS:
        return text.upper()
    for letter, option in zip(sample.letters, sample.options, strict=False):
        if option.strip() == text:
            return letter
    return None


def need_gold_letter(target: Any, sample: Sample) -> str:
    """:func:`gold_letter`, or a ValueError naming the sample (the row, not the reply, is
    wrong: the router reports it as "scorer failed" instead of a plausible 0)."""
    gold = gold_letter(target, sample)
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
