"""LongVideo-Reason adapter: options out of the question text (any letter order), answer letter."""

from __future__ import annotations

import re
from typing import Any

_OPTION = re.compile(r"^\s*([A-J])\s*[.:)]\s*(.*\S)\s*$")
_ANSWER = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.S)


def row(r: dict[str, Any]) -> dict[str, Any]:
    """Split ``problem`` into the question and its ``"X. ..."`` lines; unwrap ``answer``.

    Option lines are kept with their letters so the loader re-orders them by letter.
    """
    question: list[str] = []
    options: list[str] = []
    for line in str(r["problem"]).splitlines():
        if _OPTION.match(line):
            options.append(line.strip())
        elif line.strip():
            if options:
                raise ValueError(f"text after the options: {line.strip()[:40]!r}")
            question.append(line.strip())
    if len(options) < 2:
        raise ValueError("problem has fewer than two 'X. ...' option lines")
    m = _ANSWER.search(str(r["answer"]))
    letter = (m.group(1) if m else str(r["answer"])).strip()
    return {
        **r,
        "question_text": "\n".join(question),
        "option_lines": options,
        "answer_letter": letter,
    }
