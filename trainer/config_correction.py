"""Config section of rollout correction.

Split from :mod:`trainer.config` (which re-exports them) to keep each module small; the
YAML key is ``algorithm.rollout_correction``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class RolloutCorrectionConfig(_Section):
    """Truncated importance sampling for the rollout engine's mismatch (verl's rollout_is).

    The mismatch between the engine's and the trainer's log-probs of the sampled tokens is
    logged every step (``rollout_corr/*``) whatever the mode.
    """

    mode: Literal["none", "token", "sequence"] = "none"
    """none: only measure; token: w_t = min(pi_old/pi_rollout, cap) per token; sequence:
    w = min(prod_t pi_old/pi_rollout, cap) per sequence. w multiplies the policy loss."""
    cap: float = Field(default=2.0, gt=0)
    """Upper bound C of the weights (verl rollout_is_threshold, default 2)."""
    rollout_is_batch_normalize: bool = False
    """Divide the truncated weights by their batch mean (verl rollout_is_batch_normalize):
    over the valid tokens (token mode) or the sequences (sequence mode)."""
    rollout_rs: str | None = None
    """Rejection sampling (verl rollout_rs): comma-separated options among token_k1/k2/k3,
    seq_sum_k1/k2/k3, seq_mean_k1/k2/k3, seq_max_k2/k3 (trainer.algorithms.rollout_correction
    RS_STATISTICS); rejected tokens / sequences leave the response mask. None: off."""
    rollout_rs_threshold: str | float | None = None
    """Bounds of rollout_rs (verl rollout_rs_threshold): one for all options or one per option,
    comma separated; k1 options take ``lower_upper`` ratio bounds (one value u: [1/u, u])."""

    @model_validator(mode="after")
    def _check(self) -> RolloutCorrectionConfig:
        from .algorithms.rollout_correction import RS_STATISTICS, parse_rs_thresholds

        if self.rollout_rs is None:
            return self
        names = [o.strip() for o in self.rollout_rs.split(",") if o.strip()]
        for name in names:
            if name not in RS_STATISTICS:
                raise ValueError(RS_STATISTICS._unknown(name))
        if self.rollout_rs_threshold is None:
            raise ValueError("rollout_correction.rollout_rs needs rollout_rs_threshold")
        parse_rs_thresholds(names, self.rollout_rs_threshold)
        return self
