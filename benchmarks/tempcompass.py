"""TempCompass adapter: caption-matching rows list their options as labelled lines.

The official rule (eval_caption_matching.py ``eval_rule``) reads the labels ("Caption A",
"Option 2"): the original option lines and answer stay in ``option_lines`` and
``answer_line`` for it (the spec maps them into ``Sample.fields``).
"""

from __future__ import annotations

import re
from typing import Any

# "Caption A: ...", "Sentence B: ...", "Option 1: ..." (the three labelings the release uses)
_LINE = re.compile(r"^(Caption|Sentence|Option) ([A-Z]|\d+): (.*)$")


def caption_matching(r: dict[str, Any]) -> dict[str, Any]:
    """Split the option lines off the question and turn the answer label into a letter
    (the original lines and answer kept as ``option_lines`` / ``answer_line``)."""
    first, *rest = str(r["question"]).split("\n")
    labels, texts = [], []
    for line in rest:
        m = _LINE.match(line.strip())
        if not m:
            raise ValueError(f"caption-matching line {line!r} is not 'Caption X: text'")
        labels.append(f"{m.group(1)} {m.group(2)}")
        texts.append(m.group(3).strip())
    label = str(r["answer"]).split(":")[0].strip()
    if label not in labels:
        raise ValueError(f"answer {r['answer']!r} names none of {labels}")
    letter = "ABCDEFGHIJ"[labels.index(label)]
    return {
        **r,
        "question": first,
        "options": texts,
        "answer": letter,
        "option_lines": rest,
        "answer_line": str(r["answer"]),
        "released_question": str(r["question"]),
    }
