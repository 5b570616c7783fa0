"""Golden values for each formula where evalkit follows verl / EasyVideoR1 (issue 15, item 1).

Every expected number is computed by hand from the reference definitions named in the test:
verl/trainer/ppo/core_algos.py (volcengine/verl), dapo/dapo_ray_trainer.py (verl-recipe) and
verl/trainer/ray_trainer.py + verl/utils/torch_functional.py (cyuQ1n/EasyVideoR1).
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from evalkit.errors import ConfigError, DataError
from evalkit.trainer.algorithms.advantages import AdvantageInputs, AdvantageOptions
from evalkit.trainer.algorithms.advantages import compute_advantages as adv_of
from evalkit.trainer.algorithms.aggregation import AggNorm, aggregate
from evalkit.trainer.algorithms.dynamic_sampling import collect_groups, metric_values
from evalkit.trainer.algorithms.kl import token_kl
from evalkit.trainer.algorithms.losses import POLICY_LOSSES, LossOptions
from evalkit.trainer.batch import Group, Response, collate, response_logprobs
from evalkit.trainer.config import TrainerConfig, load_config
from evalkit.trainer.step import StepInputs, StepSettings, accumulate_loss
from tests._tiny_recipe import one_step
from tests._toy_rl import BOS, EOS, PAD, ToyPolicy

A = 1 / math.sqrt(2)  # GRPO advantage of a {1, 0} group: 0.5 / std, std = sqrt(1/2)


def _inputs(rewards, groups, mask=None, **kw):
    rewards_t = (
        {k: torch.tensor(v) for k, v in rewards.items()}
        if isinstance(rewards, dict)
        else torch.tensor(rewards)
    )
    mask_t = torch.ones(len(groups), 2) if mask is None else torch.tensor(mask).float()
    return AdvantageInputs(rewards_t, torch.tensor(groups), mask_t, **kw)


# 1. singleton groups: verl compute_grpo_outcome_advantage / compute_rloo_outcome_advantage


def test_singleton_group_gets_mean_0_std_1_in_grpo_by_default():
    adv = adv_of("grpo", _inputs([1.0, 0.0, 5.0], [0, 0, 1]))
    torch.testing.assert_close(adv[:, 0], torch.tensor([A / (1 + 2e-6 * A), -A, 5.0 / 1.000001]))


def test_singleton_group_keeps_its_reward_in_rloo_and_dr_grpo():
    inputs = _inputs([1.0, 0.0, 5.0], [0, 0, 1])
    torch.testing.assert_close(adv_of("rloo", inputs)[:, 0], torch.tensor([1.0, -1.0, 5.0]))
    dr = adv_of("grpo", inputs, AdvantageOptions(norm_by_std=False))
    torch.testing.assert_close(dr[:, 0], torch.tensor([0.5, -0.5, 5.0]))


def test_singleton_zero_option_gives_the_old_behaviour():
    opts = AdvantageOptions(singleton="zero")
    inputs = _inputs([1.0, 0.0, 5.0], [0, 0, 1])
    assert adv_of("grpo", inputs, opts)[2].abs().max() == 0
    assert adv_of("rloo", inputs, opts)[2].abs().max() == 0
    cfg = load_config(None, ["algorithm.singleton_groups=zero"])
    assert AdvantageOptions.from_config(cfg.algorithm).singleton == "zero"


# 2. GDPO: EasyVideoR1 compute_advantage (ray_trainer.py) + masked_whiten (torch_functional.py)


def test_gdpo_whitens_over_tokens_by_default():
    rewards = {"accuracy": [1.0, 0.0], "format": [1.0, 1.0]}
    # per key: accuracy +-A, format 0 (flat group); tokens [A, A, A, -A]: mean A/2,
    # unbiased var 0.5 -> (A/2) * sqrt(2) = 0.5 and (-3A/2) * sqrt(2) = -1.5
    adv = adv_of("gdpo", _inputs(rewards, [0, 0], mask=[[1, 1, 1], [1, 0, 0]]))
    torch.testing.assert_close(adv, torch.tensor([[0.5, 0.5, 0.5], [-1.5, 0.0, 0.0]]))
    seq = adv_of(
        "gdpo",
        _inputs(rewards, [0, 0], mask=[[1, 1, 1], [1, 0, 0]]),
        AdvantageOptions(gdpo_whiten="sequences"),
    )
    torch.testing.assert_close(seq[:, 0], torch.tensor([A, -A]), atol=1e-5, rtol=0)


def test_gdpo_uses_only_its_reward_keys_by_default():
    rewards = {"accuracy": [1.0, 0.0], "format": [1.0, 1.0], "overlong": [0.0, -1.0]}
    off = AdvantageOptions(gdpo_whiten="off", eps=1e-12)
    torch.testing.assert_close(
        adv_of("gdpo", _inputs(rewards, [0, 0]), off)[:, 0], torch.tensor([A, -A])
    )
    every = AdvantageOptions(gdpo_whiten="off", eps=1e-12, gdpo_reward_keys=None)
    got = adv_of("gdpo", _inputs(rewards, [0, 0]), every)[:, 0]
    torch.testing.assert_close(got, torch.tensor([2 * A, -2 * A]))  # overlong counted too


def test_gdpo_missing_reward_key_is_named():
    with pytest.raises(ValueError, match=r"\['format'\].*gdpo_reward_keys"):
        adv_of("gdpo", _inputs({"accuracy": [1.0, 0.0]}, [0, 0]))


def test_gdpo_keys_and_weights_come_from_config():
    cfg = load_config(
        None, ["algorithm.gdpo_reward_keys=[accuracy]", "algorithm.gdpo_key_weights={accuracy: 2}"]
    )
    opts = AdvantageOptions.from_config(cfg.algorithm)
    assert opts.gdpo_reward_keys == ("accuracy",) and opts.key_weights == {"accuracy": 2.0}
    assert TrainerConfig().algorithm.gdpo_reward_keys == ["accuracy", "format"]


# 3, 4, 10. aggregation: verl agg_loss


LOSS = torch.tensor([[1.0, 2.0, 3.0], [4.0, 99.0, 99.0], [7.0, 7.0, 7.0]])
MASK = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0]])


def test_seq_mean_token_sum_norm_sums_over_sequences():
    norm = AggNorm.of(MASK, max_len=4)
    assert aggregate("seq-mean-token-sum-norm", LOSS, MASK, norm).item() == 2.5  # (6 + 4) / 4
    assert aggregate("seq-mean-token-sum-norm-mean", LOSS, MASK, norm).item() == 1.25


def test_seq_mean_token_mean_leaves_empty_sequences_out():
    norm = AggNorm.of(MASK)
    assert norm.total_seqs == 2
    assert aggregate("seq-mean-token-mean", LOSS, MASK, norm).item() == 3.0  # (2 + 4) / 2


def test_dp_size_multiplies_token_and_seq_means_only():
    norm = AggNorm.of(MASK, max_len=4, dp_size=4)
    assert aggregate("token-mean", LOSS, MASK, norm).item() == 10.0  # 10 / 4 tokens * 4
    assert aggregate("seq-mean-token-mean", LOSS, MASK, norm).item() == 12.0
    assert aggregate("seq-mean-token-sum-norm", LOSS, MASK, norm).item() == 2.5  # as verl


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
def test_dp_ranks_averaged_like_fsdp_equal_the_single_process_loss(mode):
    gen = torch.Generator().manual_seed(1)
    loss = torch.randn(4, 5, generator=gen)
    mask = (torch.arange(5)[None, :] < torch.tensor([[5], [2], [0], [3]])).long()
    whole = aggregate(mode, loss, mask, AggNorm.of(mask))
    glob = AggNorm.of(mask, dp_size=2)  # counts reduced over both ranks
    ranks = [aggregate(mode, loss[s], mask[s], glob) for s in (slice(0, 2), slice(2, 4))]
    torch.testing.assert_close(sum(ranks) / 2, whole)


# 5. k3: verl kl_penalty_forward("low_var_kl") / EasyVideoR1 compute_kl


def test_k3_is_clamped_to_ten_like_verl():
    logp, ref = torch.tensor([0.0, 0.0]), torch.tensor([5.0, 0.5])
    torch.testing.assert_close(token_kl("k3", logp, ref), torch.tensor([10.0, math.exp(0.5) - 1.5]))
    unclamped = token_kl("k3_unclamped", logp, ref)
    assert unclamped[0].item() == pytest.approx(math.exp(5) - 6)  # 142.41


# 6. GSPO: verl compute_policy_loss_gspo


def test_gspo_clamps_the_combined_log_ratio_at_ten():
    old = torch.zeros(1, 2)
    logp = torch.full((1, 2), 12.0)
    out = POLICY_LOSSES.get("gspo")(logp, old, -torch.ones(1, 2), torch.ones(1, 2), LossOptions())
    torch.testing.assert_close(out.loss, torch.full((1, 2), math.exp(10.0)))


def test_gspo_forces_seq_mean_token_mean_on_the_policy_term_only():
    forced = load_config(None, ["algorithm.policy_loss=gspo", "algorithm.loss_agg_mode=token-mean"])
    assert forced.algorithm.loss_agg_mode == "token-mean"  # the KL and entropy terms keep it
    assert StepSettings.from_config(forced).policy_agg_mode == "seq-mean-token-mean"
    kept = load_config(
        None,
        [
            "algorithm.policy_loss=gspo",
            "algorithm.loss_agg_mode=token-mean",
            "algorithm.gspo_force_seq_mean=false",
        ],
    )
    assert StepSettings.from_config(kept).policy_agg_mode is None


# 7. dual-clip: verl clip_ratio_c = 3.0, EasyVideoR1 clip_ratio_dual = 3.0


def test_dual_clip_is_on_with_c_3_by_default():
    assert LossOptions().dual_clip_c == 3.0 == TrainerConfig().algorithm.dual_clip_c
    logp = torch.log(torch.tensor([[4.0]]))
    out = POLICY_LOSSES.get("ppo_clip")(
        logp, torch.zeros(1, 1), -torch.ones(1, 1), torch.ones(1, 1), LossOptions()
    )
    assert out.loss.item() == pytest.approx(3.0)  # min(-A r, -c A) = min(4, 3)
    off = load_config(None, ["algorithm.dual_clip_c=null"])
    assert off.algorithm.dual_clip_c is None
    gspo = load_config(None, ["algorithm.policy_loss=gspo"])  # default c is not an error there
    assert gspo.algorithm.policy_loss == "gspo"


# 8. KL in the reward: verl apply_kl_penalty, then the estimator sums the token rewards


def test_kl_in_reward_is_summed_into_grpo_rloo_and_remax_scores():
    kl = torch.tensor([[1.0, 2.0], [0.0, 0.0]])
    opts = AdvantageOptions(norm_by_std=False, kl_coef=0.1)
    inputs = _inputs([1.0, 1.0], [0, 0], token_kl=kl)  # scores become [0.7, 1.0]
    torch.testing.assert_close(adv_of("grpo", inputs, opts)[:, 0], torch.tensor([-0.15, 0.15]))
    torch.testing.assert_close(adv_of("rloo", inputs, opts)[:, 0], torch.tensor([-0.3, 0.3]))
    remax = _inputs([1.0, 1.0], [0, 0], token_kl=kl, baseline=torch.tensor([0.5, 0.5]))
    torch.testing.assert_close(adv_of("remax", remax, opts)[:, 0], torch.tensor([0.2, 0.5]))
    cfg = load_config(
        None, ["algorithm.kl.estimator=k1", "algorithm.kl.in_reward=true", "algorithm.kl.coef=0.1"]
    )
    assert AdvantageOptions.from_config(cfg.algorithm).kl_coef == 0.1


# 9. dynamic sampling: verl-recipe dapo_ray_trainer.py, filter_groups


def test_dynamic_sampling_keeps_singletons_and_raises_when_tries_run_out():
    batches = [[("one", [0.0]), ("flat", [1.0, 1.0])], [("flat2", [0.0, 0.0])]]
    result = collect_groups(lambda: batches.pop(0), lambda g: g[1], target=1, max_tries=2)
    assert [g[0] for g in result.groups] == ["one"]
    flat = [[("flat", [1.0, 1.0])], [("flat", [0.0, 0.0])]]
    with pytest.raises(ValueError, match="max_tries"):
        collect_groups(lambda: flat.pop(0), lambda g: g[1], target=1, max_tries=2)


def test_dynamic_sampling_without_limit_keeps_drawing():
    batches = [[("flat", [1.0, 1.0])]] * 6 + [[("sig", [1.0, 0.0])]]
    result = collect_groups(lambda: batches.pop(0), lambda g: g[1], target=1, max_tries=0)
    assert result.tries == 7 and result.groups[0][0] == "sig"


def test_dynamic_sampling_metrics_map_onto_evalkit_rewards():
    rewards = {
        "accuracy": torch.tensor([1.0, 1.0]),
        "format": torch.tensor([1.0, 0.0]),
        "overlong": torch.tensor([0.0, -0.5]),
        "overall": torch.tensor([1.0, 0.4]),
    }
    assert metric_values(rewards, "acc").tolist() == [1.0, 1.0]
    assert metric_values(rewards, "seq_reward").tolist() == pytest.approx([1.0, 0.4])
    assert metric_values(rewards, "score").tolist() == pytest.approx([1.0, 0.9])
    cfg = TrainerConfig().algorithm.dynamic_sampling
    assert (cfg.metric, cfg.keep_singletons, cfg.on_shortfall) == ("acc", True, "raise")


# Trainer III (issue 25). References as above, at volcengine/verl b178a3c.

# ReMax with the KL in the reward: verl apply_kl_penalty + compute_remax_outcome_advantage


def test_remax_gives_each_token_the_kl_from_itself_on():
    # KL 0.4 on token 0, coef 0.1, reward 1, baseline 0.5: token rewards [-.04, 0, 0, 1],
    # reward-to-go [.96, 1, 1, 1], minus the baseline: [.46, .5, .5, .5]
    kl = torch.tensor([[0.4, 0.0, 0.0, 0.0]])
    inputs = AdvantageInputs(
        torch.tensor([1.0]),
        torch.tensor([0]),
        torch.ones(1, 4),
        baseline=torch.tensor([0.5]),
        token_kl=kl,
    )
    adv = adv_of("remax", inputs, AdvantageOptions(kl_coef=0.1))
    torch.testing.assert_close(adv, torch.tensor([[0.46, 0.5, 0.5, 0.5]]))


# REINFORCE++: verl masked_whiten = (G - mean) * rsqrt(var + 1e-8)


@pytest.mark.parametrize("spread", [1e-3, 1e-4, 1e-5])
def test_reinforce_pp_whitens_with_rsqrt_of_var_plus_1e8(spread):
    # two one-token responses, rewards 0 and d: mean d/2, unbiased var d^2/2, so
    # A = +-(d/2) / sqrt(d^2/2 + 1e-8); (G - mean) / (std + 1e-6) gave 0.706 / 0.619 / 0.069
    inputs = AdvantageInputs(torch.tensor([0.0, spread]), torch.tensor([0, 1]), torch.ones(2, 1))
    adv = adv_of("reinforce_plus_plus", inputs, AdvantageOptions(eps=1e-6))
    half = spread / 2
    want = half / math.sqrt(spread**2 / 2 + 1e-8)
    torch.testing.assert_close(adv[:, 0], torch.tensor([-want, want]), rtol=1e-4, atol=1e-7)


def test_reinforce_pp_with_one_valid_token_raises_like_verl():
    mask = torch.tensor([[1.0], [0.0]])
    inputs = AdvantageInputs(torch.tensor([1.0, 0.0]), torch.tensor([0, 1]), mask)
    with pytest.raises(DataError, match="1 valid response token"):  # one line in the CLI
        adv_of("reinforce_plus_plus", inputs)


# verl options by verl's names


def test_verl_option_names_are_in_the_registries():
    from evalkit.trainer.algorithms import ADVANTAGES, AGGREGATIONS, KL_ESTIMATORS

    assert {"reinforce_plus_plus", "reinforce_plus_plus_baseline"} <= set(ADVANTAGES)
    assert "seq-mean-token-sum" in AGGREGATIONS
    wanted = {"kl", "k1", "abs", "k2", "mse", "k3", "low_var_kl", "k1+", "k2+", "k3+"}
    assert wanted | {"low_var_kl+"} <= set(KL_ESTIMATORS)


def test_reinforce_pp_baseline_subtracts_the_group_mean_then_whitens():
    # scores [1, 0 | 1]: centred [.5, -.5 | 0 (singleton: mean 0 -> 1)]; one token each
    # -> tokens [.5, -.5, 1]: mean 1/3, unbiased var ((1/6)^2 + (5/6)^2 + (2/3)^2) / 2 = 7/12
    scores, groups = torch.tensor([1.0, 0.0, 1.0]), torch.tensor([0, 0, 1])
    inputs = AdvantageInputs(scores, groups, torch.ones(3, 1))
    adv = adv_of("reinforce_plus_plus_baseline", inputs)
    values = torch.tensor([0.5, -0.5, 1.0])
    want = (values - 1 / 3) / math.sqrt(7 / 12 + 1e-8)
    torch.testing.assert_close(adv[:, 0], want, rtol=1e-5, atol=1e-6)


def test_seq_mean_token_sum_averages_the_sequence_sums():
    norm = AggNorm.of(MASK, dp_size=2)  # sums 6 and 4 over 2 non-empty sequences, times dp 2
    assert aggregate("seq-mean-token-sum", LOSS, MASK, norm).item() == 10.0


def test_k2_abs_and_straight_through_variants():
    logp = torch.tensor([0.0, -1.0], requires_grad=True)
    ref = torch.tensor([0.5, -1.5])
    torch.testing.assert_close(token_kl("k2", logp, ref), torch.tensor([0.125, 0.125]))
    torch.testing.assert_close(token_kl("abs", logp, ref), torch.tensor([0.5, 0.5]))
    plus = token_kl("low_var_kl+", logp, ref)  # value of k3, gradient of k2 = d
    torch.testing.assert_close(plus, token_kl("k3", logp, ref))
    plus.sum().backward()
    torch.testing.assert_close(logp.grad, torch.tensor([-0.5, 0.5]))


def test_adaptive_kl_controller_follows_verl():
    from evalkit.trainer.algorithms.kl_control import KL_CONTROLLERS

    ctrl = KL_CONTROLLERS.get("adaptive")(0.1, 0.05, 1000)
    for kl in (0.1, 0.1, 0.0):  # errors clipped to +0.2, +0.2, -0.2; 256 rows each
        ctrl.update(kl, n_steps=256)
    # 0.1 * 1.0512 * 1.0512 * 0.9488
    assert ctrl.value == pytest.approx(0.104844, abs=5e-7)
    fixed = KL_CONTROLLERS.get("fixed")(0.1, 0.05, 1000)
    fixed.update(0.1, n_steps=256)
    assert fixed.value == 0.1


def test_adaptive_kl_controller_is_configured_by_verl_names():
    cfg = load_config(
        None,
        [
            "algorithm.kl.estimator=low_var_kl",
            "algorithm.kl.in_reward=true",
            "algorithm.kl.kl_ctrl.type=adaptive",
            "algorithm.kl.kl_ctrl.target_kl=0.05",
            "algorithm.kl.kl_ctrl.horizon=1000",
        ],
    )
    assert cfg.algorithm.kl.kl_ctrl.type == "adaptive"
    with pytest.raises(ConfigError, match="in_reward"):
        load_config(None, ["algorithm.kl.estimator=k1", "algorithm.kl.kl_ctrl.type=adaptive"])


def test_tis_batch_normalize_divides_by_the_mean_weight():
    from evalkit.trainer.algorithms.rollout_correction import rollout_correction

    old = torch.log(torch.tensor([[1.0, 3.0]]))  # weights 1 and 3, capped at 2: [1, 2]
    corr = rollout_correction(old, torch.zeros(1, 2), torch.ones(1, 2), "token", 2.0, True)
    torch.testing.assert_close(corr.weights, torch.tensor([[2 / 3, 4 / 3]]))
    assert corr.metrics["rollout_corr/rollout_is_batch_norm_factor"] == pytest.approx(1.5)


def test_rejection_sampling_drops_sequences_past_the_bound():
    from evalkit.trainer.algorithms.rollout_correction import rollout_correction

    # log-ratios row 0 [0.1, 0.1], row 1 [2, 0]: seq_max_k2 = 0.005 and 2.0; bound 1
    old = torch.tensor([[0.1, 0.1], [2.0, 0.0]])
    corr = rollout_correction(
        old, torch.zeros(2, 2), torch.ones(2, 2), rejection="seq_max_k2", rejection_threshold=1.0
    )
    assert corr.keep.tolist() == [[1.0, 1.0], [0.0, 0.0]]
    assert corr.metrics["rollout_corr/rollout_rs_seq_masked_fraction"] == 0.5
    # token_k1 with ratio bounds 1/2 .. 2: k1 = -log-ratio must lie in [ln 1/2, ln 2]
    tok = rollout_correction(
        old, torch.zeros(2, 2), torch.ones(2, 2), rejection="token_k1", rejection_threshold=2.0
    )
    assert tok.keep.tolist() == [[1.0, 1.0], [0.0, 1.0]]


# GSPO: the seq-mean-token-mean is the policy term's only (verl compute_policy_loss_gspo)


def test_gspo_kl_term_keeps_loss_agg_mode():
    torch.manual_seed(0)
    policy = ToyPolicy()
    batch = collate([Group(0, [BOS, 3], [Response([3, 5, 6, EOS]), Response([EOS])])], PAD)
    with torch.no_grad():
        logp = response_logprobs(policy, batch)
    zero = torch.zeros(batch.response_ids.shape)  # advantages 0: only the KL term counts
    settings = StepSettings.from_config(
        load_config(None, ["algorithm.policy_loss=gspo", "algorithm.kl.estimator=k1"])
    )
    settings = replace(settings, kl_estimator="k1", kl_coef=1.0)
    got = accumulate_loss(policy, StepInputs(batch, logp, zero, logp - 1.0), settings).loss
    # k1 = 1 on each of the 5 tokens (4 + 1): token-mean 1; seq-mean-token-mean would be 1 too,
    # so weigh the tokens: k1 = 1 + position, token-mean (1+2+3+4+1)/5 = 2.2, seq-mean 1.75
    ramp = torch.tensor([[1.0, 2.0, 3.0, 4.0], [1.0, 0.0, 0.0, 0.0]])
    ramped = accumulate_loss(policy, StepInputs(batch, logp, zero, logp - ramp), settings).loss
    assert got == pytest.approx(1.0, rel=1e-5)
    assert ramped == pytest.approx(2.2, rel=1e-5)


# Dynamic sampling: verl-recipe dapo_ray_trainer.py (max_num_gen_batches 0, np.std > 0)


def test_dynamic_sampling_has_no_try_limit_by_default():
    assert TrainerConfig().algorithm.dynamic_sampling.max_tries == 0


def test_dynamic_sampling_keeps_equal_floats_whose_np_std_is_positive():
    from evalkit.trainer.algorithms.dynamic_sampling import has_signal

    # mean of three 0.1 is 0.10000000000000002, so np.std is 1.4e-17 > 0: verl keeps it
    assert has_signal([0.1, 0.1, 0.1])
    assert not has_signal([0.1, 0.1, 0.1], rule="range")
    assert not has_signal([1.0, 1.0, 1.0])


# Metric names: verl's actor/ppo_kl is k1


def test_ppo_kl_metric_is_k1_and_k3_keeps_its_own_name():
    old = torch.zeros(1, 2)
    logp = torch.log(torch.tensor([[2.0, 0.5]]))
    ones = torch.ones(1, 2)
    out = POLICY_LOSSES.get("ppo_clip")(logp, old, ones, ones, LossOptions())
    ln2 = math.log(2)
    assert out.metrics["actor/ppo_kl"].item() == pytest.approx(0.0, abs=1e-7)  # (-ln2 + ln2) / 2
    k3 = ((2 - 1 - ln2) + (0.5 - 1 + ln2)) / 2
    assert out.metrics["actor/ppo_kl_k3"].item() == pytest.approx(k3, rel=1e-5)
    assert out.metrics["actor/pg_clipfrac"].item() == pytest.approx(0.5)  # r = 2 > 1.2, A > 0
    assert "approx_kl" not in out.metrics


def test_recipe_uses_the_coefficient_then_steps_the_controller():
    from evalkit.trainer.recipe import GRPORecipe

    cfg = load_config(
        None,
        [
            "algorithm.kl.estimator=k1",
            "algorithm.kl.in_reward=true",
            "algorithm.kl.coef=0.1",
            "algorithm.kl.kl_ctrl.type=adaptive",
            "algorithm.kl.kl_ctrl.target_kl=0.05",
            "algorithm.kl.kl_ctrl.horizon=1000",
        ],
    )
    recipe = GRPORecipe(cfg)
    # 256 rows with token-mean KL 0.1 (row 0: two tokens 0.1 and 0.1; padding ignored)
    kl, mask = torch.full((256, 2), 0.1), torch.ones(256, 2)
    first = recipe._kl_penalty_step(kl, mask)
    assert first["actor/reward_kl_penalty_coeff"] == 0.1  # this step's rewards used 0.1
    assert first["actor/reward_kl_penalty"] == pytest.approx(0.1, rel=1e-6)
    assert recipe.kl_ctrl.value == pytest.approx(0.1 * 1.0512)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory):
    from evalkit.tiny_checkpoint import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "m", "qwen2_5_vl", seed=0)


@pytest.mark.timeout(600)
def test_adaptive_kl_in_the_reward_runs_a_step_and_saves_its_coefficient(tiny, tmp_path) -> None:
    """verl's apply_kl_penalty in a recipe step: the step's rewards use kl.coef, then the
    adaptive controller moves it, and the checkpoint keeps the moved value for resume."""
    import json

    from evalkit.trainer.checkpoint import latest_checkpoint

    _, line = one_step(
        tiny,
        tmp_path,
        "algorithm.kl.estimator=k3",
        "algorithm.kl.in_reward=true",
        "algorithm.kl.coef=0.1",
        "algorithm.kl.kl_ctrl.type=adaptive",
        "algorithm.kl.kl_ctrl.target_kl=0.05",
        "algorithm.kl.kl_ctrl.horizon=1000",
    )
    assert line["actor/reward_kl_penalty_coeff"] == 0.1
    # the reference is the untrained start: KL 0 < target, error clipped to -0.2, 2 rows
    assert line["actor/reward_kl_penalty"] == pytest.approx(0.0, abs=1e-6)
    moved = 0.1 * (1 - 0.2 * 2 / 1000)
    meta = json.loads((latest_checkpoint(tmp_path / "run" / "ckpt") / "meta.json").read_text())
    assert meta["extra"]["kl_coef"] == pytest.approx(moved)
