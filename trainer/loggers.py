"""Optional metric sinks beyond metrics.jsonl: wandb, imported only when asked for.

``trainer.loggers: [jsonl, tensorboard, wandb]``. wandb is never a dependency: it is imported
when the run starts with it listed, and a missing package is a ConfigError saying so.
Offline use: ``trainer.wandb_mode: offline`` (or WANDB_MODE=offline) writes the run under
``<output_dir>/wandb`` for a later ``wandb sync``; no network, no login.
"""

from __future__ import annotations

import logging
from pathlib import Path

from evalkit.errors import ConfigError
from evalkit.scalars import PACKAGES, WandbSink, installed, open_wandb

from .config import LoggerName, TrainerConfig
from .metrics import MetricSink

log = logging.getLogger(__name__)


def check_loggers(cfg: TrainerConfig) -> list[LoggerName]:
    """The loggers this run will use; one listed in the config whose package is missing is a
    ConfigError now, before any model loads. tensorboard by default (not listed) is used when
    installed and otherwise left out with a note."""
    run_cfg = cfg.trainer
    explicit = "loggers" in run_cfg.model_fields_set
    usable: list[LoggerName] = []
    for name in run_cfg.loggers:
        package = PACKAGES.get(name)
        if package is None or installed(package):
            usable.append(name)
        elif explicit:
            raise ConfigError(
                f"trainer.loggers lists {name} but the {package} package is not installed: "
                f"pip install {package}, or remove {name} from trainer.loggers"
            )
        else:
            log.info("%s is not installed: metrics go to metrics.jsonl only", package)
    return usable


def make_sinks(cfg: TrainerConfig, out_dir: Path) -> list[MetricSink]:
    """The sinks ``trainer.loggers`` asks for besides jsonl and tensorboard."""
    run_cfg = cfg.trainer
    if "wandb" not in run_cfg.loggers:
        return []
    if not installed("wandb"):
        raise ConfigError(
            "trainer.loggers lists wandb but the wandb package is not installed: "
            "pip install wandb, or remove wandb from trainer.loggers"
        )
    name = run_cfg.experiment or out_dir.resolve().name
    config = cfg.model_dump(mode="json")
    return [WandbSink(open_wandb(run_cfg.project, name, out_dir, config, run_cfg.wandb_mode))]
