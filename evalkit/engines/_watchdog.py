"""The watchdog process of :class:`evalkit.engines.lifecycle.Reaper` (run as a script,
never imported: it must start fast and must not depend on the state of the evalkit
process it watches).

    python _watchdog.py PID CREATE_TIME

While process PID lives, it notes every process started under PID after the watchdog
began (engine cores, their workers) and every /dev/shm entry those processes and PID hold
(mapped or open): every ``POLL_S``, and as soon as an entry appears in /dev/shm (inotify;
at most every ``EVENT_GAP_S``), so that a segment held only between two polls is seen.
When PID dies without saying ``stop`` on stdin (SIGKILL, the OOM killer, a crash in C),
it terminates the noted processes that are still alive (SIGTERM, then SIGKILL) and
unlinks the noted /dev/shm entries. ``stop`` means the engine closed cleanly: it exits
and touches nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import sys
import threading
import time

import psutil

POLL_S = 0.5
EVENT_GAP_S = 0.05  # looks caused by /dev/shm entries appearing: at most this often
GRACE_S = 1.5
SHM = "/dev/shm"
_TRACKER = "from multiprocessing.resource_tracker import main;"


def _stop_requested(stop: threading.Event, wake: int) -> None:
    for line in sys.stdin:
        if line.strip() == "stop":
            stop.set()
            os.write(wake, b"x")
            return
    # EOF without "stop": the owner may be gone, or a forked child still holds the pipe;
    # the poll of the owner decides.


def shm_held(procs: list[psutil.Process]) -> set[str]:
    """Names of /dev/shm entries mapped or open in ``procs``.

    A POSIX semaphore (multiprocessing's ``sem.mp-*``) is mapped under another name: glibc
    makes it as a temporary file, maps that, links it to its name and unlinks the
    temporary one, so the mapping reads ``/dev/shm/sem.XXXXXX (deleted)``. Such a mapping
    is matched to the entry with its inode."""
    names: set[str] = set()
    inodes: set[int] = set()
    for p in procs:
        try:
            with open(f"/proc/{p.pid}/maps") as f:
                for line in f:
                    if SHM + "/" not in line:
                        continue
                    if line.rstrip().endswith("(deleted)"):
                        inodes.add(int(line.split()[4]))
                    else:
                        names.add(line.split(SHM + "/", 1)[1].strip())
            for fd in os.listdir(f"/proc/{p.pid}/fd"):
                target = os.readlink(f"/proc/{p.pid}/fd/{fd}")
                if target.startswith(SHM + "/") and not target.endswith("(deleted)"):
                    names.add(target[len(SHM) + 1 :])
        except OSError:  # gone, or not ours to read
            continue
    if inodes:
        with contextlib.suppress(OSError), os.scandir(SHM) as entries:
            names |= {e.name for e in entries if e.inode() in inodes}
    return names


def _is_tracker(p: psutil.Process) -> bool:
    # multiprocessing's resource tracker cleans up after the owner by itself: let it. Its
    # command line exactly (a script that merely imports resource_tracker is not it)
    try:
        return any(part.startswith(_TRACKER) for part in p.cmdline())
    except psutil.Error:
        return False


def _creations() -> int:
    """A descriptor that turns readable when an entry appears in /dev/shm (inotify), or -1
    where there is none (the poll alone then)."""
    in_create, in_moved_to = 0x100, 0x80
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd >= 0 and libc.inotify_add_watch(fd, SHM.encode(), in_create | in_moved_to) < 0:
            os.close(fd)
            fd = -1
        return int(fd)
    except (OSError, AttributeError):
        return -1


def _wait(events: int, wake: int, timeout: float) -> bool:
    """Until the poll is due, an entry appears in /dev/shm (True), or ``stop`` comes."""
    ready, _, _ = select.select([fd for fd in (events, wake) if fd >= 0], [], [], timeout)
    if events not in ready:
        return False
    with contextlib.suppress(BlockingIOError):
        while os.read(events, 1 << 16):  # drain: one look covers all of them
            pass
    return True


def _watch(
    owner: psutil.Process, stop: threading.Event, wake: int
) -> tuple[list[psutil.Process], set[str]]:
    """Note the owner's new processes and their shared memory until it dies or says stop."""
    events = _creations()
    me = os.getpid()
    before = {c.pid for c in owner.children(recursive=True)}
    shm_before = set(os.listdir(SHM)) if os.path.isdir(SHM) else set()
    noted: dict[int, psutil.Process] = {}
    shm: set[str] = set()
    woke = False
    print("ready", flush=True)  # the owner waits for this before starting its engine
    while not stop.is_set() and _alive(owner):
        try:
            children = owner.children(recursive=True)
        except psutil.Error:
            break
        for c in children:
            if c.pid != me and c.pid not in before and c.pid not in noted and not _is_tracker(c):
                noted[c.pid] = c
        alive = [p for p in noted.values() if p.is_running()]
        shm |= shm_held([owner, *alive]) - shm_before
        if woke:  # a storm of entries (someone else's) costs one look per gap
            time.sleep(EVENT_GAP_S)
        woke = _wait(events, wake, POLL_S)
    if not stop.is_set():
        # the owner died: its engine processes outlive it a moment (until _reap), so look
        # once more; a segment made since the last poll (an engine core still starting, a
        # replica killed before it reported its segments) is theirs to release too
        alive = [p for p in noted.values() if p.is_running()]
        shm |= shm_held(alive) - shm_before
    return list(noted.values()), shm


def _alive(p: psutil.Process) -> bool:
    try:  # a killed owner stays a zombie until its parent reaps it
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _reap(procs: list[psutil.Process], shm: set[str]) -> None:
    alive = [p for p in procs if p.is_running()]  # is_running also checks the start time
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, left = psutil.wait_procs(alive, timeout=GRACE_S)
    for p in left:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(left, timeout=GRACE_S)
    for name in shm:
        # OSError: unlinked already (by the resource tracker or the engine itself)
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(SHM, name))


def main(argv: list[str]) -> int:
    """Watch ``argv[1]`` (pid) started at ``argv[2]`` (psutil create_time)."""
    # Ctrl-C goes to the whole foreground group: the owner handles it and closes cleanly.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    pid, created = int(argv[1]), float(argv[2])
    try:
        owner = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return 0
    if abs(owner.create_time() - created) > 1e-3:
        return 0  # the pid was reused: the owner is long gone
    stop = threading.Event()
    wake_r, wake_w = os.pipe()  # "stop" wakes the watch at once
    threading.Thread(target=_stop_requested, args=(stop, wake_w), daemon=True).start()
    procs, shm = _watch(owner, stop, wake_r)
    if stop.is_set():
        return 0
    time.sleep(0.1)  # let the owner's own exit handlers finish what they started
    _reap(procs, shm)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
