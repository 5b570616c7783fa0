"""Advantage estimators, chosen by name from :data:`ADVANTAGES`.

Every estimator maps :class:`AdvantageInputs` (rewards per sequence, group ids, the response
mask) to advantages of shape (B, T) that are zero on masked-out tokens. Group statistics use
the unbiased (n-1) standard deviation; a group of one response carries no baseline
information and gets advantage 0 from the group-relative estimators (GRPO, RLOO, GDPO).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from evalkit.registry import Registry

if TYPE_CHECKING:
    from ..config import AlgorithmConfig


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
    """(B, T) REINFORCE++: per-token KL to the reference, folded into the rewards."""


@dataclass(frozen=True)
class AdvantageOptions:
    """Knobs shared by the estimators (each uses the ones it documents)."""

    eps: float = 1e-6
    norm_by_std: bool = True
    gamma: float = 1.0
    kl_coef: float = 0.0
    batch_norm: bool = True
    key_weights: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_config(cls, algo: AlgorithmConfig) -> AdvantageOptions:
        """Build from an :class:`trainer.config.AlgorithmConfig`."""
        kl_in_reward = algo.kl.estimator != "off" and algo.kl.in_reward
        return cls(
            eps=algo.adv_eps,
            norm_by_std=algo.norm_by_std,
            gamma=algo.gamma,
            kl_coef=algo.kl.coef if kl_in_reward else 0.0,
            batch_norm=algo.gdpo_batch_norm,
        )


AdvantageFn = Callable[[AdvantageInputs, AdvantageOptions], Tensor]
ADVANTAGES: Registry[AdvantageFn] = Registry("advantage estimator")


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
    adv = values - mean
    if opts.norm_by_std:
        adv = adv / (std + opts.eps)
    return torch.where(count > 1, adv, torch.zeros_like(adv))


def _to_tokens(adv: Tensor, mask: Tensor) -> Tensor:
    return adv[:, None] * mask.to(adv.dtype)


@ADVANTAGES("grpo")
def grpo(inputs: AdvantageInputs, opts: AdvantageOptions) -> Tensor:
    """GRPO: A_i = (r_i - mean_g(r)) / (std_g(r) + eps), the same for every token of i.

    With ``norm_by_std=False`` (Dr. GRPO): A_i = r_i - mean_g(r). mean_g and std_g run over
    the responses sharing i's group id.
    """
    rewards = _overall(inputs, "grpo")
    return _to_tokens(_group_normalise(rewards, inputs.group_ids, opts), inputs.response_mask)


@ADVANTAGES("rloo")
def rloo(inputs: AdvantageInputs, opts: AdvantageOptions) -> Tensor:
    """RLOO: A_i = r_i - (sum_{j in g, j != i} r_j) / (n_g - 1), the leave-one-out baseline."""
    rewards = _overall(inputs, "rloo")
    mean, _, count = group_stats(rewards, inputs.group_ids)
    others = (mean * count - rewards) / (count - 1).clamp(min=1)
    adv = torch.where(count > 1, rewards - others, torch.zeros_like(rewards))
    return _to_tokens(adv, inputs.response_mask)


@ADVANTAGES("reinforce_pp", "reinforce++")
def reinforce_pp(inputs: AdvantageInputs, opts: AdvantageOptions) -> Tensor:
    """REINFORCE++: token returns, then normalised over all valid tokens of the batch.

    Token rewards: r_t = -kl_coef * kl_t on every token (when ``token_kl`` is given), plus the
    sequence reward on its last valid token. Returns G_t = sum_{s>=t} gamma^(s-t) r_s.
    A_t = (G_t - mean(G)) / (std(G) + eps), mean and unbiased std over valid tokens.
    """
    rewards = _overall(inputs, "reinforce_pp")
    mask = inputs.response_mask.float()
    bsz, t_len = mask.shape
    token_rewards = torch.zeros(bsz, t_len, device=mask.device)
    if inputs.token_kl is not None and opts.kl_coef:
        token_rewards = token_rewards - opts.kl_coef * inputs.token_kl.float() * mask
    positions = torch.arange(t_len, device=mask.device).expand(bsz, t_len)
    last = torch.where(mask > 0, positions, -1).max(dim=1).values
    rows = torch.nonzero(last >= 0).flatten()
    token_rewards[rows, last[rows]] += rewards[rows]
    returns = torch.zeros_like(token_rewards)
    running = torch.zeros(bsz, device=mask.device)
    for t in range(t_len - 1, -1, -1):
        running = token_rewards[:, t] + opts.gamma * running * mask[:, t]
        returns[:, t] = running
    return _masked_whiten(returns, mask, opts.eps)


def _masked_whiten(values: Tensor, mask: Tensor, eps: float) -> Tensor:
    n = mask.sum()
    if n < 2:
        return torch.zeros_like(values)
    mean = (values * mask).sum() / n
    var = (((values - mean) ** 2) * mask).sum() / (n - 1)
    return (values - mean) / (var.sqrt() + eps) * mask


@ADVANTAGES("remax")
def remax(inputs: AdvantageInputs, opts: AdvantageOptions) -> Tensor:
    """ReMax: A_i = r_i - b_i, b_i = reward of the greedy rollout for i's prompt (``baseline``)."""
    rewards = _overall(inputs, "remax")
    if inputs.baseline is None:
        raise ValueError("remax needs AdvantageInputs.baseline: the greedy rollout's reward")
    return _to_tokens(rewards - inputs.baseline.float(), inputs.response_mask)


@ADVANTAGES("gdpo")
def gdpo(inputs: AdvantageInputs, opts: AdvantageOptions) -> Tensor:
    """GDPO: normalise each reward key within its group, sum, optionally batch-normalise.

    A_i = sum_k w_k * (r_k,i - mean_g(r_k)) / (std_g(r_k) + eps)   (w_k from ``key_weights``,
    default 1; k runs over the component rewards, e.g. accuracy and format; a key named
    ``overall`` is their weighted sum and is skipped);
    with ``batch_norm``: A_i <- (A_i - mean_B(A)) / (std_B(A) + eps) over the B sequences.
    """
    if not isinstance(inputs.rewards, dict) or not inputs.rewards:
        raise ValueError("gdpo needs per-key rewards: a dict like {'accuracy': ..., 'format': ...}")
    total = torch.zeros(inputs.response_mask.shape[0], device=inputs.response_mask.device)
    for key, values in inputs.rewards.items():
        if key == "overall":
            continue
        weight = opts.key_weights.get(key, 1.0)
        total = total + weight * _group_normalise(values.float(), inputs.group_ids, opts)
    if opts.batch_norm and total.numel() > 1:
        total = (total - total.mean()) / (total.std() + opts.eps)
    return _to_tokens(total, inputs.response_mask)
