"""Golden values for each formula where evalkit follows verl / EasyVideoR1 (issue 15, item 1).

Every expected number is computed by hand from the reference definitions named in the test:
verl/trainer/ppo/core_algos.py (volcengine/verl), dapo/dapo_ray_trainer.py (verl-recipe) and
verl/trainer/ray_trainer.py + verl/utils/torch_functional.py (cyuQ1n/EasyVideoR1).
"""

from __future__ import annotations

import math

import pytest
import torch

from evalkit.trainer.algorithms.advantages import AdvantageInputs, AdvantageOptions
from evalkit.trainer.algorithms.advantages import compute_advantages as adv_of
from evalkit.trainer.algorithms.aggregation import AggNorm, aggregate
from evalkit.trainer.algorithms.dynamic_sampling import collect_groups, metric_values
from evalkit.trainer.algorithms.kl import token_kl
from evalkit.trainer.algorithms.losses import POLICY_LOSSES, LossOptions
from evalkit.trainer.config import TrainerConfig, load_config

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


def test_gspo_forces_seq_mean_token_mean_unless_told_not_to():
    forced = load_config(None, ["algorithm.policy_loss=gspo", "algorithm.loss_agg_mode=token-mean"])
    assert forced.algorithm.loss_agg_mode == "seq-mean-token-mean"
    kept = load_config(
        None,
        [
            "algorithm.policy_loss=gspo",
            "algorithm.loss_agg_mode=token-mean",
            "algorithm.gspo_force_seq_mean=false",
        ],
    )
    assert kept.algorithm.loss_agg_mode == "token-mean"


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
