"""Finding a process's descendants and whether they outlived it (Linux /proc)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def descendants(pid: int) -> set[int]:
    """Every process under ``pid`` now (children of each of its threads, recursively)."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            with contextlib.suppress(OSError):
                kids = {int(k) for k in (task / "children").read_text().split()}
                todo += sorted(kids - found)
                found |= kids
    return found


def cmdline(pid: int) -> bytes:
    """The process's command line (NUL-separated), empty once it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def survivors(pids: set[int], wait_s: float = 5.0) -> list[int]:
    """Those of ``pids`` still alive after ``wait_s``; they are then killed, so that a
    failing test leaves nothing behind for the others."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    left = sorted(p for p in pids if alive(p))
    for p in left:
        with contextlib.suppress(OSError):
            os.kill(p, signal.SIGKILL)
    return left
