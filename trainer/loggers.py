"""Optional metric sinks beyond metrics.jsonl: wandb, imported only when asked for.

``trainer.loggers: [jsonl, tensorboard, wandb]``. wandb is never a dependency: it is imported
when the run starts with it listed, and a missing package is a ConfigError saying so.
Offline use: ``trainer.wandb_mode: offline`` (or WANDB_MODE=offline) writes the run under
``<output_dir>/wandb`` for a later ``wandb sync``; no network, no login.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import math
import sys
from pathlib import Path
from typing import Any

from evalkit.errors import ConfigError

from .config import LoggerName, TrainerConfig
from .metrics import MetricSink

log = logging.getLogger(__name__)

PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb"}
"""The package each optional logger needs (jsonl needs none)."""


def _installed(package: str) -> bool:
    """Importable without importing it (a module already loaded, e.g. a test's stand-in,
    counts)."""
    if package in sys.modules:
        return True
    try:
        return importlib.util.find_spec(package) is not None
    except ValueError:
        return False


def check_loggers(cfg: TrainerConfig) -> list[LoggerName]:
    """The loggers this run will use; one listed in the config whose package is missing is a
    ConfigError now, before any model loads. tensorboard by default (not listed) is used when
    installed and otherwise left out with a note."""
    run_cfg = cfg.trainer
    explicit = "loggers" in run_cfg.model_fields_set
    usable: list[LoggerName] = []
    for name in run_cfg.loggers:
        package = PACKAGES.get(name)
        if package is None or _installed(package):
            usable.append(name)
        elif explicit:
            raise ConfigError(
                f"trainer.loggers lists {name} but the {package} package is not installed: "
                f"pip install {package}, or remove {name} from trainer.loggers"
            )
        else:
            log.info("%s is not installed: metrics go to metrics.jsonl only", package)
    return usable


class WandbSink:
    """Every metrics record as a wandb ``log`` call, at the record's step."""

    def __init__(self, run: Any) -> None:
        self.run = run
        self._last_step = -1

    def log(self, step: int, values: dict[str, Any]) -> None:
        """Log the finite numbers of one record."""
        scalars = {
            k: v
            for k, v in values.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        }
        if step >= self._last_step:
            self.run.log(scalars, step=step)
            self._last_step = step
        else:
            # a late record (the background eval hook): wandb drops steps in the past, so it
            # goes in at the current step and carries its own (eval/step)
            self.run.log(scalars)

    def close(self) -> None:
        """Finish the wandb run."""
        self.run.finish()


def make_sinks(cfg: TrainerConfig, out_dir: Path) -> list[MetricSink]:
    """The sinks ``trainer.loggers`` asks for besides jsonl and tensorboard."""
    run_cfg = cfg.trainer
    if "wandb" not in run_cfg.loggers:
        return []
    try:
        wandb = importlib.import_module("wandb")
    except ImportError as exc:
        raise ConfigError(
            "trainer.loggers lists wandb but the wandb package is not installed: "
            "pip install wandb, or remove wandb from trainer.loggers"
        ) from exc
    out_dir.mkdir(parents=True, exist_ok=True)
    run = wandb.init(
        project=run_cfg.project,
        name=run_cfg.experiment or out_dir.resolve().name,
        dir=str(out_dir),
        config=cfg.model_dump(mode="json"),
        mode=run_cfg.wandb_mode,
    )
    return [WandbSink(run)]
