"""Token entropy: logged every update, chunked without changing values, optional bonus."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from evalkit.trainer.algorithms.advantages import AdvantageInputs, compute_advantages
from evalkit.trainer.algorithms.losses import LossOptions
from evalkit.trainer.config import load_config
from evalkit.trainer.entropy import logprobs_and_entropy, token_entropy
from evalkit.trainer.step import StepInputs, StepSettings, accumulate_loss, compute_logprobs
from tests._toy_rl import ToyRun

SETTINGS = StepSettings(loss_options=LossOptions(0.2, 0.28), micro_batch_size=3)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_entropy_of_known_distributions():
    probs = torch.tensor([[[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0]]])
    logp = probs.clamp(min=1e-30).log()
    got = token_entropy(logp)
    assert got[0].tolist() == pytest.approx([math.log(4.0), 0.0, math.log(2.0)])


def test_chunking_changes_nothing_values_or_gradients():
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 11, requires_grad=True)
    logp = torch.log_softmax(logits, -1)
    whole = -(logp.exp() * logp).sum(-1)
    chunked = token_entropy(logp, grad=True, chunk=4)  # 15 rows in chunks of 4
    assert torch.allclose(chunked, whole, atol=1e-6)
    (g_whole,) = torch.autograd.grad(whole.sum(), logits, retain_graph=True)
    (g_chunk,) = torch.autograd.grad(chunked.sum(), logits)
    assert torch.allclose(g_chunk, g_whole, atol=1e-6)


def test_logprobs_are_the_plain_gather():
    run = ToyRun(SETTINGS, seed=2)
    batch, _ = run.rollout()
    logp, entropy = logprobs_and_entropy(run.policy, batch)
    assert torch.equal(logp, compute_logprobs(run.policy, batch, 64))
    assert entropy.shape == logp.shape and bool((entropy >= 0).all())


def _inputs(run):
    batch, rewards = run.rollout()
    adv = compute_advantages("grpo", AdvantageInputs(rewards, batch.group_ids, batch.response_mask))
    old = compute_logprobs(run.policy, batch, 64)
    return StepInputs(batch, old, adv, ref_logp=old.clone())


def test_entropy_is_logged_as_the_masked_token_mean():
    run = ToyRun(SETTINGS, seed=4)
    inputs = _inputs(run)
    out = accumulate_loss(run.policy, inputs, SETTINGS, backward=False)
    _, entropy = logprobs_and_entropy(run.policy, inputs.batch)
    mask = inputs.batch.response_mask
    assert out.metrics["entropy"] == pytest.approx(float((entropy * mask).sum() / mask.sum()))


def test_entropy_coeff_subtracts_the_aggregated_entropy_from_the_loss():
    run = ToyRun(SETTINGS, seed=4)
    inputs = _inputs(run)
    plain = accumulate_loss(run.policy, inputs, SETTINGS, backward=False)
    bonus = accumulate_loss(run.policy, inputs, replace(SETTINGS, entropy_coeff=0.1), False)
    # token-mean aggregation: loss - 0.1 * (token-mean entropy), verl's pg_loss - coeff * H
    assert bonus.loss == pytest.approx(plain.loss - 0.1 * plain.metrics["entropy"], abs=1e-6)


def test_entropy_coeff_comes_from_the_actor_section():
    cfg = load_config(None, ["actor.entropy_coeff=0.01"])
    assert StepSettings.from_config(cfg).entropy_coeff == 0.01
    assert StepSettings.from_config(load_config()).entropy_coeff == 0.0
