"""Rollout correction: the behaviour policy is the engine's, not the trainer's.

The rollout engine samples from pi_rollout (it suppresses visual tokens, applies top_p,
runs in another precision); the loss's ratio uses pi_old, the trainer's log-probs of the
same tokens from the same weights. Two things here:

- :func:`mismatch_metrics`: how far apart the two are on the sampled tokens, per step:
  ``abs_logp_diff`` = mean |log pi_rollout - log pi_old|, ``k3_kl`` = mean of r - 1 - log r
  with r = pi_old / pi_rollout (an estimate of KL(pi_rollout || pi_old) from tokens sampled
  by pi_rollout) and ``kl`` = mean of log pi_rollout - log pi_old (the k1 estimate). These
  are verl's ``k3_kl`` / ``kl`` (``compute_offpolicy_metrics`` in
  verl/trainer/ppo/rollout_corr_helper.py).
- :func:`is_weights`: truncated importance sampling (TIS) weights that make the policy
  gradient of rollout samples an estimate of the gradient under pi_old. ``token``:
  w_t = min(pi_old(y_t) / pi_rollout(y_t), cap); ``sequence``: w = min(prod_t of those
  ratios, cap), the same for every token of the sequence. The log-ratio (or its sum) is
  clamped to +-20 before exp, weights are zero on padding and detached: they change the
  measure the samples stand for, not the objective. This is verl's
  ``compute_rollout_correction_weights`` (same file; ``rollout_is`` = token | sequence,
  ``rollout_is_threshold`` = cap, default 2) without its optional batch normalisation;
  the loss multiplies the per-token policy loss by them (``pg_losses * rollout_is_weights``
  in verl/trainer/ppo/core_algos.py ``compute_policy_loss_vanilla``), the KL term not.

Sequence-level weights are unbiased (before truncation) for sequence-level rewards;
token-level ones are biased but have far less variance. The cap trades bias for variance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

CorrectionMode = Literal["none", "token", "sequence"]

# verl's SAFETY_BOUND: exp(20) ~ 4.9e8 keeps exp() finite in float32.
_SAFETY_BOUND = 20.0


@dataclass
class Correction:
    """TIS weights (None when the mode is ``none``) and the step's mismatch metrics."""

    weights: Tensor | None
    metrics: dict[str, float]


def _masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    return (values * mask).sum() / mask.sum().clamp(min=1)


def mismatch_metrics(old_logp: Tensor, rollout_logp: Tensor, mask: Tensor) -> dict[str, float]:
    """Token means over ``mask`` of |log pi_rollout - log pi_old|, k3 and k1 KL estimates."""
    m = mask.to(old_logp.dtype)
    log_ratio = torch.where(m.bool(), old_logp - rollout_logp, torch.zeros_like(old_logp))
    safe = log_ratio.clamp(-_SAFETY_BOUND, _SAFETY_BOUND)
    return {
        "rollout_corr/abs_logp_diff": float(_masked_mean(log_ratio.abs(), m)),
        "rollout_corr/k3_kl": float(_masked_mean(safe.exp() - 1 - safe, m)),
        "rollout_corr/kl": float(_masked_mean(-log_ratio, m)),
        "rollout_corr/tokens": float(m.sum()),
    }


def is_weights(
    old_logp: Tensor, rollout_logp: Tensor, mask: Tensor, mode: CorrectionMode, cap: float
) -> Tensor:
    """Truncated importance weights (B, T), detached, zero where ``mask`` is 0 (see module doc)."""
    if mode not in ("token", "sequence"):
        raise ValueError(f"rollout correction mode must be token or sequence, got {mode!r}")
    if cap <= 0:
        raise ValueError(f"rollout correction cap must be > 0, got {cap}")
    m = mask.to(old_logp.dtype)
    log_ratio = torch.where(m.bool(), old_logp - rollout_logp, torch.zeros_like(old_logp))
    if mode == "sequence":
        log_ratio = log_ratio.sum(-1, keepdim=True).expand_as(log_ratio)
    weights = log_ratio.clamp(-_SAFETY_BOUND, _SAFETY_BOUND).exp() * m
    return weights.clamp(max=cap).detach()


def rollout_correction(
    old_logp: Tensor,
    rollout_logp: Tensor | None,
    mask: Tensor,
    mode: CorrectionMode = "none",
    cap: float = 2.0,
) -> Correction:
    """Mismatch metrics and (mode token/sequence) TIS weights for one rollout batch.

    ``mask`` selects the tokens the engine sampled (response tokens of online rows);
    elsewhere, e.g. a mix-policy offline slot, the weight is 1 (no correction). Without
    engine log-probs (``rollout_logp`` None) there is nothing to measure; asking for a
    correction then is an error.
    """
    if rollout_logp is None:
        if mode != "none":
            raise ValueError(
                f"algorithm.rollout_correction.mode={mode} needs the rollout engine's log-probs "
                "of the sampled tokens; this engine returned none (use rollout.engine hf or vllm)"
            )
        return Correction(None, {})
    metrics = mismatch_metrics(old_logp, rollout_logp, mask)
    if mode == "none":
        return Correction(None, metrics)
    weights = is_weights(old_logp, rollout_logp, mask, mode, cap)
    weights = torch.where(mask.bool(), weights, torch.ones_like(weights))
    m = mask.to(weights.dtype)
    raw = is_weights(old_logp, rollout_logp, mask, mode, float("inf"))
    metrics["rollout_corr/is_mean"] = float(_masked_mean(weights, m))
    metrics["rollout_corr/is_clipfrac"] = float(_masked_mean((raw > cap).to(m.dtype), m))
    return Correction(weights, metrics)
