"""How long a run took to get going: Ray's start (or connection) and the engines' start.

Kept beside the records (``startup.json`` of the run directory) and shown in the summary,
so that samples/s (pipeline time only, the same for one engine or N replicas) and the
time a user waits before the first sample are both on record.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from evalkit.atomic import write_text_atomic

if TYPE_CHECKING:
    from evalkit.rundir import RunDir


@dataclass
class StartupTimes:
    """Seconds spent before the first sample could run."""

    engines_s: float | None = None
    """Building the engine(s) until ready (replicas: all of them, side by side)."""
    ray_s: float | None = None
    """Starting the local Ray instance or connecting to the cluster (None: no Ray, or a
    Ray session the caller had already opened)."""
    replicas: int = 1
    ray_address: str | None = None

    def write(self, rundir: RunDir) -> None:
        """Into the run directory (``RunDir.startup_path``); a resumed run overwrites it."""
        write_text_atomic(rundir.startup_path, json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def read(cls, path: str | Path) -> StartupTimes | None:
        """From a run directory's ``startup.json``; None when the run did not record one."""
        from evalkit.rundir import RunDir

        file = RunDir(path).startup_path
        if not file.is_file():
            return None
        return cls(**json.loads(file.read_text(encoding="utf-8")))

    def describe(self) -> str:
        """``start-up: Ray 8.1 s, engines 14.0 s (2 replicas)`` for the summary."""
        parts = []
        if self.ray_s is not None:
            parts.append(f"Ray {self.ray_s:.1f} s")
        if self.engines_s is not None:
            parts.append(f"engine{'s' if self.replicas > 1 else ''} {self.engines_s:.1f} s")
        where = f"{self.replicas} replica{'s' if self.replicas > 1 else ''}"
        return f"start-up: {', '.join(parts) or 'not measured'} ({where})"
