"""Wall-clock seconds per phase of a training step, logged as ``timing_s/<phase>`` (as verl).

Phases: ``rollout`` (prompt frames loaded, requests built, responses sampled), ``reward``,
``old_logprob``, ``ref_logprob`` and ``update``. A phase entered several times in one step
(dynamic sampling's extra generation batches, rewards per group) adds up.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class PhaseTimer:
    """Accumulates seconds per phase name until :meth:`take` hands them over."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._started: dict[str, float] = {}

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        """Time the ``with`` block and add it to ``phase``."""
        self.start(phase)
        try:
            yield
        finally:
            self.stop(phase)

    def start(self, phase: str) -> None:
        """Start timing ``phase`` (for a span that is not one block)."""
        self._started[phase] = time.perf_counter()

    def stop(self, phase: str) -> None:
        """Add the time since :meth:`start` to ``phase``."""
        spent = time.perf_counter() - self._started.pop(phase)
        self.seconds[phase] = self.seconds.get(phase, 0.0) + spent

    def take(self) -> dict[str, float]:
        """The step's ``timing_s/<phase>`` metrics; starts the next step from zero."""
        out = {f"timing_s/{k}": v for k, v in self.seconds.items()}
        self.seconds, self._started = {}, {}
        return out
