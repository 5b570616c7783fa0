"""VCR-Bench adapter: answer form, the question without its embedded options, duration
group, and the reference rationale kept for the judged CoT score."""

from __future__ import annotations

from typing import Any


def _duration_group(seconds: float) -> str:
    # The groups of the benchmark's eval_code/cau_acc.py (accuracy by duration).
    if seconds <= 60:
        return "0-60"
    return "60-300" if seconds <= 300 else "300+"


def row(r: dict[str, Any]) -> dict[str, Any]:
    """Add ``answer_form`` (``choice`` / ``open``), ``duration_group`` and clean options.

    ``reasoning`` (the annotated step list) is checked to be a list of texts and kept
    for the CoT judge (``extra_metrics: ["cot_steps"]``, evalkit/scoring/judge.py).

    Open-ended rows ship ``choices`` with empty texts: they get no options and go to the
    LLM judge with the release's answer as the reference. Multiple-choice rows repeat
    their options at the end of ``question`` ("...?A. text\\nB. text"); the question is
    cut before them so the prompt lists the options once.
    """
    choices = r.get("choices") or {}
    is_choice = bool(r.get("multiple-choice")) and any(str(v).strip() for v in choices.values())
    question = str(r["question"])
    if is_choice:
        first = f"A. {str(choices.get('A', '')).strip()}"
        cut = question.find(first)
        if cut > 0:
            question = question[:cut].strip()
    steps = r.get("reasoning") or []
    if not isinstance(steps, list) or not all(isinstance(x, str) for x in steps):
        raise ValueError(f"reasoning must be a list of step texts, got {type(steps).__name__}")
    return {
        **r,
        "reasoning": steps,
        "extra_metrics": ["cot_steps"],
        "question": question,
        "answer_form": "choice" if is_choice else "open",
        "choices": choices if is_choice else [],
        "duration_group": _duration_group(float(r.get("duration") or 0)),
    }
