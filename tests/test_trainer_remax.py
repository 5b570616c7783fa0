"""ReMax on the toy task: one greedy rollout per prompt, A = r - r_greedy."""

from __future__ import annotations

import math

import pytest
import torch

from evalkit.trainer.algorithms.losses import LossOptions
from evalkit.trainer.step import StepSettings
from tests._toy_rl import BOS, ToyRun, greedy_response, toy_reward

SETTINGS = StepSettings(loss_options=LossOptions(0.2, 0.28), micro_batch_size=3)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_greedy_response_is_the_argmax_and_draws_no_random_numbers():
    run = ToyRun(SETTINGS, seed=0)
    state = torch.get_rng_state()
    out = greedy_response(run.policy, [BOS, 3], max_tokens=4)
    assert torch.equal(torch.get_rng_state(), state)
    first = int(run.policy(torch.tensor([[3]]))[0, -1].argmax())
    assert out[0] == first and 1 <= len(out) <= 4


def test_a_remax_step_runs_with_advantage_reward_minus_greedy_reward():
    run = ToyRun(SETTINGS, seed=6, advantage="remax", prompts_per_step=3, updates_per_batch=1)
    before = [p.detach().clone() for p in run.policy.parameters()]
    # the baselines, computed independently from the same weights before the step
    prompts = [[BOS, run.items[i]] for i in run.order[run.position : run.position + 3]]
    greedy = [toy_reward(p, greedy_response(run.policy, p, run.max_tokens), run.k) for p in prompts]
    results = run.step()
    assert len(results) == 1 and math.isfinite(results[0].loss)
    assert run.last is not None and run.baselines is not None
    batch, rewards, adv = run.last
    assert run.baselines.tolist() == [g["overall"] for g in greedy for _ in range(run.n)]
    mask = batch.response_mask.bool()
    for i in range(len(batch)):
        want = (rewards[i] - run.baselines[i]).expand(int(mask[i].sum()))
        assert torch.equal(adv[i][mask[i]], want)
        assert bool((adv[i][~mask[i]] == 0).all())
    assert bool((adv != 0).any()), "pick a seed whose batch has a nonzero advantage"
    assert any(not torch.equal(a, b) for a, b in zip(before, run.policy.parameters(), strict=True))
