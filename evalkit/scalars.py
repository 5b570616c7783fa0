"""Scalars for dashboards: TensorBoard and Weights & Biases, imported only when asked for.

Neither is a dependency: a sink is made only when a command lists it (``evalkit watch
--loggers tensorboard,wandb``, the trainer's ``trainer.loggers``), and a missing package is
one line of ConfigError saying so, before any engine starts. Offline W&B:
``WANDB_MODE=offline`` writes the run locally for a later ``wandb sync``.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from evalkit.errors import ConfigError

PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb"}
"""The package each optional sink needs."""


class Sink(Protocol):
    """Somewhere scalars go."""

    def log(self, step: int, values: dict[str, Any]) -> None:
        """Receive one step's values."""

    def close(self) -> None:
        """Flush and finish."""


def installed(package: str) -> bool:
    """Importable without importing it (a module already loaded, e.g. a test's stand-in,
    counts)."""
    if package in sys.modules:
        return True
    try:
        return importlib.util.find_spec(package) is not None
    except ValueError:
        return False


def require(names: Sequence[str], flag: str) -> None:
    """ConfigError (one line, naming ``flag``) when a listed sink's package is missing."""
    for name in names:
        package = PACKAGES.get(name)
        if package is not None and not installed(package):
            raise ConfigError(
                f"{flag} lists {name} but the {package} package is not installed: "
                f"pip install {package}, or remove {name} from {flag}"
            )


def finite(values: dict[str, Any]) -> dict[str, float]:
    """The finite numbers among ``values`` (booleans and None left out)."""
    return {
        k: float(v)
        for k, v in values.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    }


class WandbRun(Protocol):
    """What evalkit uses of a ``wandb.init()`` run."""

    def log(self, data: dict[str, float], step: int | None = None) -> None:
        """Record ``data`` (at ``step``)."""

    def finish(self) -> None:
        """End the run."""


class TensorBoardSink:
    """Each step's values as TensorBoard scalars under ``directory``."""

    def __init__(self, directory: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(directory))

    def log(self, step: int, values: dict[str, Any]) -> None:
        """Add the finite values at ``step``."""
        for key, value in finite(values).items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        self.writer.close()


class WandbSink:
    """Every record as a wandb ``log`` call, at the record's step."""

    def __init__(self, run: WandbRun) -> None:
        self.run = run
        self._last_step = -1

    def log(self, step: int, values: dict[str, Any]) -> None:
        """Log the finite numbers of one record."""
        scalars = finite(values)
        if step >= self._last_step:
            self.run.log(scalars, step=step)
            self._last_step = step
        else:
            # a late record (a background evaluation): wandb drops steps in the past, so it
            # goes in at the current step and carries its own (eval/step)
            self.run.log(scalars)

    def close(self) -> None:
        """Finish the wandb run."""
        self.run.finish()


def open_wandb(
    project: str, name: str, directory: Path, config: dict[str, Any], mode: str | None
) -> WandbRun:
    """A wandb run (``wandb.init``); ConfigError when the package is missing."""
    try:
        wandb = importlib.import_module("wandb")
    except ImportError as exc:
        raise ConfigError("wandb is not installed: pip install wandb") from exc
    directory.mkdir(parents=True, exist_ok=True)
    run: WandbRun = wandb.init(
        project=project, name=name, dir=str(directory), config=config, mode=mode
    )
    return run


class Scalars:
    """Several sinks as one."""

    def __init__(self, sinks: Sequence[Sink]) -> None:
        self.sinks = list(sinks)

    def log(self, step: int, values: dict[str, Any]) -> None:
        """Every sink gets ``values`` at ``step``."""
        for sink in self.sinks:
            sink.log(step, values)

    def close(self) -> None:
        """Close every sink."""
        for sink in self.sinks:
            sink.close()
