"""Policy losses and KL estimators against hand-computed values; clip bounds zero the gradient."""

from __future__ import annotations

import math

import pytest
import torch

from evalkit.trainer.algorithms.aggregation import AggNorm, aggregate
from evalkit.trainer.algorithms.kl import KL_ESTIMATORS, token_kl
from evalkit.trainer.algorithms.losses import POLICY_LOSSES, LossOptions

DAPO = LossOptions(clip_eps_low=0.2, clip_eps_high=0.28)
RATIOS = [0.5, 1.0, 1.5]


def _run(name, ratios, adv, opts=DAPO, mask=None, old=-1.0):
    """Loss of one sequence whose tokens have the given ratios; returns (out, grad wrt logp)."""
    old_logp = torch.full((1, len(ratios)), old)
    logp = (old_logp + torch.log(torch.tensor([ratios]))).requires_grad_(True)
    adv_t = torch.tensor([adv], dtype=torch.float32)
    mask_t = (
        torch.ones(1, len(ratios)) if mask is None else torch.tensor([mask], dtype=torch.float32)
    )
    out = POLICY_LOSSES.get(name)(logp, old_logp, adv_t, mask_t, opts)
    out.loss.sum().backward()
    return out, logp.grad[0], logp.detach()[0]


def test_registry_holds_every_loss_of_the_issue():
    assert {"ppo_clip", "gspo", "cispo"} <= set(POLICY_LOSSES)


def test_ppo_clip_positive_advantage_clips_at_the_high_bound():
    out, grad, _ = _run("ppo_clip", RATIOS, [1.0, 1.0, 1.0])
    torch.testing.assert_close(out.loss[0], torch.tensor([-0.5, -1.0, -1.28]))
    # d(-A r)/dlogp = -A r where unclipped; zero past 1 + eps_high
    torch.testing.assert_close(grad, torch.tensor([-0.5, -1.0, 0.0]))
    assert out.metrics["clipfrac_high"].item() == pytest.approx(1 / 3)
    assert out.metrics["clipfrac_low"].item() == 0.0


def test_ppo_clip_negative_advantage_clips_at_the_low_bound():
    out, grad, _ = _run("ppo_clip", RATIOS, [-1.0, -1.0, -1.0])
    torch.testing.assert_close(out.loss[0], torch.tensor([0.8, 1.0, 1.5]))
    torch.testing.assert_close(grad, torch.tensor([0.0, 1.0, 1.5]))
    assert out.metrics["clipfrac_low"].item() == pytest.approx(1 / 3)
    assert out.metrics["clipfrac_high"].item() == 0.0


def test_ppo_clip_bounds_are_asymmetric():
    out, grad, _ = _run("ppo_clip", [1.25, 0.75], [1.0, -1.0])
    # 1.25 < 1 + 0.28 is inside for A > 0; 0.75 < 1 - 0.2 is clipped for A < 0
    torch.testing.assert_close(out.loss[0], torch.tensor([-1.25, 0.8]))
    torch.testing.assert_close(grad, torch.tensor([-1.25, 0.0]))


def test_dual_clip_caps_the_loss_of_negative_advantages():
    opts = LossOptions(0.2, 0.28, dual_clip_c=3.0)
    out, grad, _ = _run("ppo_clip", [2.0, 4.0, 4.0], [-1.0, -1.0, 1.0], opts)
    # r = 2 < c: loss -A r = 2; r = 4 > c: loss -c A = 3, gradient zero; A > 0 unaffected
    torch.testing.assert_close(out.loss[0], torch.tensor([2.0, 3.0, -1.28]))
    torch.testing.assert_close(grad, torch.tensor([2.0, 0.0, 0.0]))
    assert out.metrics["actor/pg_clipfrac_lower"].item() == pytest.approx(1 / 3)


def test_without_dual_clip_the_negative_loss_grows_with_the_ratio():
    out, grad, _ = _run("ppo_clip", [4.0], [-1.0], LossOptions(0.2, 0.28, dual_clip_c=None))
    torch.testing.assert_close(out.loss[0], torch.tensor([4.0]))
    torch.testing.assert_close(grad, torch.tensor([4.0]))


def test_loss_is_zero_on_masked_tokens():
    out, grad, _ = _run("ppo_clip", RATIOS, [1.0, 1.0, 1.0], mask=[1, 1, 0])
    assert out.loss[0, 2].item() == 0.0
    assert grad[2].item() == 0.0
    assert out.metrics["clipfrac_high"].item() == 0.0  # the clipped token is padding


def test_ppo_kl_k3_is_the_k3_of_the_ratio():
    out, _, _ = _run("ppo_clip", [1.5, 1.0], [1.0, 1.0])
    expected = ((1.5 - 1 - math.log(1.5)) + 0.0) / 2
    assert out.metrics["actor/ppo_kl_k3"].item() == pytest.approx(expected, rel=1e-5)


def test_gspo_uses_the_sequence_level_ratio():
    # token log-ratios [ln 2, 0] -> s = exp(ln 2 / 2) = sqrt(2), the same on every token
    opts = LossOptions(0.5, 0.5)
    out, _, _ = _run("gspo", [2.0, 1.0], [1.0, 1.0], opts)
    torch.testing.assert_close(out.loss[0], torch.tensor([-math.sqrt(2)] * 2))


def test_gspo_gradient_is_that_of_the_sequence_ratio():
    opts = LossOptions(0.5, 0.5)
    old = torch.tensor([[-1.0, -2.0, -0.5]])
    logp = torch.tensor([[-0.4, -2.1, -9.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    adv = torch.full((1, 3), 0.7)
    out = POLICY_LOSSES.get("gspo")(logp, old, adv, mask, opts)
    aggregate("seq-mean-token-mean", out.loss, mask, AggNorm.of(mask)).backward()
    ref_logp = logp.detach().clone().requires_grad_(True)
    s = torch.exp(((ref_logp - old) * mask).sum() / 2)
    (-0.7 * s).backward()
    torch.testing.assert_close(logp.grad, ref_logp.grad)


def test_gspo_clips_whole_sequences():
    out, grad, _ = _run("gspo", [2.0, 1.0], [1.0, 1.0], LossOptions(0.2, 0.28))
    torch.testing.assert_close(out.loss[0], torch.tensor([-1.28, -1.28]))
    torch.testing.assert_close(grad, torch.zeros(2))
    assert out.metrics["clipfrac_high"].item() == 1.0


def test_cispo_weights_log_probs_by_the_clipped_detached_ratio():
    adv = [1.0, -1.0, 1.0]
    out, grad, logp = _run("cispo", [0.5, 1.0, 2.0], adv)
    weights = torch.tensor([0.8, 1.0, 1.28])
    adv_t = torch.tensor(adv)
    torch.testing.assert_close(out.loss[0], -weights * adv_t * logp)
    # clipping caps the weight but never drops the gradient
    torch.testing.assert_close(grad, -weights * adv_t)
    assert out.metrics["clipfrac_low"].item() == pytest.approx(1 / 3)
    assert out.metrics["clipfrac_high"].item() == pytest.approx(1 / 3)


def test_kl_estimators_match_their_formulas():
    logp, ref = torch.tensor([-1.0, -2.0]), torch.tensor([-1.5, -1.0])
    torch.testing.assert_close(token_kl("k1", logp, ref), torch.tensor([0.5, -1.0]))
    expected_k3 = torch.tensor([math.exp(-0.5) + 0.5 - 1, math.e - 1 - 1])
    torch.testing.assert_close(token_kl("k3", logp, ref), expected_k3)
    assert {"k1", "k3"} <= set(KL_ESTIMATORS)


def test_k3_is_zero_when_policies_agree_and_never_negative():
    logp = torch.randn(50)
    assert token_kl("k3", logp, logp).abs().max().item() == 0.0
    assert token_kl("k3", logp, torch.randn(50)).min().item() >= 0.0
