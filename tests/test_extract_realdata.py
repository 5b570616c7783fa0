"""The robust rule reads answers to real benchmark questions (EasyVideoR1 annotation rows).

Real option lists have 4-10 options, long captions starting with "A ...", numbers, and
option texts made of letters ("C, E, G" in VideoMMMU). For every multiple-choice row, the
gold option written back in the forms models use must read as the gold letter.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evalkit.bench.unified import load_unified
from evalkit.sample import Sample
from evalkit.scoring import score
from tests._realdata import REAL, REAL_FILES

FILES = REAL_FILES


def _replies(gold: str, text: str) -> list[str]:
    return [
        f"{gold}. {text}",
        f"The answer is ({gold}) {text}.",
        f"**{gold}**",
        f"<think>Looking at the options, {text} fits.</think>\n<answer>{gold}</answer>",
        f"Let me think about it. The video supports this option. Therefore, the answer is {gold}.",
    ]


@pytest.mark.realdata
@pytest.mark.skipif(not FILES, reason=f"real annotation rows not found at {REAL}")
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_gold_option_written_back_reads_as_its_letter(path: Path) -> None:
    samples = [s for s in load_unified(path) if s.task_type == "multiple_choice"]
    if not samples:
        pytest.skip(f"{path.name} has no multiple-choice rows")
    wrong = []
    for s in samples:
        gold = str(s.target)
        text = s.options[s.letters.index(gold)]
        replies = _replies(gold, text)
        if sum(o.strip().lower() == text.strip().lower() for o in s.options) == 1:
            replies.append(text)  # the option text alone, when no other option has it
        for reply in replies:
            got = score(Sample(**{**s.model_dump(), "fields": {}}), reply).answer
            if got != gold:
                wrong.append(f"{s.id}: {reply[:80]!r} -> {got} (gold {gold})")
    assert not wrong, "\n".join(wrong)
