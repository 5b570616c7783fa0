"""Shared pieces of the reasoning benchmarks' official rules (Video-Holmes, Video-MMMU, ...).

Not a rule module (the leading underscore keeps the registry from importing it as one).
"""

from __future__ import annotations

import re
from typing import Any

from evalkit.scoring.rules._mc import gold_letter as gold_letter  # re-exported for the rules
from evalkit.scoring.types import Score


def last_tagged(text: str, tag: str) -> str | None:
    """The stripped content of the LAST ``<tag>...</tag>`` (whitespace inside trimmed), or None."""
    found = re.findall(rf"<{tag}>\s*(.*?)\s*</{tag}>", text, re.DOTALL)
    return found[-1].strip() if found else None


def letter_verdict(got: str | None, gold: str, how: str, **meta: Any) -> Score:
    """1 if the extracted letter equals the gold letter exactly, else 0 (None = nothing found)."""
    info = {"format": 1.0 if got else 0.0, "extraction": how, "target": gold, **meta}
    if not got:
        return Score(0.0, None, f"no option letter ({how}); target {gold}", info)
    value = 1.0 if got == gold else 0.0
    return Score(value, got, f"letter {got} via {how}; target {gold}", info)


def not_counted(reason: str, **meta: Any) -> Score:
    """A reply the official aggregate leaves out of its denominator (reported unscored)."""
    return Score(None, None, reason, {"format": 0.0, **meta})
