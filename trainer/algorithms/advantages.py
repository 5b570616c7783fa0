"""Advantage estimators, chosen by name from :data:`ADVANTAGES`.

Every estimator maps :class:`AdvantageInputs` (rewards per sequence, group ids, the response
mask) to advantages of shape (B, T) that are zero on masked-out tokens. Group statistics use
the unbiased (n-1) standard deviation; a group of one response carries no baseline
information and gets advantage 0 from the group-relative estimators (GRPO, RLOO, GDPO).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import Tensor

from evalkit.errors import DataError
from evalkit.registry import Registry

from .settings import AlgorithmSettings


class BatchError(DataError, ValueError):
    """A batch the algorithm cannot train on (one line for people, as any DataError)."""


@dataclass
class AdvantageInputs:
    """What an estimator may look at; estimators say which optional fields they need."""

    rewards: Tensor | dict[str, Tensor]
    """(B,) overall reward per sequence, or a per-key dict of (B,) tensors."""
    group_ids: Tensor
    """(B,) integer id of the prompt each sequence answers (its group)."""
    response_mask: Tensor
    """(B, T) 1 on response tokens, 0 on padding."""
    baseline: Tensor | None = None
    """(B,) ReMax: reward of the greedy rollout of each sequence's prompt."""
    token_kl: Tensor | None = None
    """(B, T) per-token KL to the reference, folded into the token rewards with ``kl_coef``
    as verl's ``apply_kl_penalty`` does (token reward r_t = -kl_coef * kl_t, plus the score on
    the last valid token). The estimators then read them as verl's do: GRPO, RLOO and
    REINFORCE++-baseline sum them (score - kl_coef * sum_t kl_t), REINFORCE++ and ReMax take
    each token's reward-to-go (the KL from that token on)."""


@dataclass(frozen=True)
class AdvantageOptions:
    """Knobs shared by the estimators (each uses the ones it documents)."""

    eps: float = 1e-6
    norm_by_std: bool = True
    gamma: float = 1.0
    kl_coef: float = 0.0
    singleton: Literal["verl", "zero"] = "verl"
    """Groups of one: "verl" = mean 0 / std 1 (GRPO r/(1+eps), RLOO r); "zero" = advantage 0."""
    gdpo_whiten: Literal["tokens", "sequences", "off"] = "tokens"
    """GDPO's final normalisation of the summed advantages (see :func:`gdpo`)."""
    gdpo_reward_keys: tuple[str, ...] | None = ("accuracy", "format")
    """GDPO's reward keys (EasyVideoR1 ``gdpo_reward_keys``); None = every key but overall."""
    key_weights: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_config(cls, algo: AlgorithmSettings) -> AdvantageOptions:
        """Build from an :class:`trainer.config.AlgorithmConfig` (or any with its shape)."""
        kl_in_reward = algo.kl.estimator != "off" and algo.kl.in_reward
        keys = algo.gdpo_reward_keys
        return cls(
            eps=algo.adv_eps,
            norm_by_std=algo.norm_by_std,
            gamma=algo.gamma,
            kl_coef=algo.kl.coef if kl_in_reward else 0.0,
            singleton=algo.singleton_groups,
            gdpo_whiten=algo.gdpo_whiten,
            gdpo_reward_keys=tuple(keys) if keys is not None else None,
            key_weights=dict(algo.gdpo_key_weights),
        )


AdvantageFn = Callable[[AdvantageInputs, AdvantageOptions], Tensor]
ADVANTAGES: Registry[AdvantageFn] = Registry("advantage estimator", group="evalkit.advantages")


def compute_advantages(
    name: str, inputs: AdvantageInputs, options: AdvantageOptions | None = None
) -> Tensor:
    """Run the estimator registered as ``name``."""
    return ADVANTAGES.get(name)(inputs, options or AdvantageOptions())


def _overall(inputs: AdvantageInputs, who: str) -> Tensor:
    rewards = inputs.rewards
    if isinstance(rewards, dict):
        if "overall" not in rewards:
            raise ValueError(f"{who} needs a (B,) reward tensor or a dict with key 'overall'")
        rewards = rewards["overall"]
    if rewards.dim() != 1 or rewards.shape[0] != inputs.response_mask.shape[0]:
        raise ValueError(
            f"{who}: rewards must have shape (B,) = ({inputs.response_mask.shape[0]},), "
            f"got {tuple(rewards.shape)}"
        )
    return rewards.float()


def _overall_with_kl(inputs: AdvantageInputs, opts: AdvantageOptions, who: str) -> Tensor:
    """The overall reward minus kl_coef * sum_t kl_t (verl: the KL enters the token rewards,
    which summed-score estimators add up over the response)."""
    rewards = _overall(inputs, who)
    if inputs.token_kl is not None and opts.kl_coef:
        mask = inputs.response_mask.to(rewards.dtype)
        rewards = rewards - opts.kl_coef * (inputs.token_kl.float() * mask).sum(-1)
    return rewards


def _token_rewards(inputs: AdvantageInputs, opts: AdvantageOptions, who: str) -> Tensor:
    """verl's ``token_level_rewards``: -kl_coef * kl_t on every valid token (when ``token_kl``
    is given) plus the sequence reward on the row's last valid token."""
    rewards = _overall(inputs, who)
    mask = inputs.response_mask.float()
    bsz, t_len = mask.shape
    token_rewards = torch.zeros(bsz, t_len, device=mask.device)
    if inputs.token_kl is not None and opts.kl_coef:
        token_rewards = token_rewards - opts.kl_coef * inputs.token_kl.float() * mask
    positions = torch.arange(t_len, device=mask.device).expand(bsz, t_len)
    last = torch.where(mask > 0, positions, -1).max(dim=1).values
    rows = torch.nonzero(last >= 0).flatten()
    token_rewards[rows, last[rows]] += rewards[rows]
    return token_rewards


def group_stats(values: Tensor, group_ids: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Per-element (mean, unbiased std, size) of the element's group; std is 0 for size 1."""
    _, inv = torch.unique(group_ids, return_inverse=True)
    n_groups = int(inv.max()) + 1 if inv.numel() else 0
    zeros = torch.zeros(n_groups, dtype=values.dtype, device=values.device)
    count = zeros.scatter_add(0, inv, torch.ones_like(values))
    mean = zeros.scatter_add(0, inv, values) / count
    sq = zeros.scatter_add(0, inv, (values - mean[inv]) ** 2)
    std = (sq / (count - 1).clamp(min=1)).sqrt()
    return mean[inv], std[inv], count[inv]


def _group_normalise(values: Tensor, group_ids: Tensor, opts: AdvantageOptions) -> Tensor:
    mean, std, count = group_stats(values, group_ids)
    single = count < 2
    if opts.singleton == "zero":
        return torch.where(single, torch.zeros_like(values), _scale(values - mean, std, opts))
    # verl: a group of one has mean 0 and std 1
    mean = torch.where(single, torch.zeros_like(mean), mean)
    std = torch.where(single, torch.ones_like(std), std)
    return _scale(values - mean, std, opts)


def _scale(centred: Tensor, std: Tensor, opts: AdvantageOptions) -> Tensor:
    return centred / (std + opts.eps) if opts.norm_by_std else centred


def _to_tokens(adv: Tensor, mask: Tensor) -> Tensor:
    return adv[:, None] * mask.to(adv.dtype)


@ADVANTAGES("grpo")
def grpo(inputs: AdvantageInputs, opts: AdvantageOptions) -> Tensor:
    """GRPO: A_i = (r_i - mean_g(r)) / (std_g(r) + eps), the same for every token of i.

    With ``norm_by_std=False`` (Dr. GRPO): A_i = r_i - mean_g(r). mean_g and std_g run over
    the responses sharing i's group id.
    """
    rewards = _overall_with_kl(inputs, opts, "grpo")
    return _to_tokens(_group_normalise(rewards, inputs.group_ids, opts), inputs.response_mask)


@ADVANTAGES("rloo")
def rloo(inputs: AdvantageInputs, opts: AdvantageOptions) -> Tensor:
    """RLOO: A_i = r_i - (sum_{j in g, j != i} r_j) / (n_g - 1), the leave-one-out baseline.

    A group of one: A = r (verl, baseline 0) or 0 (``singleton="zero"``).
    """
    rewards = _overall_with_kl(inputs, opts, "rloo")
    mean, _, count = group_stats(rewards, inputs.group_ids)
    others = (mean * count - rewards) / (count - 1).clamp(min=1)
    alone = rewards if opts.singleton == "verl" else torch.zeros_like(rewards)
    adv = torch.where(count > 1, rewards - others, alone)
    return _to_tokens(adv, inputs.response_mask)


@ADVANTAGES("reinforce_plus_plus", "reinforce_pp", "reinforce++")
def reinforce_pp(inputs: AdvantageInputs, opts: AdvantageOptions) -> Tensor:
    """REINFORCE++ (verl ``compute_reinforce_plus_plus_outcome_advantage``): token returns,
    whitened over all valid tokens of the batch.

    Token rewards as :func:`_token_rewards`; returns G_t = sum_{s>=t} gamma^(s-t) r_s;
    A = masked_whiten(G) = (G - mean) * rsqrt(var + 1e-8) with verl's mean and unbiased
    variance over the valid tokens (:func:`masked_whiten`; no ``adv_eps`` here). A batch with
    fewer than two valid tokens raises, as verl does.
    """
    mask = inputs.response_mask.float()
    token_rewards = _token_rewards(inputs, opts, "reinforce_plus_plus")
    returns = torch.zeros_like(token_rewards)
    running = torch.zeros(mask.shape[0], device=mask.device)
    for t in range(mask.shape[1] - 1, -1, -1):
        running = token_rewards[:, t] + opts.gamma * running * mask[:, t]
        returns[:, t] = running
    return masked_whiten(returns, mask, "reinforce_plus_plus")


@ADVANTAGES("reinforce_plus_plus_baseline", "reinforce_pp_baseline")
def reinforce_pp_baseline(inputs: AdvantageInputs, opts: AdvantageOptions) -> Tensor:
    """REINFORCE++-baseline (verl ``compute_reinforce_plus_plus_baseline_outcome_advantage``).

    s_i = sum_t r_t (the score minus kl_coef * sum_t kl_t); s_i - mean_g(s) (a group of one
    has mean 0, as verl), the same for every valid token; then whitened over the batch's
    valid tokens by :func:`masked_whiten` (fewer than two valid tokens raise, as verl).
    """
    scores = _overall_with_kl(inputs, opts, "reinforce_plus_plus_baseline")
    mean, _, count = group_stats(scores, inputs.group_ids)
    centred = scores - torch.where(count > 1, mean, torch.zeros_like(mean))
    mask = inputs.response_mask.float()
    return masked_whiten(_to_tokens(centred, mask), mask, "reinforce_plus_plus_baseline")


def masked_whiten(values: Tensor, mask: Tensor, who: str | None = None) -> Tensor:
    """verl's ``masked_whiten`` (verl/utils/torch_functional.py), then masked.

    mean = sum(m v) / (n + 1e-8), var = sum(m (v - mean)^2) / (n + 1e-8) * n / (n - 1),
    A = (v - mean) * rsqrt(var + 1e-8). verl's ``masked_var`` raises when n < 2; so does this
    with ``who`` (the estimator's name) given. Without ``who`` (EasyVideoR1's copy, used by
    GDPO) Bessel's correction is skipped instead when there is one token or none.
    """
    n = mask.sum()
    if who is not None and n < 2:
        raise BatchError(
            f"{who}: the batch has {int(n)} valid response token(s); whitening needs at least "
            "2 (verl's masked_whiten raises too): use larger batches or longer responses"
        )
    mean = (values * mask).sum() / (n + 1e-8)
    var = (((values - mean) ** 2) * mask).sum() / (n + 1e-8)
    if n > 1:
        var = var * n / (n - 1)
    return (values - mean) * torch.rsqrt(var + 1e-8) * mask


@ADVANTAGES("remax")
def remax(inputs: AdvantageInputs, opts: AdvantageOptions) -> Tensor:
    """ReMax (verl ``compute_remax_outcome_advantage``): A_t = G_t - b, with G_t the token's
    reward-to-go sum_{s>=t} r_s (undiscounted; :func:`_token_rewards`, so with the KL in the
    reward each token carries the KL from itself on) and b the reward of the greedy rollout for
    the row's prompt (``baseline``). Without KL, A_t = r - b on every valid token."""
    if inputs.baseline is None:
        raise ValueError("remax needs AdvantageInputs.baseline: the greedy rollout's reward")
    mask = inputs.response_mask.float()
    token_rewards = _token_rewards(inputs, opts, "remax") * mask
    returns = token_rewards.flip(-1).cumsum(-1).flip(-1)
    return (returns - inputs.baseline.float()[:, None]) * mask


@ADVANTAGES("gdpo")
def gdpo(inputs: AdvantageInputs, opts: AdvantageOptions) -> Tensor:
    """GDPO: normalise each reward key within its group, sum, then whiten.

    A_i = sum_k w_k * (r_k,i - mean_g(r_k)) / (std_g(r_k) + eps), k over ``gdpo_reward_keys``
    (default accuracy and format, as EasyVideoR1's ``AlgorithmConfig.gdpo_reward_keys``; None:
    every key but ``overall``), w_k from ``key_weights`` (default 1). Then ``gdpo_whiten``:
    "tokens" (EasyVideoR1 ``compute_advantage`` in verl/trainer/ray_trainer.py: the token-level
    advantages whitened over the valid tokens of the batch, token-weighted mean and unbiased
    variance, (A - mean) * rsqrt(var + 1e-8)); "sequences": (A - mean_B) / (std_B + eps) over
    the B sequences; "off": no batch normalisation.
    """
    if not isinstance(inputs.rewards, dict) or not inputs.rewards:
        raise ValueError("gdpo needs per-key rewards: a dict like {'accuracy': ..., 'format': ...}")
    keys = opts.gdpo_reward_keys
    if keys is None:
        keys = tuple(k for k in inputs.rewards if k != "overall")
    missing = [k for k in keys if k not in inputs.rewards]
    if missing:
        raise ValueError(
            f"gdpo: reward keys {missing} not among the rewards {sorted(inputs.rewards)}; "
            "set algorithm.gdpo_reward_keys to keys the reward function returns"
        )
    mask = inputs.response_mask.float()
    total = torch.zeros(mask.shape[0], device=mask.device)
    for key in keys:
        weight = opts.key_weights.get(key, 1.0)
        values = inputs.rewards[key].float()
        total = total + weight * _group_normalise(values, inputs.group_ids, opts)
    if opts.gdpo_whiten == "tokens":
        return masked_whiten(_to_tokens(total, mask), mask)
    if opts.gdpo_whiten == "sequences" and total.numel() > 1:
        total = (total - total.mean()) / (total.std() + opts.eps)
    return _to_tokens(total, mask)
