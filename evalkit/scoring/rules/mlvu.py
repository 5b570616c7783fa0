"""MLVU's official answer check (JUNJIE99/MLVU
evaluation/multiple_choice_evaluation/choice_bench.py ``check_ans``).

The official code opens the assistant turn with ``Best Option: (`` (the spec's
``assistant_prefix``) and checks only what the model generated after it:
evaluation_test/test_bench.py decodes ``output_ids[0, input_ids.shape[1]:]``. The rule
is given exactly that continuation (``evalkit.scoring.prefill``), so "B) a dog" reads B.

The gold letter is qa_template's (evaluation/multiple_choice_evaluation/choice_bench.py):
its loop over the candidates overwrites ``answer_idx`` at every candidate equal to the
answer, so of two equal options ("Three", "Three") the LAST is the right one; an answer
equal to none leaves -1, written "(@)", which no reply matches. The loader keeps the
first equal option as ``Sample.target`` (evalkit's robust rule reads that one); this rule
recomputes the official gold from ``fields["answer_text"]``.
"""

from __future__ import annotations

from typing import Any

from evalkit.bench.answers import NO_OPTION
from evalkit.sample import OPTION_LETTERS, Sample
from evalkit.scoring.rules import rule
from evalkit.scoring.rules._options import verdict
from evalkit.scoring.types import Score


def before_paren(reply: str) -> str:
    """The character just before the first ")", else the whole reply unchanged.

    After the official "Best Option: (" a continuation reads "B) ..."; nothing is
    stripped, so without a ")" only a reply that IS the letter matches, and a ")" at the
    very start leaves "" (Python's ``s[-1:0]``).
    """
    if ")" in reply:
        i = reply.index(")")
        return reply[i - 1 : i] if i > 0 else ""
    return reply


@rule(
    "mlvu",
    "multiple_choice",
    source="JUNJIE99/MLVU evaluation/multiple_choice_evaluation/choice_bench.py check_ans",
)
def mlvu(prediction: str, target: Any, sample: Sample) -> Score:
    """Character before the first ")" (or the whole reply), compared with == to the letter."""
    return verdict(
        before_paren(prediction), official_gold(target, sample), sample, 'char before first ")"'
    )


def official_gold(target: Any, sample: Sample) -> Any:
    """qa_template's gold letter: the last option equal to the answer text ("@" if none)."""
    answer = sample.fields.get("answer_text")
    if answer is None or not sample.options:
        return target  # a row mapped without its answer text: the loader's letter
    last = [i for i, o in enumerate(sample.options) if o == str(answer).strip()]
    return OPTION_LETTERS[last[-1]] if last else NO_OPTION
