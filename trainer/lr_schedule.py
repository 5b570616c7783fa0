"""Learning-rate warmup and decay: verl's two schedules as a ``LambdaLR``.

Source: verl ``verl/utils/torch_functional.py`` (``get_constant_schedule_with_warmup``,
``get_cosine_schedule_with_warmup``), stepped by ``fsdp_workers.update_actor`` once per
training step after the actor update. The factor of schedule step k (from 0):

- warmup (k < W): k / max(1, W), so the first update of a warmed-up run has lr 0, as there;
- constant: 1;
- cosine: max(0, m + (1 - m) * (1 + cos(pi * p)) / 2), p = (k - W) / max(1, K - W), m the
  min lr ratio, K the schedule length.

With no warmup and the constant schedule the factor is 1 from the start: the optimizer's
learning rate is exactly what it was before schedules existed.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch.optim.lr_scheduler import LambdaLR

from .config import OptimizerConfig, TrainerConfig


def lr_factor(kind: str, warmup: int, total: int, min_ratio: float) -> Callable[[int], float]:
    """The multiplier of the peak lr at schedule step k (see the module docstring)."""

    def factor(k: int) -> float:
        if k < warmup:
            return float(k) / float(max(1, warmup))
        if kind == "constant":
            return 1.0
        progress = float(k - warmup) / float(max(1, total - warmup))
        return max(0.0, min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress)))

    return factor


def schedule_length(cfg: TrainerConfig) -> int:
    """Schedule steps of the run: training steps, or optimizer steps (epochs x mini-batches)."""
    steps = cfg.schedule.steps
    if cfg.optimizer.lr_step_per == "train_step":
        return steps
    mini = cfg.schedule.ppo_mini_batch_size or cfg.schedule.batch_size
    return steps * cfg.schedule.ppo_epochs * (cfg.schedule.batch_size // mini)


def warmup_steps(cfg: OptimizerConfig, total: int) -> int:
    """warmup_steps when set, else int(warmup_ratio * total) (verl's rule)."""
    return cfg.warmup_steps if cfg.warmup_steps is not None else int(cfg.warmup_ratio * total)


def build_scheduler(optimizer: torch.optim.Optimizer, cfg: OptimizerConfig, total: int) -> LambdaLR:
    """A ``LambdaLR`` over ``total`` schedule steps; call ``.step()`` after each one."""
    factor = lr_factor(cfg.lr_schedule, warmup_steps(cfg, total), total, cfg.min_lr_ratio)
    return LambdaLR(optimizer, factor)


def current_lr(optimizer: torch.optim.Optimizer) -> float:
    """The learning rate the next optimizer step will use (first parameter group)."""
    return float(optimizer.param_groups[0]["lr"])
