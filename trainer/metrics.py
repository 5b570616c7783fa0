"""Training metrics: a JSON line per step in ``metrics.jsonl``, TensorBoard if installed, progress.

Further sinks (wandb, :mod:`trainer.loggers`) receive every record too.

Evaluation scores arrive from the background eval hook as their own lines
(``{"step": s, "eval/<bench>": ...}``), in the same file, next to the training metrics.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

PROGRESS_KEYS = (
    ("loss", "loss"),
    ("reward/overall", "reward"),
    ("reward/accuracy", "acc"),
    ("reward/format", "fmt"),
    ("grad_norm", "|g|"),
    ("response_length", "len"),
    ("time_s", "s"),
)


class MetricSink(Protocol):
    """Somewhere else the records go (a wandb run, ...)."""

    def log(self, step: int, values: dict[str, Any]) -> None:
        """Receive one record."""

    def close(self) -> None:
        """Flush and finish."""


class MetricsLog:
    """Append-only JSONL metrics (thread-safe: the eval hook writes from its own thread)."""

    def __init__(
        self,
        directory: str | Path,
        total_steps: int,
        tensorboard: bool = True,
        sinks: Sequence[MetricSink] = (),
    ) -> None:
        self.sinks = list(sinks)
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "metrics.jsonl"
        self.total = total_steps
        self._lock = threading.Lock()
        self._tb: Any = None
        if tensorboard:
            try:  # optional: only when the tensorboard package is installed
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(self.dir / "tensorboard"))
            except ImportError:
                self._tb = None
        self._console: Any = None
        try:
            from rich.console import Console

            self._console = Console(stderr=True)
        except ImportError:
            self._console = None

    def write(self, step: int, values: dict[str, float], progress: bool = True) -> None:
        """Append one record for ``step`` (and show the progress line)."""
        record = {"step": step, **{k: _clean(v) for k, v in values.items()}}
        line = json.dumps(record, sort_keys=True)
        with self._lock:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")
            if self._tb is not None:
                for key, value in values.items():
                    if isinstance(value, int | float) and math.isfinite(value):
                        self._tb.add_scalar(key, value, step)
            for sink in self.sinks:
                sink.log(step, values)
        if progress:
            self._progress(step, values)

    def _progress(self, step: int, values: dict[str, float]) -> None:
        parts = [f"step {step}/{self.total}"]
        parts += [f"{label} {values[k]:.4g}" for k, label in PROGRESS_KEYS if k in values]
        parts += [f"{k} {v:.4g}" for k, v in values.items() if k.startswith("eval/")]
        text = " | ".join(parts)
        if self._console is not None:
            self._console.print(f"[bold cyan]trainer[/] {text}", highlight=False)
        else:
            log.info(text)

    def close(self) -> None:
        """Flush TensorBoard and the other sinks."""
        if self._tb is not None:
            self._tb.close()
        for sink in self.sinks:
            sink.close()


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no NaN/inf; keep them visible
    return value


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Every record of a ``metrics.jsonl``."""
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def update_record(
    summary: dict[str, Any], rewards: dict[str, Any], batch: Any, groups: int, lr: float
) -> dict[str, Any]:
    """One update's metrics: ``summary`` (losses, clip fractions, correction), the mean
    rewards over all rows and over online rows, the online responses' mean length, offline
    slots, groups and the learning rate the update ran at (``batch``: a TrainBatch)."""
    online = ~batch.is_offline
    lengths = batch.response_mask.sum(1).float()
    out = dict(summary)
    out |= {f"reward/{k}": float(v.mean()) for k, v in rewards.items()}
    out |= {f"online/{k}": float(v[online].mean()) for k, v in rewards.items() if online.any()}
    out["response_length"] = float(lengths[online].mean()) if online.any() else 0.0
    out["offline_slots"] = float(batch.is_offline.sum())
    out["groups"] = float(groups)
    out["lr"] = lr
    return out
