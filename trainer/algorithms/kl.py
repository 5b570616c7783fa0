"""Per-token KL estimators against a reference policy, chosen by name from :data:`KL_ESTIMATORS`.

Both estimate KL(pi || pi_ref) from tokens sampled by pi (Schulman, "Approximating KL
divergence"): with log-ratio d_t = logp_t - ref_logp_t,
k1 = d_t (unbiased, high variance, can be negative) and
k3 = exp(-d_t) - 1 + d_t (unbiased, never negative, lower variance).

``k3`` is verl's ``low_var_kl`` (``kl_penalty_forward`` in verl/trainer/ppo/core_algos.py;
EasyVideoR1 ``compute_kl`` is the same): the log-ratio clamped to +-20, the result clamped
to [-10, 10]. ``k3_unclamped`` keeps only the log-ratio clamp (at d = 5: 142.4 instead of 10).
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from evalkit.registry import Registry

KLFn = Callable[[Tensor, Tensor], Tensor]
KL_ESTIMATORS: Registry[KLFn] = Registry("KL estimator", group="evalkit.kl_estimators")

# Keeps exp() finite when the two policies disagree wildly on a token.
_MAX_LOG_RATIO = 20.0
# verl's bound on a k3 value: one wild token cannot dominate the KL term.
K3_CLAMP = 10.0


def token_kl(name: str, logp: Tensor, ref_logp: Tensor) -> Tensor:
    """Per-token KL estimate (same shape as ``logp``) with the estimator ``name``."""
    return KL_ESTIMATORS.get(name)(logp, ref_logp)


@KL_ESTIMATORS("k1")
def k1(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k1 = logp - ref_logp."""
    return logp - ref_logp


@KL_ESTIMATORS("k3")
def k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k3 = exp(ref_logp - logp) - (ref_logp - logp) - 1, clamped to [-10, 10] (verl)."""
    return k3_unclamped(logp, ref_logp).clamp(-K3_CLAMP, K3_CLAMP)


@KL_ESTIMATORS("k3_unclamped")
def k3_unclamped(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k3 with only the log-ratio clamped to +-20 (no bound on the result)."""
    d = (ref_logp - logp).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    return d.exp() - d - 1
