"""Which parameters of the policy train: the vision tower can be frozen.

Qwen-VL models keep their vision encoder (and its patch merger) under ``model.visual``
(transformers >= 4.52; ``visual`` on the top module in older releases).
"""

from __future__ import annotations

from typing import Any

from torch import nn


def vision_tower(model: nn.Module) -> nn.Module:
    """The vision encoder module of a Qwen-VL model."""
    inner: Any = getattr(model, "model", None)
    tower = getattr(inner, "visual", None)
    if tower is None:
        tower = getattr(model, "visual", None)
    if not isinstance(tower, nn.Module):
        raise ValueError(f"{type(model).__name__} has no vision tower (model.visual) to freeze")
    return tower


def freeze_vision_tower(model: nn.Module) -> int:
    """Set requires_grad False on every vision parameter; returns how many were frozen."""
    params = list(vision_tower(model).parameters())
    for p in params:
        p.requires_grad_(False)
    return len(params)


def trainable_parameters(module: nn.Module) -> list[nn.Parameter]:
    """The parameters the optimizer gets: those that require a gradient."""
    return [p for p in module.parameters() if p.requires_grad]
