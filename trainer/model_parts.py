"""Which parameters of the policy train (the vision tower can be frozen), and how its
blocks keep activations (gradient checkpointing).

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


def enable_gradient_checkpointing(model: nn.Module) -> None:
    """HF activation checkpointing on every decoder and vision block, non-reentrant (the
    variant that works under FSDP2 and with inputs that do not require grad)."""
    enable = getattr(model, "gradient_checkpointing_enable", None)
    if enable is None:
        raise ValueError(f"{type(model).__name__} does not support gradient checkpointing")
    enable(gradient_checkpointing_kwargs={"use_reentrant": False})
