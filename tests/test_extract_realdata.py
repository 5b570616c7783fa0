"""The robust rule reads answers to real benchmark questions (EasyVideoR1 annotation rows).

Real option lists have 4-10 options, long captions starting with "A ...", numbers, and
option texts made of letters ("C, E, G" in VideoMMMU). For every multiple-choice row, the
gold option written back in the forms models use must read as the gold letter.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evalkit.bench.unified import load_unified
from evalkit.sample import Sample
from evalkit.scoring import score


def _realdata() -> Path:
    env = os.environ.get("EVALKIT_REALDATA")
    base = Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "realdata"
    if not env and not base.is_dir():  # a worktree of the checkout sits one level deeper
        base = Path(__file__).resolve().parents[3] / "shared" / "realdata"
    return base / "easyvideor1"


REAL = _realdata()
FILES = sorted(REAL.glob("*.json*")) if REAL.is_dir() else []


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
