"""The policy update step on the tiny MLP policy: micro-batching, clipping, KL, learning."""

from __future__ import annotations

import copy

import pytest
import torch

from evalkit.trainer.algorithms.aggregation import AggNorm
from evalkit.trainer.algorithms.losses import LossOptions
from evalkit.trainer.batch import Group, Response, collate, response_logprobs
from evalkit.trainer.config import MixPolicyConfig, TrainerConfig, load_config
from evalkit.trainer.step import (
    StepInputs,
    StepSettings,
    accumulate_loss,
    build_optimizer,
    compute_logprobs,
    policy_step,
)
from tests._toy_rl import BOS, EOS, PAD, ToyPolicy, ToyRun, sample_responses, toy_reward

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _inputs(policy, seed=0):
    torch.manual_seed(seed)
    groups = [
        Group(0, [BOS, 3], [Response([3, EOS]), Response([5, 6, 7, EOS]), Response([4])]),
        Group(1, [BOS, 2, 4], [Response([4, 4, EOS]), Response([EOS])]),
    ]
    batch = collate(groups, PAD)
    with torch.no_grad():
        old = response_logprobs(policy, batch) + 0.3 * torch.randn(batch.response_ids.shape)
    adv = torch.randn(batch.response_ids.shape) * batch.response_mask
    return StepInputs(batch, old, adv, ref_logp=old - 0.1)


def test_collate_left_pads_prompts_and_right_pads_responses():
    batch = collate([Group(4, [BOS, 3], [Response([3, EOS]), Response([5])])], PAD)
    assert batch.input_ids.tolist() == [[BOS, 3, 3, EOS], [BOS, 3, 5, PAD]]
    assert batch.response_mask.tolist() == [[1, 1], [1, 0]]
    assert batch.group_ids.tolist() == [4, 4]
    assert batch.prompt_len == 2


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_micro_batching_gives_the_full_batch_loss_and_gradient(mode):
    torch.manual_seed(0)
    policy = ToyPolicy()
    twin = copy.deepcopy(policy)
    inputs = _inputs(policy)
    settings = StepSettings(loss_agg_mode=mode, agg_max_len=4, micro_batch_size=2)
    split = accumulate_loss(policy, inputs, settings)
    whole = accumulate_loss(
        twin, inputs, StepSettings(loss_agg_mode=mode, agg_max_len=4, micro_batch_size=5)
    )
    assert split.loss == pytest.approx(whole.loss, rel=1e-5, abs=1e-7)
    for key in whole.metrics:
        assert split.metrics[key] == pytest.approx(whole.metrics[key], rel=1e-5, abs=1e-7)
    for a, b in zip(policy.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad)


def test_policy_step_changes_parameters_and_reports_metrics():
    torch.manual_seed(0)
    policy = ToyPolicy()
    before = [p.detach().clone() for p in policy.parameters()]
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-2)
    result = policy_step(policy, opt, _inputs(policy), StepSettings(micro_batch_size=2))
    assert torch.isfinite(torch.tensor(result.loss))
    assert {"clipfrac_low", "clipfrac_high", "actor/ppo_kl", "grad_norm"} <= set(result.metrics)
    assert any(not torch.equal(a, b) for a, b in zip(before, policy.parameters(), strict=True))
    assert all(p.grad is None for p in policy.parameters())


def test_gradient_is_clipped_to_grad_clip():
    torch.manual_seed(0)
    policy = ToyPolicy()
    before = torch.nn.utils.parameters_to_vector(policy.parameters()).detach().clone()
    opt = torch.optim.SGD(policy.parameters(), lr=1.0)
    result = policy_step(policy, opt, _inputs(policy), StepSettings(grad_clip=1e-3))
    assert result.metrics["grad_norm"] > 1e-3  # the pre-clip norm is reported
    moved = torch.nn.utils.parameters_to_vector(policy.parameters()).detach() - before
    assert moved.norm().item() == pytest.approx(1e-3, rel=1e-3)


def test_compute_logprobs_matches_one_full_forward():
    policy = ToyPolicy()
    batch = _inputs(policy).batch
    full = response_logprobs(policy, batch).detach()
    torch.testing.assert_close(compute_logprobs(policy, batch, micro_batch_size=2), full)


def test_an_explicit_norm_replaces_the_local_counts():
    # a data-parallel caller passes token counts reduced over ranks
    policy = ToyPolicy()
    inputs = _inputs(policy)
    local = accumulate_loss(policy, inputs, StepSettings(), backward=False)
    tokens = float(inputs.batch.response_mask.sum())
    doubled = accumulate_loss(
        policy, inputs, StepSettings(), backward=False, norm=AggNorm(2 * tokens, 10)
    )
    assert doubled.loss == pytest.approx(local.loss / 2, rel=1e-6)


def test_kl_in_loss_needs_reference_log_probs():
    policy = ToyPolicy()
    inputs = _inputs(policy)
    inputs.ref_logp = None
    with pytest.raises(ValueError, match="ref_logp"):
        accumulate_loss(
            policy, inputs, StepSettings(kl_estimator="k3", kl_coef=0.1), backward=False
        )


def test_kl_term_adds_coef_times_kl_to_the_loss():
    torch.manual_seed(0)
    policy = ToyPolicy()
    inputs = _inputs(policy)
    base = accumulate_loss(policy, inputs, StepSettings(), backward=False)
    with_kl = accumulate_loss(
        policy, inputs, StepSettings(kl_estimator="k1", kl_coef=0.5), backward=False
    )
    # k1 with ref = old - 0.1 is logp - old + 0.1; its token mean is the extra loss / coef
    with torch.no_grad():
        logp = response_logprobs(policy, inputs.batch)
    mask = inputs.batch.response_mask
    kl_mean = float(((logp - inputs.ref_logp) * mask).sum() / mask.sum())
    assert with_kl.loss - base.loss == pytest.approx(0.5 * kl_mean, rel=1e-4)
    assert with_kl.metrics["kl"] == pytest.approx(kl_mean, rel=1e-4)


def test_settings_and_optimizer_from_config():
    cfg = load_config(
        None,
        [
            "algorithm.clip_eps_high=0.28",
            "algorithm.kl.estimator=k3",
            "algorithm.kl.coef=0.01",
            "schedule.micro_batch_size=3",
        ],
    )
    s = StepSettings.from_config(cfg)
    assert s.loss_options == LossOptions(0.2, 0.28, 3.0)  # dual-clip on by default (verl)
    assert (s.kl_estimator, s.kl_coef, s.micro_batch_size) == ("k3", 0.01, 3)
    in_reward = StepSettings.from_config(
        load_config(
            None,
            [
                "algorithm.advantage=reinforce_pp",
                "algorithm.kl.estimator=k3",
                "algorithm.kl.in_reward=true",
            ],
        )
    )
    assert in_reward.kl_estimator == "off"
    opt = build_optimizer(ToyPolicy().parameters(), TrainerConfig().optimizer)
    assert opt.defaults["lr"] == 1e-6 and opt.defaults["weight_decay"] == 0.01


@pytest.mark.parametrize("loss", ["ppo_clip", "gspo", "cispo"])
def test_the_toy_policy_learns_the_copy_task(loss):
    # end-to-end sign check of rollout -> GRPO -> loss -> AdamW: accuracy must rise from chance
    opts = LossOptions(0.2, 0.28) if loss != "gspo" else LossOptions(0.05, 0.05)
    run = ToyRun(StepSettings(policy_loss=loss, loss_options=opts, micro_batch_size=4), seed=1)

    def accuracy():
        torch.manual_seed(123)
        hits = [
            toy_reward([BOS, a], r, run.k)["accuracy"]
            for a in run.items
            for r in sample_responses(run.policy, [BOS, a], 8, run.max_tokens)
        ]
        return sum(hits) / len(hits)

    start = accuracy()
    for _ in range(40):
        run.step()
    assert start < 0.3
    assert accuracy() > start + 0.3


def _accuracy(run, seed=123):
    torch.manual_seed(seed)
    hits = [
        toy_reward([BOS, a], r, run.k)["accuracy"]
        for a in run.items
        for r in sample_responses(run.policy, [BOS, a], 4, run.max_tokens)
    ]
    return sum(hits) / len(hits)


def test_mix_policy_gets_a_cold_start_off_the_ground():
    # 30 questions, 63 tokens: online sampling almost never hits an answer, so pure online
    # GRPO learns only the format; the offline slot supplies the missing positive examples
    def trained(mix):
        settings = StepSettings(loss_options=LossOptions(0.2, 0.28), micro_batch_size=8)
        cfg = MixPolicyConfig(enable_mix_policy=mix, accuracy_gate=0.5)
        run = ToyRun(settings, seed=0, k=30, mix=cfg)
        for _ in range(60):
            run.step()
        return _accuracy(run)

    online, mixed = trained(False), trained(True)
    assert online < 0.2
    assert mixed > online + 0.3
