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
  ``rollout_is_threshold`` = cap, default 2), with its ``rollout_is_batch_normalize``: the
  truncated weights divided by their mean (over valid tokens for ``token``, over sequences
  for ``sequence``) when that mean is > 1e-8; the loss multiplies the per-token policy loss
  by them (``pg_losses * rollout_is_weights`` in verl/trainer/ppo/core_algos.py
  ``compute_policy_loss_vanilla``), the KL term not.
- :func:`rejection_mask`: verl's rejection sampling (``compute_rollout_rejection_mask``,
  ``rollout_rs`` / ``rollout_rs_threshold``): tokens or whole sequences whose divergence
  statistic (:data:`RS_STATISTICS`) passes its bound stay; the others leave the response
  mask before the advantages and the loss (verl replaces ``response_mask``). The in-reward
  KL and its controller see the sampled mask, as verl's ``apply_kl_penalty`` runs first;
  one deviation: evalkit's estimators read that KL through the kept mask, so a rejected
  token's KL leaves the sequence score (verl's GRPO sums the token rewards unmasked).

Sequence-level weights are unbiased (before truncation) for sequence-level rewards;
token-level ones are biased but have far less variance. The cap trades bias for variance.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from evalkit.registry import Registry

CorrectionMode = Literal["none", "token", "sequence"]

# verl's SAFETY_BOUND: exp(20) ~ 4.9e8 keeps exp() finite in float32.
_SAFETY_BOUND = 20.0


@dataclass
class Correction:
    """TIS weights (None when the mode is ``none``) and the step's mismatch metrics."""

    weights: Tensor | None
    metrics: dict[str, float]
    keep: Tensor | None = None
    """(B, T) 1 where rejection sampling keeps the token (1 off the sampled tokens); None
    without rejection sampling."""


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


def batch_normalize(weights: Tensor, mask: Tensor, mode: CorrectionMode) -> tuple[Tensor, float]:
    """verl ``rollout_is_batch_normalize``: weights / their mean (token: over valid tokens,
    mean sum/(n + 1e-8); sequence: over sequences with a token), unless the mean is <= 1e-8."""
    m = mask.to(weights.dtype)
    if mode == "token":
        mean = (weights * m).sum() / (m.sum() + 1e-8)
    else:
        per_seq = (weights * m).sum(-1) / (m.sum(-1) + 1e-8)
        has = (m.sum(-1) > 0).to(weights.dtype)
        mean = (per_seq * has).sum() / has.sum().clamp(min=1e-8)
    if mean > 1e-8:
        return weights / mean, float(mean)
    return weights, 1.0


# -- rejection sampling ------------------------------------------------------------------

RSStatistic = Callable[[Tensor, Tensor], Tensor]
RS_STATISTICS: Registry[RSStatistic] = Registry("rejection sampling option")
"""verl's ``rollout_rs`` options: (log_ratio clamped to +-20, mask) -> a (B, T) token
statistic (``token_*``) or a (B,) sequence one (``seq_sum_*``, ``seq_mean_*``, ``seq_max_*``),
with k1 = -log_ratio, k2 = log_ratio^2 / 2, k3 = exp(log_ratio) - 1 - log_ratio."""

_TOKEN_STATS: dict[str, Callable[[Tensor], Tensor]] = {
    "k1": lambda lr: -lr,
    "k2": lambda lr: 0.5 * lr**2,
    "k3": lambda lr: lr.exp() - 1.0 - lr,
}


def _seq_max(values: Tensor, mask: Tensor) -> Tensor:
    top = values.masked_fill(~mask.bool(), float("-inf")).max(-1).values
    return torch.where(torch.isinf(top), torch.zeros_like(top), top)


_REDUCERS: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
    "token": lambda v, m: v,
    "seq_sum": lambda v, m: (v * m).sum(-1),
    "seq_mean": lambda v, m: (v * m).sum(-1) / (m.sum(-1) + 1e-8),
    "seq_max": _seq_max,
}


def _rs_statistic(level: str, kind: str) -> RSStatistic:
    token, reduce = _TOKEN_STATS[kind], _REDUCERS[level]
    return lambda lr, m: reduce(token(lr), m)


for _level in _REDUCERS:
    for _kind in _TOKEN_STATS:
        if (_level, _kind) != ("seq_max", "k1"):  # verl has no seq_max_k1
            RS_STATISTICS.register(f"{_level}_{_kind}", _rs_statistic(_level, _kind))


def parse_rs_thresholds(options: list[str], spec: str | float) -> list[tuple[float, float]]:
    """(lower, upper) per option from verl's ``rollout_rs_threshold``: one value for all or one
    per option, comma separated; k1 options take ``lower_upper`` ratio bounds (one value u:
    1/u_u) compared in log space, the others one upper bound (lower -inf)."""
    parts = [p.strip() for p in str(spec).split(",") if p.strip()]
    if len(parts) not in (1, len(options)):
        raise ValueError(
            f"rollout_rs_threshold {spec!r}: give one threshold or one per rollout_rs option "
            f"({len(options)}: {', '.join(options)})"
        )
    parts = parts * len(options) if len(parts) == 1 else parts
    bounds = []
    for option, part in zip(options, parts, strict=True):
        try:
            if option.endswith("k1"):
                low, _, high = part.partition("_") if "_" in part else (None, "", part)
                upper = float(high)
                lower = float(low) if low is not None else 1.0 / upper
                if lower <= 0 or upper <= 0:
                    raise ValueError
                bounds.append((math.log(lower), math.log(upper)))
            else:
                upper = float(part)
                if upper <= 0:
                    raise ValueError
                bounds.append((-math.inf, upper))
        except ValueError:
            raise ValueError(
                f"rollout_rs_threshold {part!r} for {option}: expected a positive number"
                + (" or lower_upper (e.g. 0.5_2.0)" if option.endswith("k1") else "")
            ) from None
    return bounds


def rejection_mask(
    log_ratio: Tensor, mask: Tensor, options: str, thresholds: str | float
) -> tuple[Tensor, dict[str, float]]:
    """(B, T) keep mask (1 = kept; 1 off ``mask`` too) and the masked fractions (verl names).

    ``log_ratio`` = log pi_old - log pi_rollout; ``options`` comma separated (all must pass).
    """
    names = list(dict.fromkeys(o.strip() for o in options.split(",") if o.strip()))
    for name in names:
        if name not in RS_STATISTICS:
            raise ValueError(RS_STATISTICS._unknown(name))
    safe = log_ratio.clamp(-_SAFETY_BOUND, _SAFETY_BOUND)
    m = mask.to(log_ratio.dtype)
    keep = torch.ones_like(m, dtype=torch.bool)
    for name, (low, high) in zip(names, parse_rs_thresholds(names, thresholds), strict=True):
        stat = RS_STATISTICS.get(name)(safe, m)
        passed = (stat >= low) & (stat <= high)
        keep &= passed if passed.dim() == 2 else passed[:, None].expand_as(keep)
    keep_f = keep.to(m.dtype)
    rows_hit = ((~keep) & mask.bool()).any(-1).to(m.dtype)
    metrics = {
        "rollout_corr/rollout_rs_masked_fraction": float(_masked_mean(1 - keep_f, m)),
        "rollout_corr/rollout_rs_seq_masked_fraction": float(rows_hit.mean()),
    }
    return torch.where(mask.bool(), keep_f, torch.ones_like(keep_f)), metrics


def rollout_correction(
    old_logp: Tensor,
    rollout_logp: Tensor | None,
    mask: Tensor,
    mode: CorrectionMode = "none",
    cap: float = 2.0,
    normalize: bool = False,
    rejection: str | None = None,
    rejection_threshold: str | float | None = None,
) -> Correction:
    """Mismatch metrics, (mode token/sequence) TIS weights, optionally batch-normalised, and
    (``rejection``: verl rollout_rs options) the rejection keep mask for one rollout batch.

    ``mask`` selects the tokens the engine sampled (response tokens of online rows);
    elsewhere, e.g. a mix-policy offline slot, the weight is 1 (no correction) and nothing is
    rejected. Without engine log-probs (``rollout_logp`` None) there is nothing to measure;
    asking for a correction then is an error.
    """
    if rollout_logp is None:
        if mode != "none" or rejection:
            what = f"mode={mode}" if mode != "none" else f"rollout_rs={rejection}"
            raise ValueError(
                f"algorithm.rollout_correction.{what} needs the rollout engine's log-probs "
                "of the sampled tokens; this engine returned none (use rollout.engine hf or vllm)"
            )
        return Correction(None, {})
    metrics = mismatch_metrics(old_logp, rollout_logp, mask)
    keep = None
    if rejection:
        if rejection_threshold is None:
            raise ValueError("algorithm.rollout_correction.rollout_rs needs rollout_rs_threshold")
        log_ratio = torch.where(mask.bool(), old_logp - rollout_logp, torch.zeros_like(old_logp))
        keep, rs_metrics = rejection_mask(log_ratio, mask, rejection, rejection_threshold)
        metrics |= rs_metrics
    if mode == "none":
        return Correction(None, metrics, keep)
    weights = is_weights(old_logp, rollout_logp, mask, mode, cap)
    m = mask.to(weights.dtype)
    raw = is_weights(old_logp, rollout_logp, mask, mode, float("inf"))
    metrics["rollout_corr/is_mean"] = float(_masked_mean(weights, m))
    metrics["rollout_corr/is_clipfrac"] = float(_masked_mean((raw > cap).to(m.dtype), m))
    if normalize:  # verl: on the truncated weights, over the IS tokens (before rejection)
        weights, factor = batch_normalize(weights, mask, mode)
        metrics["rollout_corr/rollout_is_batch_norm_factor"] = factor
    weights = torch.where(mask.bool(), weights, torch.ones_like(weights))
    return Correction(weights, metrics, keep)
