"""Routing by task type, reward and format."""

from __future__ import annotations

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


def test_a_named_scorer_overrides_the_task_type_routing() -> None:
    s = sample("open_ended", "12")
    assert score(s, "<answer>12.0</answer>", scorer_name="numerical").value == 1.0
