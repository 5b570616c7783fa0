"""Rule "lmms_eval_charadessta" and the Charades-STA spec's headline choice.

Verdicts traced by hand through lmms-eval lmms_eval/tasks/charades_sta/utils.py
(extract_time, iou, _temporal_grounding_compute_metrics) for the target [2.0, 8.0].
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from evalkit.bench import get_benchmark
from evalkit.bench.unified import load_unified
from evalkit.sample import Sample
from evalkit.scoring import score
from evalkit.scoring.rules.charadessta import extract_time
from tests._realdata import REAL as _REAL_DIR

RULE = "lmms_eval_charadessta"


def _s(target: Any = (2.0, 8.0)) -> Sample:
    return Sample(id="c", task_type="temporal_grounding", question="q", target=list(target))


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ("The event happens in 2 - 8 seconds.", 1.0),  # (2) number range
        ("The event happens in 24.3 - 30.4 seonds.", 0.0),  # no overlap
        ("from 2 to 8", 1.0),  # "to" -> "-", no keyword: all sentences are candidates
        ("00:02 - 00:08", 1.0),  # (1) clock range
        ("0:00:02 - 0:00:08", 1.0),  # (1) h:mm:ss
        ("The event happens in 2–8", 1.0),  # en dash
        ("The event happens in 8 - 2 seconds", 1.0),  # ends put in order
        ("The event happens in 4 - 8 seconds", pytest.approx(4 / 6)),
        ("It starts at 2 and ends at 8.", 0.0),  # (4) one sentence: only its first number
        ("Start: 2\nEnd: 8", 1.0),  # (4) first number of each line, paired
        ("between 2 and 8 seconds", 0.0),  # (4) a single number: no span
        ("[2, 8]", 0.0),  # evalkit's plain-prompt answer: no dash, one first number
        ('{"start": 2, "end": 8}', 0.0),  # JSON: same
        ("The event happens in 2.5s - 8s", pytest.approx(5.5 / 6)),  # (5) "s" units
        ("<think>first guess 0 - 1</think> The event happens in 2 - 8", 0.0),  # think first
        ("A specific example is : 20.8 - 30.0 seconds. The event happens in 2 - 8", 1.0),
    ],
)
def test_lmms_eval_parser(reply: str, value: Any) -> None:
    got = score(_s(), reply, rule=RULE)
    assert got.value == value and got.metadata["tiou"] == value


def test_zero_length_hull_scores_zero() -> None:
    assert score(_s((5.0, 5.0)), "The event happens in 5 - 5", rule=RULE).value == 0.0


def test_a_stringified_target_is_read_as_lmms_eval_reads_its_key() -> None:
    sample = Sample(id="c", task_type="temporal_grounding", question="q", target="[2.0, 8.0]")
    assert score(sample, "happens in 2 - 8", rule=RULE).value == 1.0


def test_only_the_first_span_is_kept() -> None:
    assert extract_time("happens in 3 - 4, or 5 - 6") == [(3.0, 4.0)]
    assert extract_time("no numbers here") == []


def test_the_base_spec_headline_is_evalkit_and_the_lmms_eval_variant_its_rule() -> None:
    spec = get_benchmark("charadessta")
    assert spec.headline_rule("temporal_grounding") == "evalkit"  # Qwen's harness unknown
    lmms = spec.with_variant("lmms_eval")
    assert lmms.headline_rule("temporal_grounding") == RULE
    assert lmms.prompt.variant == "official" and lmms.generation.max_tokens == 50
    assert "seonds" in lmms.prompt.official["temporal_grounding"].template  # verbatim


def test_aggregation_is_r_at_iou_with_ge_and_miou() -> None:
    spec = get_benchmark("charadessta")
    assert spec.aggregation.name == "temporal_grounding"
    assert spec.aggregation.params["thresholds"] == [0.3, 0.5, 0.7]


REAL = _REAL_DIR / "charades_sta.json"


@pytest.mark.realdata
@pytest.mark.skipif(not REAL.exists(), reason=f"real data absent: {REAL}")
def test_real_rows_parse_and_a_perfect_answer_scores_one_under_every_rule() -> None:
    samples = load_unified(REAL)
    assert samples
    for s in samples:
        start, end = s.target
        assert 0 <= start < end, s.id
        perfect = {
            "evalkit": f"[{start}, {end}]",
            "easyvideor1": "<answer>" + json.dumps({"time": [start, end]}) + "</answer>",
            RULE: f"The event happens in {start} - {end} seconds.",
        }
        for rule, reply in perfect.items():
            assert score(s, reply, rule=rule).value == pytest.approx(1.0), (s.id, rule)
