"""MMVU: lmms-eval's rule-based multiple-choice check (traced by hand through
lmms_eval/tasks/mmvu/utils.py evaluate_with_rule_based), the headline choice and the
official prompts of yale-nlp/MMVU utils/constant.py."""

from __future__ import annotations

import pytest

from evalkit.bench.registry import get_benchmark
from evalkit.sample import Sample
from evalkit.scoring import score
from evalkit.scoring.rules import get_rule
from tests._official_prompts import render_official

_OPTIONS = ["mitosis", "meiosis", "binary fission", "budding", "osmosis"]


def _mc(target: str = "B") -> Sample:
    return Sample(
        id="m1",
        task_type="multiple_choice",
        question="Which process?",
        options=_OPTIONS,
        target=target,
    )


CASES = [
    ("B", "B", 1.0),  # first stand-alone letter
    ("The answer is B.", "B", 1.0),
    ("a cell divides; answer B", "B", 1.0),  # first letter is the article "a"; B stands alone
    ("A", "B", 0.0),
    ("A B C D E", "B", 1.0),  # every letter listed: always right (gameable)
    ("It is meiosis", "B", 1.0),  # the answer option's text
    ("cell biology", "B", 0.0),  # B only inside "biology", no option word
    ("cells split by fission", "C", 1.0),  # the C of "cells" + the option word "fission"
    ("The answer is (b)", "B", 1.0),  # case-insensitive
    ("I'd say a", "D", 1.0),  # the "d" of "I'd" is the first stand-alone letter
    ("", "B", 0.0),
    ("None of them", "E", 0.0),  # E only inside words, "osmosis" absent
    ("budding, probably", "D", 1.0),  # option text
    ("Meiosis.", "B", 1.0),  # option text, case-insensitive
]


@pytest.mark.parametrize(("reply", "target", "value"), CASES)
def test_lmms_eval_mmvu_matches_evaluate_with_rule_based(
    reply: str, target: str, value: float
) -> None:
    assert score(_mc(target), reply, rule="lmms_eval_mmvu").value == value


def test_lmms_eval_mmvu_is_marked_gameable_and_logs_the_first_capital_letter() -> None:
    assert get_rule("lmms_eval_mmvu", "multiple_choice").gameable
    assert score(_mc(), "x C then B", rule="lmms_eval_mmvu").answer == "C"


def test_mmvu_headline_stays_evalkit_because_the_official_grader_is_a_judge() -> None:
    # acc_evaluation.py has GPT-4o judge every answer: no closed-form official rule.
    assert get_benchmark("MMVU").headline_rule("multiple_choice") == "evalkit"


_COT_TAIL = (
    "Begin by explaining your reasoning process clearly. Conclude by stating the final "
    "answer using the following format: "
)
_LINES = "A: mitosis\nB: meiosis\nC: binary fission\nD: budding\nE: osmosis"


def test_official_cot_prompt_multiple_choice() -> None:
    expected = (
        f"\nQuestion: Which process?\n{_LINES}\n\nAnswer the given multiple-choice question "
        f"step by step. {_COT_TAIL}'Therefore, the final answer is: $LETTER' (without "
        "quotes), where $LETTER is one of the options. Think step by\nstep before answering."
    )
    assert render_official("MMVU", "multiple_choice", _mc()) == expected
    assert get_benchmark("MMVU").prompt.official["multiple_choice"].thinking


def test_official_cot_prompt_open_ended() -> None:
    s = Sample(id="o1", task_type="open_ended", question="Name it.", target="meiosis")
    expected = (
        f"\nQuestion: Name it.\n\nAnswer the given question step by step. {_COT_TAIL}"
        "'Therefore, the final answer is: 'Answer: $ANSWER' (without quotes), where $ANSWER "
        "is the final answer of the question. Think step by step\nbefore answering."
    )
    assert render_official("MMVU", "open_ended", s) == expected


def test_official_direct_prompts() -> None:
    mc = render_official("MMVU", "multiple_choice", _mc(), variant="direct")
    assert mc == (
        f"\nQuestion: Which process?\n{_LINES}\n\nDo not generate any intermediate reasoning "
        "process. Answer directly with the option letter from the given choices.\n"
    )
    s = Sample(id="o1", task_type="open_ended", question="Name it.", target="meiosis")
    assert render_official("MMVU", "open_ended", s, variant="direct") == (
        "\nQuestion: Name it.\n\nDo not generate any intermediate reasoning process. "
        "Directly output the final short answer.\n"
    )
