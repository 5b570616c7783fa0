"""The session's /dev/shm check names what this session's processes left, and never what
other processes on the machine (other sessions) make."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import _ShmWatch

pytestmark = pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")

_MAKE = """
import os, signal, sys, time
from multiprocessing import shared_memory
time.sleep(float(sys.argv[2]))
seg = shared_memory.SharedMemory(sys.argv[1], create=True, size=4096)
print("made", flush=True)
time.sleep(3)
os.killpg(0, signal.SIGKILL)  # with its resource tracker: nobody unlinks it
"""


def _gone(name: str) -> None:
    Path("/dev/shm", name).unlink(missing_ok=True)


def test_a_segment_one_of_our_processes_left_is_named() -> None:
    name = f"ek-test-{os.getpid()}-ours"
    watch = _ShmWatch().start()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", _MAKE, name, "0"], start_new_session=True,
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert proc.stdout is not None and proc.stdout.readline().strip() == "made"
        watch.sample()
        proc.wait(timeout=30)
        assert name in watch.left()
    finally:
        _gone(name)


def test_a_segment_another_process_left_is_not_ours() -> None:
    name = f"ek-test-{os.getpid()}-theirs"
    watch = _ShmWatch().start()
    try:
        # started through a shell that exits at once: by the time it makes the segment it
        # is no process of ours (reparented), as another session's process would be
        cmd = f"{sys.executable} -c '{_MAKE}' {name} 1 >/dev/null &"
        subprocess.run(["sh", "-c", cmd], start_new_session=True, check=True)
        deadline = time.monotonic() + 30
        while not Path("/dev/shm", name).exists():
            assert time.monotonic() < deadline
            time.sleep(0.1)
        watch.sample()
        time.sleep(4)
        assert Path("/dev/shm", name).exists() and name not in watch.left()
    finally:
        _gone(name)
