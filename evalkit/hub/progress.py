"""One progress bar per benchmark (or model) being fetched: bytes, rate, time left; on a
terminal only (a log gets the one-line announcement, not a bar redrawn)."""

from __future__ import annotations

import os
import sys
import threading
from typing import Any


def bars_wanted() -> bool:
    """A terminal on stderr, and ``HF_HUB_DISABLE_PROGRESS_BARS`` not set."""
    off = os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS", "").strip().upper()
    return sys.stderr.isatty() and off not in ("1", "ON", "YES", "TRUE")


class FetchProgress:
    """``with FetchProgress(name, total) as p: p.advance(n)`` (thread-safe)."""

    def __init__(self, name: str, total: int, shown: bool | None = None) -> None:
        self.name, self.total = name, max(total, 0)
        self.done = 0
        self.shown = bars_wanted() if shown is None else shown
        self._lock = threading.Lock()
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> FetchProgress:
        if self.shown and self.total:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            self._bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            self._bar.start()
            self._task = self._bar.add_task(self.name, total=self.total)
        return self

    def advance(self, n: int) -> None:
        """``n`` more bytes arrived (negative: bytes thrown away, a damaged file)."""
        with self._lock:
            self.done += n
            if self._bar is not None:
                self._bar.update(self._task, completed=max(self.done, 0))

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
