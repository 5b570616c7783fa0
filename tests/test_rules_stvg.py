"""Rule "stvg": LLaVA-ST's STVG metrics on EasyVideoR1's JSON tubes, traced by hand.

Source traced: appletea233/LLaVA-ST inference/src/metrics.py eval_stvg (tIoU, sIoU over the
frames in both tubes, stIoU = vIoU over the frames in either) and inference/src/utils.py
temporal_iou / iou; predicted frame keys rounded as it rounds frame indices.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from evalkit.bench import get_benchmark, load
from evalkit.bench.aggregations import Scored
from evalkit.bench.aggregations.grounding import spatiotemporal_grounding
from evalkit.bench.unified import load_unified
from evalkit.sample import Sample
from evalkit.scoring import score
from tests._realdata import REAL as _REAL_DIR

BOX = [0, 0, 10, 10]
TUBE = {"time": [0.0, 10.0], "boxes": {"1": BOX, "2": BOX}}


def _s(target: Any = TUBE) -> Sample:
    return Sample(id="v", task_type="spatiotemporal_grounding", question="q", target=target)


def _reply(time: Any = (0, 10), boxes: Any = None) -> str:
    return json.dumps({"time": list(time) if time else None, "boxes": boxes or {}})


@pytest.mark.parametrize(
    ("boxes", "viou", "siou"),
    [
        ({"1": BOX, "2": BOX}, 1.0, 1.0),
        ({"1": BOX}, 0.5, 1.0),  # a missed frame counts in the union
        ({"1.0": BOX}, 0.5, 1.0),  # predicted keys rounded: "1.0" -> "1"
        ({"1.6": BOX}, 0.5, 1.0),  # -> "2"
        ({"2.5": BOX}, 0.5, 1.0),  # half to even -> "2"
        ({"0.5": BOX}, 0.0, 0.0),  # -> "0", not a target frame; union of 3
        ({"1": BOX, "2": BOX, "3": BOX}, 2 / 3, 1.0),  # an extra frame counts too
        ({"1": BOX, "2": [10, 10, 0, 0]}, 0.5, 0.5),  # reversed corners: no overlap
        ({"1": BOX, "3": "x", "4": [0, 0, 10]}, 0.5, 1.0),  # malformed boxes are dropped
        ({"1": [5, 0, 15, 10], "2": [5, 0, 15, 10]}, 1 / 3, 1 / 3),
    ],
)
def test_viou_and_siou(boxes: dict, viou: float, siou: float) -> None:
    got = score(_s(), _reply(boxes=boxes), rule="stvg")
    assert got.value == pytest.approx(viou) and got.metadata["viou"] == pytest.approx(viou)
    assert got.metadata["siou"] == pytest.approx(siou)
    assert got.metadata["reward"] == pytest.approx(0.5 + 0.5 * siou)  # tIoU is 1 here


@pytest.mark.parametrize(
    ("time", "tiou"),
    [((0, 10), 1.0), ((5, 10), 0.5), ((10, 0), 0.0), (None, 0.0), ((12, 20), 0.0)],
)
def test_tiou(time: Any, tiou: float) -> None:
    got = score(_s(), _reply(time=time, boxes={"1": BOX, "2": BOX}), rule="stvg")
    assert got.metadata["tiou"] == pytest.approx(tiou) and got.value == 1.0


def test_no_json_scores_zero_with_a_reason() -> None:
    got = score(_s(), "somewhere in the middle", rule="stvg")
    assert got.value == 0.0 and "no JSON" in got.explanation


def test_the_json_inside_think_is_taken_first_as_easyvideor1_does() -> None:
    reply = '<think>{"time": [20, 30]}</think>' + _reply(boxes={"1": BOX, "2": BOX})
    assert score(_s(), reply, rule="stvg").metadata["tiou"] == 0.0


def test_a_time_only_target_has_no_viou() -> None:
    got = score(_s({"time": [0.0, 10.0], "boxes": {}}), _reply(), rule="stvg")
    assert got.value == 0.0 and got.metadata["tiou"] == 1.0  # sum 0 / max(0, 1)


def test_stvg_is_the_spec_headline_and_reward_reads_the_metadata() -> None:
    spec = get_benchmark("stvg")
    assert spec.headline_rule("spatiotemporal_grounding") == "stvg"
    got = score(_s(), _reply(boxes={"1": BOX}), rule="stvg")
    res = spatiotemporal_grounding([Scored(_s(), got.value, got.metadata)])
    assert res.metrics["m_vIoU"] == pytest.approx(50.0)
    assert res.metrics["reward"] == pytest.approx(100.0)  # not the vIoU value


REAL = _REAL_DIR / "stvg.json"


@pytest.mark.realdata
@pytest.mark.skipif(not REAL.exists(), reason=f"real data absent: {REAL}")
def test_real_rows_parse_and_a_perfect_answer_scores_one_under_every_rule() -> None:
    samples = load_unified(REAL)
    assert samples
    for s in samples:
        start, end = s.target["time"]
        assert 0 <= start < end and s.target["boxes"], s.id
        perfect = "<answer>" + json.dumps(s.target) + "</answer>"
        for rule in ("evalkit", "easyvideor1", "stvg"):
            assert score(s, perfect, rule=rule).value == pytest.approx(1.0), (s.id, rule)


@pytest.mark.realdata
@pytest.mark.skipif(not REAL.exists(), reason=f"real data absent: {REAL}")
def test_real_rows_through_the_stvg_spec_score_one_when_perfect() -> None:
    spec = get_benchmark("STVG")
    samples = load(spec, REAL.parent, check_media=False)
    assert samples
    for s in samples:
        perfect = "<answer>" + json.dumps(s.target) + "</answer>"
        got = score(s, perfect, rule=spec.headline_rule(s.task_type))
        assert got.value == pytest.approx(1.0) and got.metadata["tiou"] == pytest.approx(1.0)
