"""Reasoning replies in the official rules (Video-Holmes, Video-MMMU, VideoMathQA, Minerva):
the last ``<tag>...</tag>``, the letter verdict, a reply left out of the denominator.

Not a rule module (the leading underscore keeps the registry from importing it as one).
"""

from __future__ import annotations

from typing import Any

from evalkit.scoring.types import Score


def last_tagged(text: str, tag: str) -> str | None:
    """The stripped content of the LAST ``<tag>...</tag>`` (whitespace inside trimmed), or None.

    The official scripts' ``re.findall(rf"<{tag}>\\s*(.*?)\\s*</{tag}>", text, re.DOTALL)[-1]
    .strip()``, as a scan: each opening tag pairs with the first closing tag after it, the
    next search starts after that closing tag. The pattern itself takes time polynomial in
    a whitespace run after an unclosed tag (``<answer>`` + 8k newlines: minutes); this is
    linear, with the same result (tests/test_scoring_linear_rules.py checks both).
    """
    opening, closing = f"<{tag}>", f"</{tag}>"
    found = None
    i = text.find(opening)
    while i != -1:
        j = text.find(closing, i + len(opening))
        if j == -1:
            break
        found = text[i + len(opening) : j]
        i = text.find(opening, j + len(closing))
    return found.strip() if found is not None else None


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
