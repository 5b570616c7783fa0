"""An engine's life around the run: engine processes never outlive the evalkit process
that started them, and a failing shutdown does not fail a finished run.

vLLM starts its engine core (and, with tensor parallelism, workers) as child processes,
by fork or by spawn depending on the platform, CUDA state and Ray. A child started by
spawn runs no code of ours before vLLM's, so a parent-death signal cannot be set in it;
a watchdog process can cover both: :class:`Reaper` starts one next to the engine, which
kills the engine's processes and unlinks their /dev/shm entries if this process dies
without closing the engine (SIGKILL, the OOM killer). SIGTERM and Ctrl-C are handled in
process (``evalkit.cli.main`` turns SIGTERM into an exception so ``finally`` blocks run
and ``close`` releases everything the usual way).
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
_SCRIPT = Path(__file__).with_name("_watchdog.py")


async def close_engine(engine: Any) -> None:
    """Close ``engine``; a failure of its shutdown is a warning, not the run's failure:
    every record was fsync'd by the store before the engine is closed."""
    try:
        await engine.close()
    except Exception as exc:  # e.g. psutil.NoSuchProcess: a worker already gone
        log.warning(
            "the engine failed while shutting down (%s: %s); the run's records are complete",
            type(exc).__name__,
            exc,
        )


class Reaper:
    """A watchdog process for the processes this process starts from now on (see module)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> Reaper:
        """Start the watchdog (best effort: without psutil there is none, with a warning)."""
        try:
            import psutil

            created = psutil.Process().create_time()
        except ImportError:
            log.warning("psutil is not installed: engine processes may outlive a killed run")
            return self
        self._proc = subprocess.Popen(
            [sys.executable, "-I", str(_SCRIPT), str(psutil.Process().pid), repr(created)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            # its own session: a Ctrl-C or a kill of our process group must not take the
            # watchdog down with us before it has cleaned up
            start_new_session=True,
        )
        # what exists before this line is not the engine's: wait until the watchdog has
        # taken stock, so that nothing started next is mistaken for it
        assert self._proc.stdout is not None
        if self._proc.stdout.readline().strip() != "ready":
            log.warning(
                "the engine watchdog did not start: engine processes may outlive a killed run"
            )
            self._proc = None
        return self

    @property
    def pid(self) -> int | None:
        """The watchdog's pid (None when it is not running)."""
        return self._proc.pid if self._proc is not None else None

    def stop(self) -> None:
        """The engine closed cleanly: the watchdog exits without touching anything."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            assert proc.stdin is not None
            proc.stdin.write("stop\n")
            proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()


def engine_shm() -> set[str]:
    """The /dev/shm entries the engine processes of this process map or hold open now
    (vLLM's message queues between its engine core and workers: ``psm_*``)."""
    try:
        import psutil
    except ImportError:
        return set()
    from evalkit.engines._watchdog import _is_tracker, _shm_held

    me = psutil.Process()
    children = [c for c in me.children(recursive=True) if not _is_tracker(c)]
    # multiprocessing.shared_memory segments only (never the semaphores or segments this
    # process made and shares with them: those are its own to release)
    return {n for n in _shm_held(children) - _shm_held([me]) if n.startswith("psm_")}


def release_engine_shm(names: set[str]) -> list[str]:
    """Unlink the entries of ``names`` still there once the engine has shut down, and take
    them off multiprocessing's resource tracker. vLLM force-kills an engine core whose
    workers are slow to exit (a busy machine): the core's message-queue segment then stays,
    and the tracker, which the engine processes share with this one, warns "leaked
    shared_memory objects" when this process exits. Returns the names released."""
    import os
    from multiprocessing import resource_tracker

    released = []
    for name in sorted(names):
        try:
            os.unlink(os.path.join("/dev/shm", name))
        except OSError:  # unlinked by its owner, as on a clean shutdown
            continue
        released.append(name)
        resource_tracker.unregister("/" + name, "shared_memory")  # registered at creation
    if released:
        log.debug("released shared memory the engine left: %s", ", ".join(released))
    return released
