"""OVO-Bench adapter: one Sample per question or per forward-active probe.

Backward and real-time rows are multiple-choice questions asked at ``realtime``. A
forward row is exploded (``test_info``) into probes, each asked at its own ``realtime``:
REC asks how many times an activity has happened so far (a count), SSR whether a given
step is being carried out, CRR whether the clues to answer the question have appeared
(yes / no from the probe's ``type``). The wording is ours; the facts are the benchmark's.
``probe_text`` keeps what the official prompt templates (constant.py) fill in: the
question, REC's activity, SSR's step, CRR's question.
"""

from __future__ import annotations

from typing import Any

CATEGORIES = {
    **dict.fromkeys(("EPM", "ASI", "HLD"), "backward"),
    **dict.fromkeys(("STU", "OJR", "ATR", "ACR", "OCR", "FPD"), "realtime"),
    **dict.fromkeys(("REC", "SSR", "CRR"), "forward"),
}


def row(r: dict[str, Any]) -> dict[str, Any]:
    """Add ``category``, ``probe_id``, ``probe_question``, ``probe_options``,
    ``probe_answer``, ``probe_text`` and ``answer_form``."""
    task = str(r["task"])
    if task not in CATEGORIES:
        raise ValueError(f"unknown task {task!r} (known: {', '.join(CATEGORIES)})")
    out = {**r, "category": CATEGORIES[task]}
    if CATEGORIES[task] != "forward":
        return {
            **out,
            "probe_id": f"{r['id']}",
            "probe_question": r["question"],
            "probe_options": r["options"],
            "probe_answer": r["gt"],
            "probe_text": r["question"],
            "answer_form": "choice",
        }
    # Probes are numbered by their place in test_info: two SSR probes may share a time.
    probe = {**out, "probe_id": f"{r['id']}/{r['_explode_index']}", "probe_options": []}
    if task == "REC":
        return {
            **probe,
            "probe_question": f"How many times have they done this so far: {r['activity']}?",
            "probe_answer": int(r["count"]),
            "probe_text": r["activity"],
            "answer_form": "count",
        }
    answer = "Yes" if int(r["type"]) == 1 else "No"
    if task == "SSR":
        question = f"Is this step being carried out right now: {r['step']}?"
        text = r["step"]
    else:
        question = f"Has the video so far shown enough to answer this question: {r['question']}"
        text = r["question"]
    return {
        **probe,
        "probe_question": question,
        "probe_answer": answer,
        "probe_text": text,
        "answer_form": "yes_no",
    }
