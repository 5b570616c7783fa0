"""Optional metric sinks beyond metrics.jsonl: wandb, imported only when asked for.

``trainer.loggers: [jsonl, tensorboard, wandb]``. wandb is never a dependency: it is imported
when the run starts with it listed, and a missing package is a ConfigError saying so.
Offline use: ``trainer.wandb_mode: offline`` (or WANDB_MODE=offline) writes the run under
``<output_dir>/wandb`` for a later ``wandb sync``; no network, no login.
"""

from __future__ import annotations

import importlib
import math
from pathlib import Path
from typing import Any

from evalkit.errors import ConfigError

from .config import TrainerConfig
from .metrics import MetricSink


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
