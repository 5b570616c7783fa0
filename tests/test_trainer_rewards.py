"""Rewards: weighted accuracy + format from the scorer, DAPO's overlong penalty, per-key tensors."""

from __future__ import annotations

import pytest
import torch

import evalkit.scoring
from evalkit.sample import Sample
from evalkit.trainer.config import RewardsConfig
from evalkit.trainer.rewards import compute_rewards, overlong_penalty
from tests._registered import task_type


def stand_in_reward(sample, prediction, w_acc=0.9, w_fmt=0.1):
    """A local stand-in with evalkit.scoring.reward's signature (test only)."""
    fmt = float(prediction.startswith("<answer>") and prediction.endswith("</answer>"))
    answer = prediction.removeprefix("<answer>").removesuffix("</answer>").strip()
    acc = float(answer == sample.target)
    return {"accuracy": acc, "format": fmt, "overall": w_acc * acc + w_fmt * fmt}


def _sample(i, target="B"):
    return Sample(
        id=f"s{i}", task_type="multiple_choice", question="?", target=target, options=["x", "y"]
    )


@pytest.mark.parametrize(
    ("length", "expected"),
    [(0, 0.0), (80, 0.0), (85, -0.25), (90, -0.5), (100, -1.0), (101, -1.0), (10_000, -1.0)],
)
def test_overlong_penalty_is_linear_over_the_buffer(length, expected):
    assert overlong_penalty(length, max_length=100, buffer=20) == pytest.approx(expected)


def test_overlong_penalty_factor_scales_it():
    assert overlong_penalty(90, 100, 20, factor=0.5) == pytest.approx(-0.25)


def test_overlong_buffer_must_fit_the_length():
    with pytest.raises(ValueError, match="buffer"):
        overlong_penalty(10, max_length=10, buffer=20)


def test_rewards_are_weighted_accuracy_plus_format_per_key():
    cfg = RewardsConfig(w_acc=0.8, w_fmt=0.2)
    preds = ["<answer>B</answer>", "<answer>A</answer>", "B"]
    out = compute_rewards(
        [_sample(i) for i in range(3)], preds, [3, 3, 1], cfg, 100, stand_in_reward
    )
    torch.testing.assert_close(out.per_key["accuracy"], torch.tensor([1.0, 0.0, 1.0]))
    torch.testing.assert_close(out.per_key["format"], torch.tensor([1.0, 1.0, 0.0]))
    torch.testing.assert_close(out.overall, torch.tensor([1.0, 0.2, 0.8]))
    assert "overlong" not in out.per_key
    assert out.metrics()["reward/accuracy"] == pytest.approx(2 / 3)


def test_overlong_penalty_is_added_to_overall_and_kept_as_a_key():
    cfg = RewardsConfig.model_validate({"overlong": {"enable": True, "buffer": 20}})
    preds = ["<answer>B</answer>"] * 2
    out = compute_rewards([_sample(0), _sample(1)], preds, [50, 90], cfg, 100, stand_in_reward)
    torch.testing.assert_close(out.per_key["overlong"], torch.tensor([0.0, -0.5]))
    torch.testing.assert_close(out.overall, torch.tensor([1.0, 0.5]))


def test_overlong_max_length_setting_overrides_the_budget():
    cfg = RewardsConfig.model_validate(
        {"overlong": {"enable": True, "buffer": 10, "max_length": 60}}
    )
    out = compute_rewards([_sample(0)], ["x"], [55], cfg, 1000, stand_in_reward)
    assert out.per_key["overlong"].item() == pytest.approx(-0.5)


def test_a_reward_function_missing_keys_names_the_sample():
    with pytest.raises(ValueError, match=r"s0.*format"):
        compute_rewards(
            [_sample(0)],
            ["x"],
            [1],
            RewardsConfig(),
            10,
            lambda s, p, **kw: {"accuracy": 1.0, "overall": 1.0},
        )


def test_an_unscorable_sample_is_an_error_not_a_zero_reward():
    def no_judge(sample, prediction, **kw):
        return {"accuracy": None, "format": 1.0, "overall": None}

    with pytest.raises(ValueError, match=r"'s0'.*could not be scored"):
        compute_rewards([_sample(0)], ["x"], [1], RewardsConfig(), 10, no_judge)


def test_length_mismatch_is_reported():
    with pytest.raises(ValueError, match="same length"):
        compute_rewards([_sample(0)], ["x", "y"], [1, 1], RewardsConfig(), 10, stand_in_reward)


def test_default_reward_is_evalkits_scorer():
    samples = [_sample(0), _sample(1)]
    preds = ["<answer>B</answer>", "The answer is A"]
    expected = [
        evalkit.scoring.reward(s, p, w_acc=0.7, w_fmt=0.3)
        for s, p in zip(samples, preds, strict=True)
    ]
    out = compute_rewards(samples, preds, [5, 5], RewardsConfig(w_acc=0.7, w_fmt=0.3), 10)
    for key in ("accuracy", "format", "overall"):
        assert out.per_key[key].tolist() == pytest.approx([e[key] for e in expected])
    assert out.per_key["accuracy"].tolist() == [1.0, 0.0]


def _raises(prediction, target, sample):
    """A scorer with a bug: raises on every reply (test only)."""
    raise ZeroDivisionError("scorer bug")


def test_a_raising_scorer_rewards_0_logs_the_error_and_is_counted(caplog, monkeypatch):
    bad = Sample(id="bug", task_type="trainer_reward_test_raises", question="?", target="B")
    samples, preds = [_sample(0), bad], ["<answer>B</answer>", "<answer>B</answer>"]
    with (
        task_type(monkeypatch, "trainer_reward_test_raises", _raises),
        caplog.at_level("ERROR", logger="evalkit.scoring.reward"),
    ):
        out = compute_rewards(samples, preds, [5, 5], RewardsConfig(), 10)
    assert out.per_key["overall"].tolist() == [1.0, 0.0]  # training goes on, bug rewarded 0
    assert out.scorer_failed == ["bug"]
    assert out.metrics()["reward/scorer_failed"] == 1.0
    assert "scorer_failed" not in out.per_key  # GDPO normalises every key: never a reward
    (logged,) = [r for r in caplog.records if "scorer failed on sample 'bug'" in r.getMessage()]
    assert "ZeroDivisionError: scorer bug" in logged.getMessage()
