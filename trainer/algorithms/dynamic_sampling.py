"""DAPO dynamic sampling: keep only groups that carry a learning signal, refill, bounded tries.

A group whose responses all have the same value of the filter metric (all right or all wrong)
gets zero group-relative advantage and only dilutes the batch. :func:`collect_groups` drops
such groups and draws further generation batches through a ``generate_groups()`` callable
until the target number of groups is reached or ``max_tries`` batches were drawn.

Defaults follow verl's DAPO recipe (verl-recipe dapo/dapo_ray_trainer.py, ``fit``, the
``filter_groups`` branch): a group is kept when ``np.std`` (population) of its metric is > 0
or when it has one response (``keep_rule="std"``; equal floats can pass it when their mean
rounds, e.g. [0.1] * 3, which verl keeps; ``keep_rule="range"``, max > min, is exact and
evalkit's deviation); the metric is ``acc``, ``score`` or ``seq_reward``
(:func:`metric_values`); ``max_tries`` <= 0 means no limit; running out of tries raises
(``on_shortfall="raise"``). ``on_shortfall="partial"`` trains on what there is with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

import numpy as np
from torch import Tensor

from .advantages import BatchError

log = logging.getLogger(__name__)

G = TypeVar("G")


@dataclass
class DynamicSamplingResult(Generic[G]):
    """The kept groups (at most ``target``) and what it took to get them."""

    groups: list[G]
    target: int
    tries: int
    generated: int
    dropped: int
    surplus: int = 0
    """Kept groups beyond the target, discarded (the last batch overshot)."""
    notes: list[str] = field(default_factory=list)

    @property
    def reached_target(self) -> bool:
        """True when ``target`` groups were collected."""
        return len(self.groups) >= self.target

    def metrics(self) -> dict[str, float]:
        """Numbers worth logging each step."""
        return {
            "dynamic_sampling/tries": float(self.tries),
            "dynamic_sampling/kept": float(len(self.groups)),
            "dynamic_sampling/dropped": float(self.dropped),
            "dynamic_sampling/reached_target": float(self.reached_target),
        }


FilterMetric = Literal["acc", "score", "seq_reward"]
KeepRule = Literal["std", "range"]


def metric_values(rewards: dict[str, Tensor], metric: FilterMetric) -> Tensor:
    """Per-response values of verl's filter ``metric`` from evalkit's per-key rewards.

    acc: the accuracy reward; score: the reward function's overall value before the overlong
    penalty (verl's ``score`` from the reward manager); seq_reward: the overall reward with
    the penalty (verl's summed ``token_level_scores``).
    """
    if metric == "acc":
        return rewards["accuracy"]
    if metric == "seq_reward":
        return rewards["overall"]
    if metric == "score":
        penalty = rewards.get("overlong")
        return rewards["overall"] - penalty if penalty is not None else rewards["overall"]
    raise ValueError(f"unknown dynamic sampling metric {metric!r}: use acc, score or seq_reward")


def has_signal(
    values: Sequence[float], keep_singletons: bool = True, rule: KeepRule = "std"
) -> bool:
    """True when the group carries signal by ``rule`` (std: np.std > 0, verl-recipe; range:
    max > min); a group of one counts when kept (verl)."""
    if len(values) == 1:
        return keep_singletons
    if len(values) < 2:
        return False
    if rule == "std":
        return bool(np.std(np.asarray(values, dtype=np.float64)) > 0)
    return max(values) > min(values)


def collect_groups(
    generate_groups: Callable[[], Sequence[G]],
    values_of: Callable[[G], Sequence[float]],
    target: int,
    max_tries: int,
    keep_singletons: bool = True,
    on_shortfall: Literal["raise", "partial"] = "raise",
    keep_rule: KeepRule = "std",
) -> DynamicSamplingResult[G]:
    """Draw generation batches until ``target`` groups with signal are kept or tries run out.

    ``generate_groups()`` returns one generation batch (a list of groups); ``values_of``
    reads the per-response filter metric of a group. Surplus groups from the last batch are
    discarded so that the batch size stays ``target``. ``max_tries`` <= 0: no limit.
    """
    if target < 1:
        raise ValueError(f"target must be >= 1, got {target}")
    kept: list[G] = []
    generated = dropped = tries = 0
    while len(kept) < target and (max_tries <= 0 or tries < max_tries):
        batch = generate_groups()
        tries += 1
        generated += len(batch)
        for group in batch:
            if has_signal(values_of(group), keep_singletons, keep_rule):
                kept.append(group)
            else:
                dropped += 1
    surplus = max(0, len(kept) - target)
    result = DynamicSamplingResult(kept[:target], target, tries, generated, dropped, surplus)
    if not result.reached_target:
        note = (
            f"dynamic sampling: {len(result.groups)}/{target} groups with signal after "
            f"{tries} generation batches ({dropped} dropped)"
        )
        if on_shortfall == "raise":
            raise BatchError(
                f"{note}. The data may be too hard or too easy: raise "
                "algorithm.dynamic_sampling.max_tries (0 = no limit) or set on_shortfall=partial"
            )
        note += "; training on what there is"
        result.notes.append(note)
        log.warning(note)
    return result
