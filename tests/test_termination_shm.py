"""A signalled command's way out leaves no shared memory: when Termination's fallback
stops the child processes (an engine core that does not stop, vLLM's start-up), the
``psm_*`` segments they held are unlinked; and multiprocessing's resource tracker is never
killed with them (it releases what its users registered once they are gone, and killing it
made the exit print a ``KeyError`` for each semaphore the process then unregistered).

The engine core is played by a child process holding a ``psm_ektest_*`` segment that is
off the resource tracker, as in tests/test_scale_shm.py; the evalkit process by a script.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._shm_holder import HOLDER

pytest.importorskip("psutil")

SHM = Path("/dev/shm")
ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not SHM.is_dir(), reason="no /dev/shm on this system")


# the evalkit process: its main thread sits in a wait that swallows the signal's
# exception (as pyzmq's poll does during vLLM's start-up), so only the fallback ends it
STUCK = """
import subprocess, sys, time
from evalkit.engines.lifecycle import Termination
from evalkit.errors import Terminated

class Quick(Termination):
    GRACE_S = 0.2
    FORCE_S = 6.0

with Quick():
    core = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]],
                            stdout=subprocess.PIPE, text=True)
    assert core.stdout.readline().strip() == "ready"
    told = False
    while True:
        try:  # the test signals on reading "ready": from here on, nothing ends this loop
            if not told:
                told = True
                print("ready", flush=True)
            time.sleep(60)
        except Terminated:
            pass
"""

# a process pool's semaphores (spawn context: registered with the resource tracker and
# unregistered by their finalizers at exit), and a child stopped as a signal stops it
POOL = """
import multiprocessing as mp, signal, subprocess, sys, time
from evalkit.engines.lifecycle import stop_children
lock = mp.get_context("spawn").Lock()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
stop_children(signal.SIGTERM, wait_s=3.0)
stop_children(signal.SIGKILL)
print("evalkit run: terminated (SIGTERM)", file=sys.stderr, flush=True)
time.sleep(0.5)  # the rest of the interpreter's shutdown: the children are gone by now
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.fixture
def segment() -> Iterator[str]:
    name = f"psm_ektest_{uuid.uuid4().hex[:12]}"
    yield name
    if (SHM / name).exists():
        os.unlink(SHM / name)


def test_the_fallback_unlinks_the_segments_of_the_children_it_stops(segment: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", STUCK, HOLDER, segment],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its group: whatever this test leaves is killed with it
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", proc.stderr and proc.stderr.read()
        assert (SHM / segment).exists()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 143, err  # the force exit, past FORCE_S
        assert not (SHM / segment).exists()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_stopping_the_children_spares_the_resource_tracker_no_key_error_at_exit() -> None:
    done = subprocess.run(
        [sys.executable, "-c", POOL], env=_env(), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.rstrip().endswith("evalkit run: terminated (SIGTERM)"), done.stderr
