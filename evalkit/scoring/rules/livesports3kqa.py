"""LiveSports-3K-QA's official scoring (showlab/livecc,
evaluation/livesports3kqa/distributed_evaluate_livesports3kqa.py
``evaluate_livesports3kqa_results`` with evaluation/distributed_mcq_predictor.py).

LiveCC does not parse a reply: it renders the chat with the generation prompt, appends
``Answer:`` (``MCQDataset.data_collator``: ``text + self.answer_prefix``; the spec's
``assistant_prefix``) and picks the option whose letter token (the last token of ``: A``,
``: B``, ..) has the highest logit at the next position; a question is right when that
option string's FIRST CHARACTER is the answer letter. The generative reading of that
protocol: the first non-space character the model writes after ``Answer:`` is the
chosen letter, compared case-sensitively with the answer. The rule is given that
continuation (``evalkit.scoring.prefill``). `` A``, ``A: Squat`` and ``A.`` choose A;
``The answer is A`` chooses ``T`` and is wrong.
"""

from __future__ import annotations

from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.rules import rule
from evalkit.scoring.rules._options import meta, need_exact_gold_letter
from evalkit.scoring.types import Score

SOURCE = (
    "showlab/livecc evaluation/livesports3kqa/distributed_evaluate_livesports3kqa.py "
    "evaluate_livesports3kqa_results (+ evaluation/distributed_mcq_predictor.py mcq_predict)"
)


@rule("livesports3kqa", "multiple_choice", source=SOURCE)
def livesports3kqa(prediction: str, target: Any, sample: Sample) -> Score:
    """Right when the continuation's first non-space character is the answer letter."""
    gold = need_exact_gold_letter(target, sample)
    first = prediction.lstrip()[:1]
    ok = first == gold
    return Score(
        1.0 if ok else 0.0,
        first or None,
        f"first character {first!r} vs {gold}",
        meta(gold, bool(first)),
    )
