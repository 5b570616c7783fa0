"""ODV-Bench's official scoring (MCG-NJU/StreamForest, lmms_eval/tasks/odvbench/utils.py
``odvbench_process_results`` / ``mcq_acc``).

Both the answer letter and the reply go through ``process``: a reply ``X. text``
(X in A-E) gives X; otherwise newlines/tabs become spaces, VQA-style punctuation is
removed or spaced, dots not followed by a digit are dropped (at most 32: ``re.UNICODE``
is passed as sub's count), quotes and brackets are stripped and the text lower-cased;
then the FIRST stand-alone letter a-e found is the answer (``Based on a clip, C`` reads
``A``), else the processed text itself. Right when both sides agree. An empty reply is
left out of the accuracy's denominator by ``odvbench_aggregate_results``: it scores 0
here with ``metadata["answered"] = False`` for the ``mean_answered`` aggregation.
"""

from __future__ import annotations

import re
from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.rules import rule
from evalkit.scoring.rules._options import exact_gold_letter, meta
from evalkit.scoring.types import Score

SOURCE = "MCG-NJU/StreamForest lmms_eval/tasks/odvbench/utils.py odvbench_process_results, mcq_acc"

# The VQA punctuation list of mcq_acc, in its order (the order matters: see _punctuation).
_PUNCT = list(';/[]"{}()=+\\_-><@`,?!')
_PERIOD = re.compile(r"(?!<=\d)(\.)(?!\d)")
_COMMA = re.compile(r"(\d)(\,)(\d)")
_OPTION = re.compile(r"^([A-E])\.\s*(.+)$", re.IGNORECASE)
_LETTER = re.compile(r"\b([A-E])\b", re.IGNORECASE)


def _punctuation(text: str) -> str:
    out = text
    for p in _PUNCT:
        # The test reads the ORIGINAL text, the replacement acts on the running copy.
        if (p + " " in text or " " + p in text) or _COMMA.search(text) is not None:
            out = out.replace(p, "")
        else:
            out = out.replace(p, " ")
    return _PERIOD.sub("", out, count=32)  # official: sub(.., re.UNICODE) -> count 32


def process(answer: str) -> str:
    """``mcq_acc.process``: the option letter a reply names, or its normalised text."""
    m = _OPTION.match(answer.strip())
    if m:
        return m.group(1).upper()
    text = answer.replace("\n", " ").replace("\t", " ").strip()
    text = _punctuation(text)
    text = text.strip("'").strip('"').strip(")").strip("(").strip().lower()
    letter = _LETTER.search(text)
    return letter.group(1).upper() if letter else text


@rule("odvbench", "multiple_choice", source=SOURCE)
def odvbench(prediction: str, target: Any, sample: Sample) -> Score:
    """Right when ``process`` gives the same letter for the reply and the answer (mcq_acc)."""
    gold = exact_gold_letter(target, sample)
    answered = prediction != ""
    got = process(prediction)
    if gold is None:  # the answer text is none of the candidates: the official scores 0
        return Score(
            0.0, got, f"target {target!r} is no option", meta(gold, answered, answered=answered)
        )
    ok = got == process(gold)
    return Score(
        1.0 if ok else 0.0, got, f"read {got!r} vs {gold}", meta(gold, answered, answered=answered)
    )
