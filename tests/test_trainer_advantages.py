"""Advantage estimators against hand-computed values on small tensors."""

from __future__ import annotations

import math

import pytest
import torch

from evalkit.registry import RegistryError
from evalkit.trainer.algorithms.advantages import (
    ADVANTAGES,
    AdvantageInputs,
    AdvantageOptions,
    compute_advantages,
)

EPS = AdvantageOptions(eps=1e-12)
S3 = math.sqrt(3) / 2  # 0.5 / sqrt(1/3): GRPO advantage of a 2-right-2-wrong group


def _inputs(rewards, groups, mask=None, **kw):
    rewards_t = (
        {k: torch.tensor(v) for k, v in rewards.items()}
        if isinstance(rewards, dict)
        else torch.tensor(rewards)
    )
    n = len(groups)
    mask_t = torch.ones(n, 2) if mask is None else torch.tensor(mask, dtype=torch.float32)
    return AdvantageInputs(rewards_t, torch.tensor(groups), mask_t, **kw)


def test_registry_holds_every_estimator_of_the_issue():
    assert {"grpo", "rloo", "reinforce_pp", "remax", "gdpo"} <= set(ADVANTAGES)


def test_unknown_estimator_gets_did_you_mean():
    with pytest.raises(RegistryError, match="did you mean 'rloo'"):
        ADVANTAGES.get("rlo")


def test_grpo_normalises_within_each_group():
    adv = compute_advantages("grpo", _inputs([1.0, 0, 0, 1, 2, 2], [7, 7, 7, 7, 3, 3]), EPS)
    expected = torch.tensor([S3, -S3, -S3, S3, 0.0, 0.0])
    torch.testing.assert_close(adv[:, 0], expected)
    torch.testing.assert_close(adv[:, 1], expected)  # same value on every token


def test_grpo_without_std_is_dr_grpo():
    opts = AdvantageOptions(norm_by_std=False)
    adv = compute_advantages("grpo", _inputs([1.0, 0, 0, 1, 2, 4], [0, 0, 0, 0, 1, 1]), opts)
    torch.testing.assert_close(adv[:, 0], torch.tensor([0.5, -0.5, -0.5, 0.5, -1.0, 1.0]))


def test_grpo_is_zero_on_padding_and_for_a_group_of_one_with_singleton_zero():
    inputs = _inputs([1.0, 0.0, 5.0], [0, 0, 1], mask=[[1, 0], [1, 1], [1, 1]])
    adv = compute_advantages("grpo", inputs, AdvantageOptions(eps=1e-12, singleton="zero"))
    s = 0.5 / math.sqrt(0.5)  # std of {1, 0} is sqrt(1/2)
    torch.testing.assert_close(adv, torch.tensor([[s, 0.0], [-s, -s], [0.0, 0.0]]))


def test_grpo_accepts_a_per_key_dict_through_its_overall_key():
    adv = compute_advantages("grpo", _inputs({"overall": [1.0, 0.0], "format": [1, 1]}, [0, 0]))
    assert adv[0, 0] > 0 > adv[1, 0]


def test_rloo_uses_the_leave_one_out_baseline():
    adv = compute_advantages("rloo", _inputs([1.0, 0, 0, 3, 1], [0, 0, 0, 1, 1]))
    torch.testing.assert_close(adv[:, 0], torch.tensor([1.0, -0.5, -0.5, 2.0, -2.0]))


def test_reinforce_pp_whitens_returns_over_valid_tokens():
    mask = [[1, 1, 0], [1, 1, 1]]
    adv = compute_advantages("reinforce_pp", _inputs([1.0, 0.0], [0, 1], mask=mask), EPS)
    # returns: row 0 [1, 1, -], row 1 [0, 0, 0]; mean 0.4, unbiased var 0.3
    hi, lo = 0.6 / math.sqrt(0.3), -0.4 / math.sqrt(0.3)
    torch.testing.assert_close(adv, torch.tensor([[hi, hi, 0.0], [lo, lo, lo]]))


def test_reinforce_pp_folds_kl_into_token_rewards_with_discount():
    mask = [[1, 1, 0], [1, 1, 1]]
    kl = torch.tensor([[1.0, 2.0, 9.0], [0.0, 0.0, 0.0]])
    opts = AdvantageOptions(eps=1e-12, gamma=0.5, kl_coef=0.1)
    adv = compute_advantages(
        "reinforce_pp", _inputs([1.0, 0.0], [0, 1], mask=mask, token_kl=kl), opts
    )
    # token rewards row 0: [-0.1, -0.2 + 1]; G = [-0.1 + 0.5 * 0.8, 0.8] = [0.3, 0.8]
    returns = torch.tensor([0.3, 0.8, 0.0, 0.0, 0.0])
    whitened = (returns - returns.mean()) / returns.std()
    expected = torch.tensor([[whitened[0], whitened[1], 0.0], [*whitened[2:]]])
    torch.testing.assert_close(adv, expected)


def test_remax_subtracts_the_greedy_baseline():
    inputs = _inputs([1.0, 0.5, 0.0], [0, 0, 1], baseline=torch.tensor([0.5, 0.5, 1.0]))
    adv = compute_advantages("remax", inputs)
    torch.testing.assert_close(adv[:, 1], torch.tensor([0.5, 0.0, -1.0]))


def test_remax_without_baseline_says_what_is_missing():
    with pytest.raises(ValueError, match="baseline"):
        compute_advantages("remax", _inputs([1.0], [0]))


def test_gdpo_normalises_each_key_then_sums():
    rewards = {
        "accuracy": [1.0, 0, 0, 0],
        "format": [1.0, 1, 0, 0],
        "overall": [1.0, 0.1, 0, 0],  # skipped: it is the weighted sum of the others
    }
    opts = AdvantageOptions(eps=1e-12, gdpo_whiten="off")
    adv = compute_advantages("gdpo", _inputs(rewards, [0, 0, 0, 0]), opts)
    # accuracy: mean 0.25, std 0.5 -> [1.5, -0.5, -0.5, -0.5]; format: +-sqrt(3)/2
    expected = torch.tensor([1.5 + S3, -0.5 + S3, -0.5 - S3, -0.5 - S3])
    torch.testing.assert_close(adv[:, 0], expected)
    grpo = compute_advantages("grpo", _inputs([1.0, 0.1, 0, 0], [0, 0, 0, 0]), opts)
    assert not torch.allclose(adv, grpo)  # decoupling changes the ranking weights


def test_gdpo_sequence_whitening_gives_zero_mean_unit_std():
    rewards = {"accuracy": [1.0, 0, 0, 1, 1, 0], "format": [1.0, 1, 0, 0, 1, 1]}
    opts = AdvantageOptions(eps=1e-12, gdpo_whiten="sequences")
    adv = compute_advantages("gdpo", _inputs(rewards, [0, 0, 0, 1, 1, 1]), opts)[:, 0]
    torch.testing.assert_close(adv.mean(), torch.tensor(0.0), atol=1e-6, rtol=0)
    torch.testing.assert_close(adv.std(), torch.tensor(1.0))


def test_gdpo_key_weights_scale_each_key():
    rewards = {"accuracy": [1.0, 0.0], "format": [0.0, 1.0]}
    opts = AdvantageOptions(eps=1e-12, gdpo_whiten="off", key_weights={"format": 0.0})
    adv = compute_advantages("gdpo", _inputs(rewards, [0, 0]), opts)
    s = 0.5 / math.sqrt(0.5)
    torch.testing.assert_close(adv[:, 0], torch.tensor([s, -s]))


def test_gdpo_needs_per_key_rewards():
    with pytest.raises(ValueError, match="per-key"):
        compute_advantages("gdpo", _inputs([1.0, 0.0], [0, 0]))


def test_wrong_reward_shape_is_reported():
    with pytest.raises(ValueError, match=r"shape \(B,\)"):
        compute_advantages("grpo", _inputs([1.0, 0.0, 1.0], [0, 0, 0], mask=[[1], [1]]))
