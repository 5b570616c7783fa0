"""Routing by task type, reward and format, and the metrics over lists of scores."""

from __future__ import annotations

import math

import pytest

from evalkit.registry import RegistryError
from evalkit.sample import Sample
from evalkit.scoring import (
    Score,
    canonical_task_type,
    format_score,
    reward,
    score,
    scorer,
    task_types,
)
from evalkit.scoring import metrics as M

from ._scoring_helpers import sample

CANONICAL = [
    "multiple_choice", "boolean", "numerical", "regression", "temporal_grounding",
    "spatial_grounding", "spatiotemporal_grounding", "open_ended", "math", "ocr",
    "code_svg", "code_html", "code_python", "llm_judge",
]  # fmt: skip


def test_every_canonical_task_type_has_a_scorer() -> None:
    assert sorted(CANONICAL) == task_types()


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("multiple choice", "multiple_choice"),
        ("Temporal Grounding", "temporal_grounding"),
        ("spatial-temporal grounding", "spatiotemporal_grounding"),
        ("open-ended", "open_ended"),
        ("OCR", "ocr"),
        ("regression", "regression"),
        ("Numerical", "numerical"),
        ("math", "math"),
        ("boolean", "boolean"),
    ],
)
def test_easyvideor1_problem_types_map_to_canonical_names(alias: str, canonical: str) -> None:
    assert canonical_task_type(alias) == canonical


def test_an_unknown_task_type_gets_a_did_you_mean() -> None:
    with pytest.raises(RegistryError, match="did you mean 'temporal_grounding'"):
        canonical_task_type("temporal grouding")
    with pytest.raises(RegistryError, match="unknown task type"):
        score(sample("no_such_type"), "x")


def test_registering_a_task_type_twice_is_an_error() -> None:
    with pytest.raises(RegistryError, match="already registered"):
        scorer("multiple_choice")(lambda p, t, s: Score(0.0))


def test_a_new_task_type_is_one_registration() -> None:
    @scorer("test_only_exact", "test only exact match")
    def exact(prediction: str, target: object, s: Sample) -> Score:
        return Score(float(prediction.strip() == target), prediction, "exact")

    assert score(sample("Test-Only Exact Match", "x"), " x ").value == 1.0


def test_a_completion_object_is_accepted_as_the_prediction() -> None:
    from evalkit.engines.base import Completion

    got = score(sample("mc", "B", ["x", "y"]), Completion(request_id="r", texts=["B"]))
    assert got.value == 1.0


@pytest.mark.parametrize(
    ("prediction", "fmt"),
    [("<think>..</think><answer>B</answer>", 1.0), ("B", 0.5), ("no idea", 0.0)],
)
def test_format_score_levels(prediction: str, fmt: float) -> None:
    assert format_score(sample("multiple_choice", "B", ["x", "y"]), prediction) == fmt


def test_reward_weights_accuracy_and_format() -> None:
    s = sample("multiple_choice", "B", ["x", "y"])
    got = reward(s, "<answer>B</answer>")
    assert got == {"accuracy": 1.0, "format": 1.0, "overall": 1.0, "scorer_failed": 0.0}
    r = reward(s, "A", w_acc=0.8, w_fmt=0.2)
    assert r == {
        "accuracy": 0.0,
        "format": 0.5,
        "overall": pytest.approx(0.1),
        "scorer_failed": 0.0,
    }
    assert reward(sample("llm_judge", "x"), "y")["overall"] is None


def test_mean_with_standard_error_leaves_unscored_out() -> None:
    scores = [Score(1.0), Score(0.0), Score(1.0), Score(0.0), Score(None)]
    got = M.mean(scores)
    assert got["mean"] == 0.5 and got["n"] == 4 and got["n_unscored"] == 1
    assert got["stderr"] == pytest.approx(math.sqrt((4 * 0.25 / 3) / 4))
    assert math.isnan(M.mean([])["mean"])


def test_recall_at_iou_and_miou() -> None:
    scores = [Score(v, metadata={"tiou": v}) for v in (0.2, 0.4, 0.6, 0.8)]
    got = M.temporal_grounding_metrics(scores)
    assert got == {"R@0.3": 0.75, "R@0.5": 0.5, "R@0.7": 0.25, "mIoU": pytest.approx(0.5)}


def test_spatiotemporal_metrics_average_tiou_and_viou() -> None:
    scores = [
        Score(0.5, metadata={"tiou": 1.0, "viou": 0.6}),
        Score(0.0, metadata={"tiou": 0.0, "viou": 0.2}),
    ]
    got = M.spatiotemporal_metrics(scores)
    assert got["m_tIoU"] == 0.5 and got["m_vIoU"] == pytest.approx(0.4)
    assert got["vIoU@0.3"] == 0.5 and got["vIoU@0.5"] == 0.5


def test_breakdown_groups_by_any_sample_field() -> None:
    samples = [
        sample("mc", "A", ["x", "y"], duration="short"),
        sample("mc", "A", ["x", "y"], duration="long"),
        sample("mc", "A", ["x", "y"], duration="short"),
    ]
    scores = [Score(1.0), Score(0.0), Score(0.0)]
    got = M.breakdown(samples, scores, "duration")
    assert got["short"]["mean"] == 0.5 and got["long"]["mean"] == 0.0
    assert M.breakdown(samples, scores, "task_type", M.mra) == {"mc": pytest.approx(1 / 3)}
    with pytest.raises(KeyError, match="no field 'colour'"):
        M.group_by(samples, scores, "colour")


def test_a_named_scorer_overrides_the_task_type_routing() -> None:
    s = sample("open_ended", "12")
    assert score(s, "<answer>12.0</answer>", scorer_name="numerical").value == 1.0
