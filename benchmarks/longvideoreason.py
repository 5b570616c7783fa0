"""LongVideo-Reason adapter: options out of the question text, the answer letter, and
whether the row's option block is intact.

The release writes the options as "X. text" lines after the question, sometimes out of
letter order ("D. ..." first). Five of its 1,000 rows are malformed (lmms-eval's
longvideo_reason README): in three the generator's own deliberation leaked into the
option block (extra lines, even a second "A. ..."), two have no options at all. Upstream
scores all 1,000, so they are kept: leaked lines are appended to the option before them,
a row without options gets none, and ``option_block`` says "malformed" for a breakdown.
"""

from __future__ import annotations

import re
from typing import Any

from evalkit.sample import OPTION_LETTERS

_OPTION = re.compile(r"^\s*([A-J])\s*[.:)]\s*(.*\S)\s*$")
_ANSWER = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.S)


def _split(problem: str) -> tuple[list[str], dict[str, str], bool]:
    question: list[str] = []
    options: dict[str, str] = {}
    last: str | None = None
    clean = True
    for line in problem.splitlines():
        m = _OPTION.match(line)
        if m and m.group(1) not in options:
            last = m.group(1)
            options[last] = m.group(2)
        elif last is not None and line.strip():
            options[last] += " " + line.strip()  # leaked text continues the last option
            clean = False
        elif line.strip():
            question.append(line.strip())
    return question, options, clean


def row(r: dict[str, Any]) -> dict[str, Any]:
    """Add ``question_text``, ``option_lines``, ``answer_letter`` and ``option_block``."""
    question, options, clean = _split(str(r["problem"]))
    letters = sorted(options)
    consecutive = letters == list(OPTION_LETTERS[: len(letters)])
    if consecutive:
        lines = [f"{k}. {options[k]}" for k in letters]  # the loader orders them by letter
    else:
        lines = [options[k] for k in letters]  # a gap: keep the texts in letter order
    m = _ANSWER.search(str(r["answer"]))
    intact = clean and consecutive and len(letters) >= 2
    return {
        **r,
        "question_text": "\n".join(question),
        "option_lines": lines,
        "answer_letter": (m.group(1) if m else str(r["answer"])).strip(),
        "option_block": "intact" if intact else "malformed",
    }
