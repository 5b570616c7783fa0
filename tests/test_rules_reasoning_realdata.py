"""Real EasyVideoR1 rows (reference data, skipped when absent): under each reasoning
benchmark's official (or harness) rule, the reply its prompt asks for scores 1 with the
right letter and 0 with another."""

from __future__ import annotations

import pytest

from evalkit.bench.unified import load_unified
from evalkit.scoring import score
from tests._realdata import REAL

# file, rule, the reply shape the benchmark's official prompt asks for
CASES = [
    ("holmes.json", "videoholmes", "<think>clues</think><answer>{}</answer>"),
    ("videommmu.json", "videommmu", "{}"),
    ("videomathqa.jsonl", "videomathqa", "{}"),
    ("longvideoreason.json", "longvideoreason", "<think>t</think><answer>{}</answer>"),
    ("mmvu-mc.json", "lmms_eval_mmvu", "{}"),
    ("minerva.json", "lmms_eval_minerva", "{}"),
]


@pytest.mark.realdata
@pytest.mark.skipif(not REAL.is_dir(), reason=f"real data folder absent: {REAL}")
@pytest.mark.parametrize(("name", "rule", "shape"), CASES)
def test_real_rows_score_the_right_letter_and_only_it(name: str, rule: str, shape: str) -> None:
    samples = [s for s in load_unified(REAL / name, video_root="/v") if s.options]
    assert samples
    for s in samples:
        wrong = next(x for x in s.letters if x != s.target)
        assert score(s, shape.format(s.target), rule=rule).value == 1.0, s.id
        assert score(s, shape.format(wrong), rule=rule).value == 0.0, s.id
