"""One writer per run directory: an exclusive lock naming its holder.

``runs/<id>/.lock`` is locked with ``flock`` for the whole life of a run and holds its
owner (pid, host, boot id, start time, command). The kernel drops the lock when the owner
dies, however it dies, so a crashed run never blocks a resume on the same host; the owner
line says who holds it when it is busy. The file is emptied on a clean release and kept:
deleting a locked file would let a third process lock a new file of the same name.

Two belts over ``flock``'s braces, for file systems where it is a no-op or is not shared
between hosts (some NFS set-ups): an owner line left by a live process on this host is
honoured, and one left by another host is refused with what to check, since a process
there cannot be seen from here.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from evalkit.errors import EvalkitError

LOCK_NAME = ".lock"
log = logging.getLogger(__name__)


class RunLockedError(EvalkitError):
    """Another process is writing this run directory."""


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _proc_start(pid: int) -> str:
    """The process's start time in clock ticks since boot ('' where /proc is absent)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]  # field 22: after the (comm) field


def _owner() -> dict[str, Any]:
    pid = os.getpid()
    return {
        "pid": pid,
        "host": socket.gethostname(),
        "boot_id": _boot_id(),
        "proc_start": _proc_start(pid),
        "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": " ".join(["evalkit", *sys.argv[1:3]]) if sys.argv else "evalkit",
    }


def _alive_here(owner: dict[str, Any]) -> bool:
    """Whether the owner line names a process still running on this host."""
    if owner.get("boot_id") and owner["boot_id"] != _boot_id():
        return False  # written before a reboot
    pid = int(owner.get("pid") or 0)
    if pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    # a recycled pid is another process: its start time differs
    return not owner.get("proc_start") or _proc_start(pid) == owner["proc_start"]


def describe(owner: dict[str, Any]) -> str:
    """``pid P on host H (COMMAND, since T)``."""
    return (
        f"pid {owner.get('pid')} on host {owner.get('host')} "
        f"({owner.get('command', 'evalkit')}, since {owner.get('since', '?')})"
    )


class RunLock:
    """The exclusive lock of one run directory (a context manager)."""

    def __init__(self, run_path: str | Path) -> None:
        self.run_path = Path(run_path)
        self.path = self.run_path / LOCK_NAME
        self._fd = -1
        self._made_dir = False
        self._made: list[Path] = []  # the folders acquire() made, deepest first
        self.stale: dict[str, Any] | None = None
        """The owner line of a dead holder this lock took over (for a warning)."""

    def acquire(self) -> RunLock:
        """Take the lock now or raise :class:`RunLockedError` naming the holder."""
        self._made = _missing_ancestors(self.run_path)
        self._made_dir = bool(self._made)
        self.run_path.mkdir(parents=True, exist_ok=True)
        fd = self._lock_file()
        try:
            self._check_owner_line(_read_owner(fd))
        except RunLockedError:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(_owner()) + "\n").encode(), 0)
        os.fsync(fd)
        self._fd = fd
        return self

    def _lock_file(self) -> int:
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = _holder(fd)
                os.close(fd)
                raise RunLockedError(self._busy(owner)) from None
            try:  # the file we locked is still the one at the path (not one just removed)
                if os.fstat(fd).st_ino == os.stat(self.path).st_ino:
                    return fd
            except FileNotFoundError:
                pass
            os.close(fd)

    def _busy(self, owner: dict[str, Any]) -> str:
        here = owner.get("host") == socket.gethostname() and str(owner.get("pid")).isdigit()
        if here and not _alive_here(owner):  # a forked child (an engine process) kept it
            return (
                f"{self.run_path} is locked: its writer, {describe(owner)}, is no longer "
                "running, but a process it started still holds the lock (an orphaned "
                f"engine process? `fuser {self.path}` names it); stop it, then resume"
            )
        return (
            f"{self.run_path} is being written by {describe(owner)}; two writers would "
            "record samples twice. Wait for that run to finish (or stop it), then resume"
        )

    def _check_owner_line(self, owner: dict[str, Any]) -> None:
        if not owner:
            return  # released cleanly
        if owner.get("host") != socket.gethostname():
            raise RunLockedError(
                f"{self.run_path} is locked by {describe(owner)}, another host, whose process "
                f"cannot be checked from here. If it is no longer running there, delete "
                f"{self.path} and resume"
            )
        if _alive_here(owner):
            raise RunLockedError(
                f"{self.run_path} is being written by {describe(owner)} (this file system "
                "ignores flock); wait for it to finish (or stop it), then resume"
            )
        self.stale = owner  # its holder died without releasing (killed, crashed)
        log.warning(
            "%s: taking over the lock of %s, no longer running", self.run_path, describe(owner)
        )

    def release(self) -> None:
        """Empty the owner line and drop the lock (a run directory left empty goes too)."""
        if self._fd < 0:
            return
        os.ftruncate(self._fd, 0)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = -1
        # a new run that failed before writing anything leaves no directory behind
        if self._made_dir and [p.name for p in self.run_path.iterdir()] == [LOCK_NAME]:
            self.path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # another process got in meanwhile
                for folder in self._made:  # the run directory, then the parents made for it
                    folder.rmdir()

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _missing_ancestors(path: Path) -> list[Path]:
    """``path`` and those of its parents that do not exist yet, deepest first."""
    missing = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    return missing


def _holder(fd: int, wait_s: float = 2.0) -> dict[str, Any]:
    """The owner line of a held lock; its holder writes it just after locking, so an
    empty line is read again for a moment before giving up."""
    deadline = time.monotonic() + wait_s
    while not (owner := _read_owner(fd)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return owner or {"pid": "?", "host": "?", "command": "a process that has not named itself"}


def _read_owner(fd: int) -> dict[str, Any]:
    raw = os.pread(fd, 4096, 0).decode(errors="replace").strip()
    try:
        return dict(json.loads(raw)) if raw else {}
    except (ValueError, TypeError):
        return {"pid": "?", "host": "?", "command": f"unreadable owner line {raw[:60]!r}"}
