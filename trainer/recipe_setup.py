"""Setup pieces of the recipe: training and validation data (overlong prompts left out),
the optimizer over the trainable parameters, and the learning-rate schedule."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from torch.optim.lr_scheduler import LambdaLR

from evalkit.engines.base import SamplingParams

from .config import TrainerConfig
from .data import TrainData, TrainItem, load_items
from .lr_schedule import build_scheduler, schedule_length
from .model_parts import freeze_vision_tower, trainable_parameters
from .prompt_filter import drop_overlong
from .step import build_optimizer
from .validation import Validator

if TYPE_CHECKING:
    import torch

    from evalkit.cache import FrameCache

    from .actor import ActorPolicy

log = logging.getLogger(__name__)


def _counter(actor: ActorPolicy, build: Callable[[Any], Any]) -> Callable[[TrainItem], int]:
    """Prompt length in tokens, visual included: what the actor will be fed."""
    return lambda item: len(actor.encode(build(item.sample)).prompt_ids)


def _data(cfg: TrainerConfig, path: str, actor: ActorPolicy, cache: FrameCache) -> TrainData:
    items = load_items(path, cfg.data.video_root)
    data = TrainData(items, cfg.data, cache, cfg.seed, actor.family.factor)
    data.build_cache()
    return data


def load_train_data(
    cfg: TrainerConfig, actor: ActorPolicy, cache: FrameCache
) -> tuple[TrainData, int]:
    """The training data with overlong prompts left out, and how many were."""
    data = _data(cfg, cfg.data.train_path, actor, cache)
    if not cfg.data.filter_overlong_prompts:  # an overlong prompt stops the run at rollout
        return data, 0
    build = data.request_builder(SamplingParams())
    kept, dropped = drop_overlong(
        data.items,
        _counter(actor, build),
        cfg.data.max_prompt_tokens,
        lambda it: str(it.sample.id),
    )
    data.items = kept  # the order, batches and resume state all follow the kept list
    return data, len(dropped)


def load_validator(cfg: TrainerConfig, actor: ActorPolicy, cache: FrameCache) -> Validator | None:
    """The validation set of ``data.val_path`` when validation is on, else None."""
    run = cfg.trainer
    if not cfg.data.val_path or not (run.val_before_train or run.val_freq):
        return None
    data = _data(cfg, cfg.data.val_path, actor, cache)
    build = data.request_builder(SamplingParams())
    items = data.items[: run.val_limit] if run.val_limit else data.items
    kept, dropped = list(items), list[str]()
    if cfg.data.filter_overlong_prompts:
        kept, dropped = drop_overlong(
            items,
            _counter(actor, build),
            cfg.data.max_prompt_tokens,
            lambda it: str(it.sample.id),
            what="validation",
        )
    last = cfg.schedule.steps
    return Validator(kept, build, run.val_before_train, run.val_freq, last, len(dropped))


def build_training(
    cfg: TrainerConfig, actor: ActorPolicy
) -> tuple[torch.optim.Optimizer, LambdaLR]:
    """The optimizer over the trainable parameters (vision frozen if asked) and its schedule."""
    if cfg.actor.freeze_vision_tower:
        frozen = freeze_vision_tower(actor.model)
        log.info("vision tower frozen: %d parameter tensors left out of the optimizer", frozen)
    optimizer = build_optimizer(trainable_parameters(actor), cfg.optimizer)
    return optimizer, build_scheduler(optimizer, cfg.optimizer, schedule_length(cfg))
