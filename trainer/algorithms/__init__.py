"""RL algorithm pieces, each chosen by name from a registry: advantages, losses, aggregation, KL."""

from .advantages import (
    ADVANTAGES,
    AdvantageInputs,
    AdvantageOptions,
    compute_advantages,
)
from .aggregation import AGGREGATIONS, AggNorm, aggregate
from .kl import KL_ESTIMATORS, token_kl
from .losses import POLICY_LOSSES, LossOptions, LossOutput

__all__ = [
    "ADVANTAGES",
    "AGGREGATIONS",
    "KL_ESTIMATORS",
    "POLICY_LOSSES",
    "AdvantageInputs",
    "AdvantageOptions",
    "AggNorm",
    "LossOptions",
    "LossOutput",
    "aggregate",
    "compute_advantages",
    "token_kl",
]
