"""Per-token KL estimators against a reference policy, chosen by name from :data:`KL_ESTIMATORS`.

Each estimates KL(pi || pi_ref) from tokens sampled by pi (Schulman, "Approximating KL
divergence"): with log-ratio d_t = logp_t - ref_logp_t, verl's ``kl_penalty_forward``
(verl/trainer/ppo/core_algos.py) offers
k1 = d_t (``kl``; unbiased, high variance, can be negative), ``abs`` = |d_t|,
k2 = d_t^2 / 2 (``mse``) and k3 = exp(-d_t) - 1 + d_t (``low_var_kl``; unbiased, >= 0, lower
variance; the log-ratio clamped to +-20, the result to [-10, 10]; EasyVideoR1 ``compute_kl`` is
the same). ``k3_unclamped`` (evalkit's own) keeps only the log-ratio clamp (at d = 5: 142.4
instead of 10).

A name ending in ``+`` (``k1+``, ``low_var_kl+``, ...) is verl's straight-through variant
(``kl_penalty``): the value of the named estimator, the gradient of k2
(k2 - sg(k2) + sg(value)), whose expected gradient is the KL's. verl's ``kl_penalty`` hands
the ``+`` name on to ``kl_penalty_forward`` unstripped, which raises NotImplementedError for it
(verl b178a3c); evalkit implements what its docs and docstring describe.
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


@KL_ESTIMATORS("k1", "kl")
def k1(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k1 = logp - ref_logp."""
    return logp - ref_logp


@KL_ESTIMATORS("abs")
def abs_kl(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """|logp - ref_logp| (verl ``abs``)."""
    return (logp - ref_logp).abs()


@KL_ESTIMATORS("k2", "mse")
def k2(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k2 = (logp - ref_logp)^2 / 2 (verl ``mse``)."""
    return 0.5 * (logp - ref_logp).square()


@KL_ESTIMATORS("k3", "low_var_kl")
def k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k3 = exp(ref_logp - logp) - (ref_logp - logp) - 1, clamped to [-10, 10] (verl)."""
    return k3_unclamped(logp, ref_logp).clamp(-K3_CLAMP, K3_CLAMP)


@KL_ESTIMATORS("k3_unclamped")
def k3_unclamped(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k3 with only the log-ratio clamped to +-20 (no bound on the result)."""
    d = (ref_logp - logp).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    return d.exp() - d - 1


def _straight_through(value_fn: KLFn) -> KLFn:
    def estimator(logp: Tensor, ref_logp: Tensor) -> Tensor:
        grad = k2(logp, ref_logp)
        return grad - grad.detach() + value_fn(logp, ref_logp).detach()

    estimator.__doc__ = f"Value of {value_fn.__name__}, gradient of k2 (verl's ``+`` variant)."
    return estimator


# verl's names with "+": every estimator of kl_penalty_forward; k2+ is k2 itself
KL_ESTIMATORS("k1+", "kl+")(_straight_through(k1))
KL_ESTIMATORS("abs+")(_straight_through(abs_kl))
KL_ESTIMATORS("k2+", "mse+")(k2)
KL_ESTIMATORS("k3+", "low_var_kl+")(_straight_through(k3))
