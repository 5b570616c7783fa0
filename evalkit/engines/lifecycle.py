"""An engine's life around the run: engine processes never outlive the evalkit process
that started them, and a failing shutdown does not fail a finished run.

vLLM starts its engine core (and, with tensor parallelism, workers) as child processes,
by fork or by spawn depending on the platform, CUDA state and Ray. A child started by
spawn runs no code of ours before vLLM's, so a parent-death signal cannot be set in it;
a watchdog process can cover both: :class:`Reaper` starts one next to the engine, which
kills the engine's processes and unlinks their /dev/shm entries if this process dies
without closing the engine (SIGKILL, the OOM killer). SIGTERM and Ctrl-C are handled in
process by :class:`Termination` (``evalkit.cli.main`` installs it): the signal becomes an
exception so ``finally`` blocks run and ``close`` releases everything the usual way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from evalkit.errors import Terminated

if TYPE_CHECKING:
    from evalkit.engines.base import Engine

log = logging.getLogger(__name__)
T = TypeVar("T")
_SCRIPT = Path(__file__).with_name("_watchdog.py")
SHM = "/dev/shm"


async def close_engine(engine: Engine) -> None:
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


async def in_daemon_thread(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on a daemon thread, awaited. For vLLM's engine start: it waits in
    pyzmq polls that swallow the exception a signal handler raises (and one of them, for
    the engine's "ready", only ends at a 10-minute timeout if the engine died), so on the
    loop's own thread a SIGTERM could not stop it. Here the loop takes the signal; the
    abandoned thread never holds up the exit, and the engine's processes are stopped by
    :class:`Termination` and the watchdog."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(result: Any, exc: BaseException | None) -> None:
        if done.cancelled():
            return
        if exc is not None:
            done.set_exception(exc)
        else:
            done.set_result(result)

    def work() -> None:
        try:
            result, exc = fn(*args), None
        except BaseException as e:  # handed to the awaiting coroutine, raised there
            result, exc = None, e
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            loop.call_soon_threadsafe(settle, result, exc)

    threading.Thread(target=work, name="evalkit-engine-start", daemon=True).start()
    return await done


def run_to_end(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` for a command that a signal may stop (:class:`Termination`),
    reporting nothing after the command's one line. The signal's exception leaves the loop
    from whichever task was running, and each task that then ends with it (one awaiting a
    failed run, say) re-raises it out of the loop again: ``asyncio.run`` stopped cancelling
    at the first of those and left the rest to print "Task exception was never retrieved"
    with a traceback. Here every task still running is cancelled once and awaited to its
    end, what each ended with is read, and the signal's exception is raised once."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    task = loop.create_task(main)
    try:
        return loop.run_until_complete(task)
    finally:
        try:
            _settle(loop, task)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def _settle(loop: asyncio.AbstractEventLoop, main: asyncio.Task[Any]) -> None:
    """Cancel each task of ``loop`` still running (once: a task cleaning up after its
    cancellation is let finish), run the loop until none is left, and read how each ended."""
    seen, cancelled = {main}, set[asyncio.Task[Any]]()
    while pending := {t for t in asyncio.all_tasks(loop) if not t.done()}:
        seen |= pending
        for t in pending - cancelled:
            t.cancel()
        cancelled |= pending
        with contextlib.suppress(KeyboardInterrupt):  # the same stop, re-raised by a task
            loop.run_until_complete(asyncio.wait(pending))
    for t in seen:
        if not t.cancelled():
            t.exception()  # read: never "Task exception was never retrieved"


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
    from evalkit.engines._watchdog import _is_tracker, shm_held

    me = psutil.Process()
    children = [c for c in me.children(recursive=True) if not _is_tracker(c)]
    # multiprocessing.shared_memory segments only (never the semaphores or segments this
    # process made and shares with them: those are its own to release)
    return {n for n in shm_held(children) - shm_held([me]) if n.startswith("psm_")}


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


def held_shm(before: set[str]) -> set[str]:
    """The /dev/shm entries this process and its descendants map or hold open now that
    are not in ``before`` (the listing taken when this process began its work): what its
    engine made (vLLM's ``psm_*`` message queues, semaphores), never what was there."""
    try:
        import psutil
    except ImportError:
        return set()
    from evalkit.engines._watchdog import shm_held

    me = psutil.Process()
    return shm_held([me, *me.children(recursive=True)]) - before


def shm_listing() -> set[str]:
    """The names in /dev/shm now (empty where there is none)."""
    return set(os.listdir(SHM)) if os.path.isdir(SHM) else set()


def release_unmapped_shm(names: list[str], wait_s: float = 10.0) -> dict[str, list[str]]:
    """Unlink the entries of ``names`` that still exist once no live process maps or holds
    them open; entries still in use after ``wait_s`` are left alone (never another
    process's segment). For the shared memory of a killed replica: Ray 2.60's raylet kills
    the dead worker's child processes (its engine core; settings
    ``RAY_kill_child_processes_on_worker_exit`` and ``RAY_process_group_cleanup_enabled``),
    not their segments, and that may take a moment. The engine watchdog, in a session of
    its own, survives it, but only unlinks what its 0.5 s polls saw mapped. Returns
    ``{"released": [...], "in_use": [...]}`` (names already gone are in neither)."""
    import psutil

    from evalkit.engines._watchdog import shm_held

    left = {n for n in names if os.path.basename(n) == n and n not in ("", ".", "..")}
    released: list[str] = []
    deadline = time.monotonic() + wait_s
    while True:
        left &= shm_listing()
        in_use = shm_held(list(psutil.process_iter())) & left
        for name in sorted(left - in_use):
            try:
                os.unlink(os.path.join(SHM, name))
            except OSError:  # gone meanwhile, or not ours to unlink
                continue
            released.append(name)
        left = in_use
        if not left or time.monotonic() >= deadline:
            return {"released": released, "in_use": sorted(left)}
        time.sleep(0.25)


class Termination:
    """SIGTERM and SIGINT end a command promptly, whatever it is doing.

    The first signal raises (``Terminated`` for SIGTERM, ``KeyboardInterrupt`` for SIGINT)
    so ``finally`` blocks close engines and stores. Some waits swallow that exception:
    pyzmq's ``poll`` (vLLM waiting for its engine to start) retries on EINTR and drops
    the exception the handler raised, so the run went on as if nothing had happened. So
    the signal is also remembered (the command exits 128 + signal however it unwinds), and
    if this process is still here ``GRACE_S`` later its own child processes (engine core,
    workers, scoring child) are stopped, which ends any wait on them, and the engine
    segments they held are unlinked (:func:`end_children`); past ``FORCE_S``, or at a
    second signal, it exits at once (records are fsync'd one by one; the engine watchdog
    and multiprocessing's resource tracker release what is left). Installed on the main
    thread only.
    """

    GRACE_S = 5.0
    FORCE_S = 30.0

    def __init__(self) -> None:
        self.signum: int | None = None
        self.at: float | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Termination:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.signum is not None:
            return  # still ours while the process winds down: a second signal forces the exit
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()

    @property
    def exit_code(self) -> int:
        """128 + the signal (143 for SIGTERM, 130 for SIGINT)."""
        return 128 + (self.signum or signal.SIGINT)

    def summary(self, command: str) -> str:
        """The one line a terminated command prints."""
        name = "SIGTERM" if self.signum == signal.SIGTERM else "interrupted (SIGINT)"
        took = f" in {time.monotonic() - self.at:.1f} s" if self.at is not None else ""
        what = "terminated (SIGTERM)" if self.signum == signal.SIGTERM else name
        again = {
            "watch": "start the same watch again to go on",
            "sweep": "go on with `evalkit sweep --resume SWEEP_DIR`",
        }.get(command, "resume the run with --resume")
        kept = "every record written so far is kept"
        return f"evalkit {command}: {what}; stopped{took}; {kept} ({again})"

    def _handle(self, signum: int, frame: object) -> None:
        if self.signum is not None:  # a second signal: no more waiting
            end_children(grace_s=0.0)
            os._exit(self.exit_code)
        self.signum, self.at = signum, time.monotonic()
        threading.Thread(target=self._fallback, name="evalkit-terminate", daemon=True).start()
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    def _fallback(self) -> None:
        time.sleep(self.GRACE_S)
        t = time.monotonic()
        end_children(grace_s=3.0)  # ends a wait on them (vLLM's start-up, a hung close)
        time.sleep(max(0.0, self.FORCE_S - self.GRACE_S - (time.monotonic() - t)))
        print(f"evalkit: still running {self.FORCE_S:g} s after the signal; exiting now",
              file=sys.stderr, flush=True)  # fmt: skip
        os._exit(self.exit_code)


def stop_children(sig: int, wait_s: float = 0.0) -> None:
    """Send ``sig`` to every descendant of this process in its session, and wait up to
    ``wait_s`` for them to go. Two are spared: the engine watchdog (a session of its own:
    it stays to clean up after them) and multiprocessing's resource tracker. The tracker
    ignores SIGTERM; a SIGKILL only lost what it does when the last process sharing it
    exits (unlink what they registered and never released: an engine core's ``psm_*``
    segment, a process pool's semaphores), and made this process start a fresh tracker
    at exit, which printed a ``KeyError`` for each semaphore it was told to forget."""
    try:
        import psutil
    except ImportError:
        return
    from evalkit.engines._watchdog import _is_tracker

    own = os.getsid(0)
    sent = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error, OSError):
            if os.getsid(child.pid) == own and not _is_tracker(child):
                child.send_signal(sig)
                sent.append(child)
    if sent and wait_s > 0:
        psutil.wait_procs(sent, timeout=wait_s)


def end_children(grace_s: float) -> list[str]:
    """Stop this process's children for good (:func:`stop_children`: SIGTERM, up to
    ``grace_s`` for them to go, then SIGKILL) and unlink the engine segments they held
    (:func:`engine_shm`): a killed engine core never unlinks its message queues, and
    ``VLLMEngine.close``, which would, has not run or never finishes on these paths (a
    signal during start-up, a hung close, a second signal). Returns the names released."""
    held = engine_shm()
    if grace_s > 0:
        stop_children(signal.SIGTERM, wait_s=grace_s)
        held |= engine_shm()  # made meanwhile: an engine that was still starting
    stop_children(signal.SIGKILL, wait_s=2.0)
    return release_engine_shm(held)
