"""Config section of rollout correction.

Split from :mod:`trainer.config` (which re-exports them) to keep each module small; the
YAML key is ``algorithm.rollout_correction``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


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
