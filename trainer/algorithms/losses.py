"""Policy losses, chosen by name from :data:`POLICY_LOSSES`.

A loss maps new and old per-token log-probs, advantages and the response mask to a per-token
loss (B, T), zero on padding, plus metrics (masked token means over the given tokens), under
verl's names where verl logs the quantity (``compute_policy_loss_*`` in
verl/trainer/ppo/core_algos.py): ``actor/ppo_kl`` = mean of k1 = log pi_old - log pi (the
log-ratio clamped to +-20 as there; GSPO unclamped, as there), ``actor/pg_clipfrac`` (tokens
whose clip bound bites, either side), ``actor/pg_clipfrac_lower`` (dual-clip bites; 0 for GSPO
and CISPO, as verl). evalkit's own: ``clipfrac_low`` / ``clipfrac_high`` (the two sides of
pg_clipfrac) and ``actor/ppo_kl_k3`` = mean of k3(old -> new) = (r - 1) - log r with
r = pi/pi_old (named ``approx_kl`` before; a different estimate of the same KL, >= 0).
Turning the per-token loss into one number is the job of :mod:`trainer.algorithms.aggregation`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from evalkit.registry import Registry

from .settings import AlgorithmSettings

# exp() of a log-ratio beyond this overflows float32 or is meaningless; clamping also zeroes
# the gradient there, which is what a clipped objective would do anyway.
_MAX_LOG_RATIO = 20.0
# verl's GSPO clamps the combined log-ratio from above only, at 10.
_GSPO_MAX_LOG_RATIO = 10.0
# verl (clip_ratio_c) and EasyVideoR1 (clip_ratio_dual) turn dual-clip on with c = 3.
DUAL_CLIP_C = 3.0


@dataclass(frozen=True)
class LossOptions:
    """Clip ranges: the ratio is clipped to [1 - clip_eps_low, 1 + clip_eps_high].

    ``dual_clip_c`` defaults to 3 (on), as verl's ``clip_ratio_c`` and EasyVideoR1's
    ``clip_ratio_dual``; None turns dual-clip off. Only ppo_clip uses it.
    """

    clip_eps_low: float = 0.2
    clip_eps_high: float = 0.2
    dual_clip_c: float | None = DUAL_CLIP_C

    @classmethod
    def from_config(cls, algo: AlgorithmSettings) -> LossOptions:
        """Build from an :class:`trainer.config.AlgorithmConfig` (or any with its shape)."""
        return cls(algo.clip_eps_low, algo.clip_eps_high, algo.dual_clip_c)


@dataclass
class LossOutput:
    """Per-token loss (B, T), zero where the mask is 0, and scalar metrics."""

    loss: Tensor
    metrics: dict[str, Tensor]


PolicyLossFn = Callable[[Tensor, Tensor, Tensor, Tensor, LossOptions], LossOutput]
POLICY_LOSSES: Registry[PolicyLossFn] = Registry("policy loss", group="evalkit.policy_losses")


def masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    """Mean of ``values`` over positions where ``mask`` is 1 (0 when there are none)."""
    mask = mask.to(values.dtype)
    return (values * mask).sum() / mask.sum().clamp(min=1)


def _log_ratio(logp: Tensor, old_logp: Tensor) -> Tensor:
    return (logp - old_logp).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)


def _metrics(
    log_ratio: Tensor, mask: Tensor, clipped_low: Tensor, clipped_high: Tensor
) -> dict[str, Tensor]:
    """The clip fractions and both KL estimates of ``log_ratio`` = log pi - log pi_old."""
    lr = log_ratio.detach()
    safe = lr.clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)  # GSPO hands its log-ratio unclamped
    low, high = masked_mean(clipped_low.float(), mask), masked_mean(clipped_high.float(), mask)
    return {
        "clipfrac_low": low,
        "clipfrac_high": high,
        "actor/pg_clipfrac": low + high,
        "actor/pg_clipfrac_lower": torch.zeros(()),
        "actor/ppo_kl": masked_mean(-lr, mask),
        "actor/ppo_kl_k3": masked_mean(safe.exp() - 1 - safe, mask),
    }


def _finish(loss: Tensor, mask: Tensor) -> Tensor:
    return torch.where(mask.bool(), loss, torch.zeros_like(loss))


def _clipped_surrogate(
    ratio: Tensor, adv: Tensor, opts: LossOptions
) -> tuple[Tensor, Tensor, Tensor]:
    """max(-A r, -A clip(r)): the pessimistic PPO surrogate, and where each bound bites."""
    low, high = 1.0 - opts.clip_eps_low, 1.0 + opts.clip_eps_high
    loss = torch.maximum(-adv * ratio, -adv * ratio.clamp(low, high))
    clipped_high = (adv > 0) & (ratio > high)
    clipped_low = (adv < 0) & (ratio < low)
    return loss, clipped_low, clipped_high


@POLICY_LOSSES("ppo_clip", "vanilla")
def ppo_clip(
    logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, opts: LossOptions
) -> LossOutput:
    """PPO-clip with asymmetric clip and optional dual-clip.

    r_t = exp(logp_t - old_logp_t);  L_t = max(-A_t r_t, -A_t clip(r_t, 1 - eps_low, 1 + eps_high)).
    Dual-clip (c > 1), for A_t < 0 only: L_t <- min(L_t, -c A_t), which bounds the loss (and
    zeroes the gradient) when r_t > c on a negative advantage.
    """
    log_ratio = _log_ratio(logp, old_logp)
    ratio = log_ratio.exp()
    loss, clipped_low, clipped_high = _clipped_surrogate(ratio, adv, opts)
    metrics = _metrics(log_ratio, mask, clipped_low, clipped_high)
    if opts.dual_clip_c is not None:
        bound = -adv * opts.dual_clip_c
        dual = (adv < 0) & (loss > bound)
        loss = torch.where(adv < 0, torch.minimum(loss, bound), loss)
        metrics["actor/pg_clipfrac_lower"] = masked_mean(dual.float(), mask)
    return LossOutput(_finish(loss, mask), metrics)


@POLICY_LOSSES("gspo")
def gspo(
    logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, opts: LossOptions
) -> LossOutput:
    """GSPO: the clipped surrogate on a sequence-level ratio.

    s_i = exp( (1/|y_i|) sum_t (logp_t - old_logp_t) ), applied per token in its GSPO-token
    form s_i,t = sg(s_i) * exp(logp_t - sg(logp_t)) (same value as s_i; the gradient of
    sum_t s_i,t / |y_i| is that of s_i). L_t = max(-A_t s_i,t, -A_t clip(s_i,t, 1-eps_low,
    1+eps_high)); every token of a sequence is clipped together. As in verl's
    ``compute_policy_loss_gspo`` (verl/trainer/ppo/core_algos.py) the token log-ratios are
    averaged unclamped and the combined log-ratio is clamped from above at 10; the step
    aggregates this policy term with seq-mean-token-mean (``gspo_force_seq_mean``; the KL and
    entropy terms keep ``loss_agg_mode``, as verl). Its clip ranges are small (the paper uses
    3e-4 / 4e-4). Its ``actor/ppo_kl`` uses the unclamped token log-ratio, as verl's.
    """
    m = mask.to(logp.dtype)
    seq_log_ratio = ((logp - old_logp) * m).sum(-1) / m.sum(-1).clamp(min=1)
    token_log_ratio = seq_log_ratio.detach()[:, None] + logp - logp.detach()
    ratio = token_log_ratio.clamp(max=_GSPO_MAX_LOG_RATIO).exp()
    loss, clipped_low, clipped_high = _clipped_surrogate(ratio, adv, opts)
    metrics = _metrics(logp - old_logp, mask, clipped_low, clipped_high)
    return LossOutput(_finish(loss, mask), metrics)


@POLICY_LOSSES("cispo")
def cispo(
    logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, opts: LossOptions
) -> LossOutput:
    """CISPO: L_t = -sg(clip(r_t, 1 - eps_low, 1 + eps_high)) * A_t * logp_t.

    The importance weight is clipped and detached, so no token's gradient is ever dropped;
    clipping only caps its weight. The metrics count tokens whose weight was capped
    (either sign of A). MiniMax-M1 clips only from above: set clip_eps_low = 1.
    """
    log_ratio = _log_ratio(logp, old_logp)
    ratio = log_ratio.exp().detach()
    low, high = 1.0 - opts.clip_eps_low, 1.0 + opts.clip_eps_high
    weight = ratio.clamp(low, high)
    loss = -weight * adv * logp
    metrics = _metrics(log_ratio, mask, ratio < low, ratio > high)
    return LossOutput(_finish(loss, mask), metrics)
