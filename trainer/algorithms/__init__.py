"""RL algorithm pieces, each chosen by name from a registry: advantages, losses, aggregation, KL."""

from trainer.algorithms.advantages import (
    ADVANTAGES,
    AdvantageInputs,
    AdvantageOptions,
    compute_advantages,
)
from trainer.algorithms.aggregation import AGGREGATIONS, AggNorm, aggregate
from trainer.algorithms.kl import KL_ESTIMATORS, token_kl
from trainer.algorithms.losses import POLICY_LOSSES, LossOptions, LossOutput

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
