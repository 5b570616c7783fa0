"""Live progress of a replicated run: one line per replica and the total (rich)."""

from __future__ import annotations

import threading
import time
from typing import Any

from evalkit.scale.driver import Snapshot


def table(snap: Snapshot) -> Any:
    """A rich Table of the snapshot: per replica, then the total with its ETA."""
    from rich.table import Table

    dt = max(time.time() - snap.started, 1e-9)
    t = Table(box=None, pad_edge=False)
    for col in ("replica", "pid", "state", "done", "failed", "leased", "discarded", "/s", "tok/s"):
        t.add_column(col, justify="left" if col in ("replica", "state") else "right")
    for r in snap.replicas.values():
        state = "running" if r.alive else "[red]lost[/] (work re-queued)"
        t.add_row(
            r.name,
            str(r.pid or "-"),
            state,
            str(r.done),
            str(r.failed),
            str(r.leased),
            str(r.discarded),
            f"{(r.done + r.failed) / dt:.2f}",
            f"{r.output_tokens / dt:.0f}",
        )
    rate = snap.accepted / dt
    eta = f"{(snap.total - snap.accepted) / rate:.0f}s" if rate > 0 else "?"
    t.add_row(
        "[bold]total[/]",
        "",
        f"{snap.pending} queued, ETA {eta}",
        f"{snap.accepted}/{snap.total}",
        str(sum(r.failed for r in snap.replicas.values())),
        str(sum(r.leased for r in snap.replicas.values())),
        str(sum(r.discarded for r in snap.replicas.values())),
        f"{rate:.2f}",
        f"{sum(r.output_tokens for r in snap.replicas.values()) / dt:.0f}",
    )
    return t


class ReplicaProgress:
    """Redraws the latest snapshot four times a second on stderr (the CLI's ``Progress``
    for replicated runs); ``update`` is the driver's progress callback."""

    def __init__(self, enabled: bool, terminal: Any = None) -> None:
        self.enabled = enabled
        self.terminal = terminal
        """Where to draw (``evalkit.terminal.Terminal``; None: stderr)."""
        self._snap: Snapshot | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def update(self, snap: Snapshot) -> None:
        """Take the driver's latest state (starts the display on the first one)."""
        self._snap = snap
        if self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        from rich.console import Console
        from rich.live import Live

        console = Console(file=self.terminal.err) if self.terminal else Console(stderr=True)
        with Live(console=console, refresh_per_second=4, transient=True) as live:
            while not self._stop.wait(0.25):
                if self._snap is not None:
                    live.update(table(self._snap))

    def stop(self) -> None:
        """End the display."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
