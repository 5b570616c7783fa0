"""The in-reward KL coefficient's controller, chosen by name from :data:`KL_CONTROLLERS`.

verl's ``FixedKLController`` / ``AdaptiveKLController`` (verl/trainer/ppo/core_algos.py, after
Ziegler et al. 2019, "Fine-Tuning Language Models from Human Preferences"), driven as verl's
``apply_kl_penalty`` (verl/trainer/ppo/ray_trainer.py) drives them: the step's token rewards
use the current ``value``; then :meth:`KLController.update` gets the batch's KL, the mean over
rows of each row's token-mean KL (a row without tokens counts as 0), and the row count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from evalkit.registry import Registry


@dataclass
class KLController:
    """A fixed coefficient: ``update`` leaves ``value`` as it is."""

    value: float
    target: float = 0.1
    horizon: int = 10000

    def update(self, current_kl: float, n_steps: int) -> None:
        """Nothing moves (verl FixedKLController)."""


@dataclass
class AdaptiveKLController(KLController):
    """value *= 1 + clip(current_kl / target - 1, -0.2, 0.2) * n_steps / horizon."""

    def update(self, current_kl: float, n_steps: int) -> None:
        """One proportional correction towards ``target`` (verl AdaptiveKLController)."""
        error = min(max(current_kl / self.target - 1.0, -0.2), 0.2)
        self.value *= 1.0 + error * n_steps / self.horizon


KL_CONTROLLERS: Registry[Callable[[float, float, int], KLController]] = Registry("KL controller")
KL_CONTROLLERS.register("fixed", KLController)
KL_CONTROLLERS.register("adaptive", AdaptiveKLController)


def batch_kl(token_kl: Tensor, mask: Tensor) -> float:
    """verl's ``current_kl``: mean over rows of sum_t m kl / (sum_t m + 1e-8)."""
    m = mask.to(token_kl.dtype)
    per_row = (token_kl * m).sum(-1) / (m.sum(-1) + 1e-8)
    return float(torch.mean(per_row))
