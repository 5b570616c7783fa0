"""VCR-Bench adapter: a row with choices is multiple choice, one without is open-ended."""

from __future__ import annotations

from typing import Any


def row(r: dict[str, Any]) -> dict[str, Any]:
    """Add ``answer_form`` (``choice`` / ``open``); open rows get an empty option list.

    Open-ended answers (counts, spans, boxes written as text) go to the LLM judge; their
    target is kept as the release writes it.
    """
    choices = r.get("choices")
    has_choices = bool(choices) and choices not in ("", "[]", "{}")
    return {
        **r,
        "answer_form": "choice" if has_choices else "open",
        "choices": choices if has_choices else [],
    }
