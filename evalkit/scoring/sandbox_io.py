"""Reading a sandboxed process: bounded output, the verdict pipe, killing what is left.

The child's stdout and stderr are the answer's: it may write gigabytes. They are read as
they come and only the first and last ``KEEP`` bytes of each are kept, with a count of
the rest; past a limit on the total the child is killed. The verdict arrives on a pipe
of its own, written once by the judge process (see ``_sandbox_child.py``). The job goes
in on the child's stdin, written by the same loop: a child that never reads it cannot
hold the caller past the wall clock.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KEEP = 4096  # bytes kept from the start and from the end of each output stream
VERDICT_MAX = 1 << 20


class Capped:
    """The first and last ``keep`` bytes of a stream, and a count of all of it."""

    def __init__(self, keep: int) -> None:
        self.keep, self.total = keep, 0
        self.head, self.tail = bytearray(), bytearray()

    def add(self, data: bytes) -> None:
        """Count ``data``; keep what belongs to the head or the tail."""
        self.total += len(data)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail += data[-self.keep :]
        del self.tail[: -self.keep]

    @property
    def dropped(self) -> int:
        """Bytes seen but not kept."""
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        """Head and tail as text, with a marker saying how much was dropped between."""
        gap = f"\n[... {self.dropped} bytes dropped ...]\n".encode() if self.dropped else b""
        return bytes(self.head + gap + self.tail).decode(errors="replace")


@dataclass
class Collected:
    """What a sandboxed run left: its output (bounded), its verdict and how it ended."""

    out: Capped
    err: Capped
    verdict: Capped
    timed_out: bool = False  # the wall clock ran out before the verdict came
    exceeded: bool = False  # killed for writing more than its output limit
    fed: int = 0  # bytes of the job the child took on its stdin

    def verdict_dict(self) -> dict[str, Any] | None:
        """The judge's verdict; None when it is missing, partial or oversized."""
        # Only the judge process writes here, once, at the end: a partial verdict (the
        # judge was killed mid-write) is no verdict.
        got = self.verdict
        if got.dropped or got.total > VERDICT_MAX:
            return None
        try:
            verdict = json.loads(bytes(got.head + got.tail))
        except ValueError:
            return None
        return verdict if isinstance(verdict, dict) else None


def collect(
    proc: subprocess.Popen[bytes],
    verdict_fd: int,
    deadline: float,
    output_bytes: int,
    job: bytes = b"",
) -> Collected:
    """Write ``job`` to the child's stdin (then close it) while reading its output and
    verdict (bounded) until done, then kill what is left."""
    # Read stdout, stderr and the verdict as they come, keeping only bounded parts, until
    # all three are closed, the wall clock runs out, or the output passes its limit; then
    # kill whatever is left. Memory here stays O(KEEP) whatever the child writes.
    assert proc.stdout is not None and proc.stderr is not None
    got = Collected(Capped(KEEP), Capped(KEEP), Capped(VERDICT_MAX))
    streams = {
        proc.stdout.fileno(): got.out,
        proc.stderr.fileno(): got.err,
        verdict_fd: got.verdict,
    }
    stdin = proc.stdin.fileno() if proc.stdin is not None else -1
    with selectors.DefaultSelector() as sel:
        for fd in streams:
            sel.register(fd, selectors.EVENT_READ)
        if stdin >= 0:
            os.set_blocking(stdin, False)
            sel.register(stdin, selectors.EVENT_WRITE)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                got.timed_out = verdict_fd in sel.get_map()
                break
            for key, _ in sel.select(min(left, 0.5)):
                if key.fd == stdin:
                    _feed(proc, sel, job, got)
                    continue
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fd)
                streams[key.fd].add(chunk)
            if stdin >= 0 and stdin not in sel.get_map() and got.fed < len(job):
                break  # it shut its stdin before it took the job: nothing of it ran
            if got.out.total + got.err.total > output_bytes:
                got.exceeded = True
                break
            if got.verdict.total > VERDICT_MAX:
                break
            if verdict_fd not in sel.get_map() and proc.poll() is not None:
                # The judge is done; what it left behind gets a moment to finish writing.
                deadline = min(deadline, time.monotonic() + 1.0)
    stop(proc)
    return got


def _feed(
    proc: subprocess.Popen[bytes], sel: selectors.BaseSelector, job: bytes, got: Collected
) -> None:
    # The next piece of the job, as much as the pipe takes; at the end (or when the child
    # closed its end: it died) stdin is closed.
    assert proc.stdin is not None
    try:
        got.fed += os.write(proc.stdin.fileno(), job[got.fed : got.fed + (1 << 16)])
        if got.fed < len(job):
            return
    except BlockingIOError:
        return
    except OSError:  # EPIPE: nobody reads it any more
        pass
    sel.unregister(proc.stdin.fileno())
    with contextlib.suppress(OSError):
        proc.stdin.close()


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Kill what is left of a sandboxed process and its group; close its pipes."""
    if proc.poll() is None:
        _kill(proc)
    _kill_group(proc.pid)  # anything it left behind in its group
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5.0)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def _kill(proc: subprocess.Popen[bytes]) -> None:
    # Kill unshare's child (the sandbox namespace's first process) before unshare itself,
    # so that unshare reaps it and the kernel tears the namespace down with everything in
    # it; killing both at once would leave a zombie for the machine's init to collect.
    # Only when unshare has a child: one killed while it starts has none yet to wait for.
    try:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    except OSError:
        children = []
    for pid in children:
        with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    if children:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(2.0)
    _kill_group(proc.pid)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
