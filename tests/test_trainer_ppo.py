"""The PPO-style update: mini-batches x epochs over one rollout batch, old log-probs fixed."""

from __future__ import annotations

import copy
import random
from dataclasses import replace

import numpy as np
import pytest
import torch

from evalkit.errors import ConfigError
from evalkit.trainer import checkpoint as ckpt
from evalkit.trainer.algorithms.advantages import AdvantageInputs, compute_advantages
from evalkit.trainer.algorithms.losses import LossOptions
from evalkit.trainer.config import MixPolicyConfig, load_config
from evalkit.trainer.step import (
    StepInputs,
    StepResult,
    StepSettings,
    compute_logprobs,
    mini_batches,
    policy_step,
    ppo_update,
    summarize_updates,
)
from tests._toy_rl import ToyRun

SETTINGS = StepSettings(loss_options=LossOptions(0.2, 0.28), micro_batch_size=3)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _rollout(run):
    """One toy rollout batch and its GRPO advantages (the inputs of an update)."""
    batch, rewards = run.rollout()
    adv = compute_advantages("grpo", AdvantageInputs(rewards, batch.group_ids, batch.response_mask))
    return batch, adv


def _todays_step(policy, optimizer, batch, adv, settings):
    """main's update before this change, verbatim in substance (trainer/recipe.py _update):
    old log-probs from the current weights, then ONE policy_step on the whole batch."""
    old_logp = compute_logprobs(policy, batch, settings.micro_batch_size, settings.temperature)
    inputs = StepInputs(batch, old_logp, adv, ref_logp=old_logp.clone())
    return policy_step(policy, optimizer, inputs, settings)


@pytest.mark.parametrize("groups_per_mini_batch", [None, 3, 8])
def test_one_epoch_one_mini_batch_is_todays_step_bit_for_bit(groups_per_mini_batch):
    # The expectation is main's code path kept in this test (_todays_step); the new path
    # must leave identical parameters, optimizer state, loss and metrics. Parameter hashes
    # saved from main would depend on the BLAS build, so the old path is re-run instead.
    run = ToyRun(SETTINGS, seed=5, prompts_per_step=3)
    batch, adv = _rollout(run)
    twin_policy = copy.deepcopy(run.policy)
    twin_opt = torch.optim.AdamW(twin_policy.parameters(), lr=run.lr)
    twin_opt.load_state_dict(run.optimizer.state_dict())
    expected = _todays_step(twin_policy, twin_opt, batch, adv, SETTINGS)

    settings = replace(SETTINGS, ppo_epochs=1, ppo_mini_batch_size=groups_per_mini_batch)
    old_logp = compute_logprobs(run.policy, batch, settings.micro_batch_size)
    inputs = StepInputs(batch, old_logp, adv, ref_logp=old_logp.clone())
    results = ppo_update(run.policy, run.optimizer, inputs, settings)

    assert len(results) == 1
    assert results[0].loss == expected.loss
    assert {k: results[0].metrics[k] for k in expected.metrics} == expected.metrics
    for a, b in zip(run.policy.parameters(), twin_policy.parameters(), strict=True):
        assert torch.equal(a, b)
    new_state, old_state = run.optimizer.state_dict()["state"], twin_opt.state_dict()["state"]
    for key in old_state:
        for name in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(new_state[key][name], old_state[key][name])


def test_second_epoch_moves_the_ratio_and_clips():
    settings = replace(SETTINGS, loss_options=LossOptions(0.2, 0.2))
    run = ToyRun(settings, seed=1, lr=0.05, updates_per_batch=2, prompts_per_step=4)
    first, second = run.step()
    # first update: the weights that computed old_logp -> ratio 1, nothing clipped
    assert first.metrics["ratio_mean"] == pytest.approx(1.0, abs=1e-6)
    assert first.metrics["ratio_abs_dev"] == pytest.approx(0.0, abs=1e-6)
    assert first.metrics["clipfrac_low"] + first.metrics["clipfrac_high"] == 0.0
    # second update: same old_logp, moved weights -> the ratio departs from 1 and clips
    assert second.metrics["ratio_abs_dev"] > 0.05
    assert second.metrics["clipfrac_low"] + second.metrics["clipfrac_high"] > 0.0


def test_mini_batches_hold_whole_groups_in_order():
    mix = MixPolicyConfig(enable_mix_policy=True)  # groups of n-1 and n: uneven row counts
    run = ToyRun(SETTINGS, seed=2, n=4, prompts_per_step=5, mix=mix)
    batch, adv = _rollout(run)
    old = compute_logprobs(run.policy, batch, 4)
    inputs = StepInputs(batch, old, adv)
    parts = mini_batches(inputs, 2)
    assert [sorted(set(p.batch.group_ids.tolist())) for p in parts] == [[0, 1], [2, 3], [4]]
    assert sum(len(p.batch) for p in parts) == len(batch)
    rows = torch.cat([p.batch.row_index for p in parts])
    assert rows.tolist() == list(range(len(batch)))  # nothing lost, nothing reordered
    for p in parts:
        torch.testing.assert_close(p.old_logp, old[p.batch.row_index], rtol=0, atol=0)
    assert mini_batches(inputs, None)[0] is inputs and mini_batches(inputs, 5)[0] is inputs


def test_epochs_times_mini_batches_optimizer_steps_with_fixed_old_logp():
    settings = replace(SETTINGS, ppo_mini_batch_size=1)
    run = ToyRun(settings, seed=3, updates_per_batch=3, prompts_per_step=2)
    results = run.step()
    assert len(results) == 3 * 2
    assert results[0].metrics["ratio_abs_dev"] == pytest.approx(0.0, abs=1e-6)
    # group 1's first visit already follows an update on group 0: the ratio has moved
    assert results[1].metrics["ratio_abs_dev"] > 0.0
    summary = summarize_updates(results)
    assert summary["ppo/updates"] == 6.0
    assert summary["loss"] == pytest.approx(sum(r.loss for r in results) / 6)
    assert summary["ppo/last_ratio_abs_dev"] == results[-1].metrics["ratio_abs_dev"]


def test_summary_of_one_update_is_that_update():
    result = StepResult(0.25, {"grad_norm": 1.5, "clipfrac_low": 0.0})
    assert summarize_updates([result]) == {
        "loss": 0.25,
        "grad_norm": 1.5,
        "clipfrac_low": 0.0,
        "ppo/updates": 1.0,
    }
    skipped = [StepResult(0.0, {"skipped_nonfinite_grad": 1.0})] * 2
    assert summarize_updates(skipped)["skipped_nonfinite_grad"] == 2.0


def test_config_fields_reach_the_step_settings_and_are_checked():
    cfg = load_config(
        None,
        ["schedule.batch_size=8", "schedule.ppo_mini_batch_size=4", "schedule.ppo_epochs=2"],
    )
    settings = StepSettings.from_config(cfg)
    assert (settings.ppo_mini_batch_size, settings.ppo_epochs) == (4, 2)
    default = StepSettings.from_config(load_config(None))
    assert (default.ppo_mini_batch_size, default.ppo_epochs) == (None, 1)
    with pytest.raises(ConfigError, match="ppo_mini_batch_size=3 must divide"):
        load_config(None, ["schedule.batch_size=8", "schedule.ppo_mini_batch_size=3"])
    with pytest.raises(ConfigError, match="ppo_epochs"):
        load_config(None, ["schedule.ppo_epochs=0"])


def test_resume_stays_exact_with_mini_batches_and_epochs(tmp_path):
    settings = replace(SETTINGS, ppo_mini_batch_size=1)

    def losses(run, steps):
        return [[(r.loss, r.metrics) for r in run.step()] for _ in range(steps)]

    run = ToyRun(settings, seed=3, updates_per_batch=2)
    losses(run, 3)
    path = ckpt.save_checkpoint(tmp_path, 3, run.policy, run.optimizer, run.data_state())
    expected = losses(run, 2)
    random.random(), np.random.rand(), torch.rand(3)  # disturb every generator
    fresh = ToyRun(settings, seed=99, updates_per_batch=2)
    resumed = ckpt.load_checkpoint(path, fresh.policy, fresh.optimizer)
    fresh.load_data_state(resumed.data_state)
    assert losses(fresh, 2) == expected
    for a, b in zip(run.policy.parameters(), fresh.policy.parameters(), strict=True):
        assert torch.equal(a, b)
