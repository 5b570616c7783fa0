"""One writer per run directory: a second `run`/`resume` is refused at once, naming the
holder; a dead holder's lock is taken over; every sample is recorded exactly once."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from evalkit.errors import ConfigError
from evalkit.run.execute import execute
from evalkit.runlock import LOCK_NAME, RunLock, RunLockedError
from tests._run_dirs import Counting, cut_store, expected_ids, ids, run_config, write_set

ROOT = Path(__file__).resolve().parents[1]


def _owner_line(run: Path, **owner: object) -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / LOCK_NAME).write_text(json.dumps(owner) + "\n")


def test_a_second_writer_is_refused_naming_the_holder(tmp_path: Path) -> None:
    with (
        RunLock(tmp_path / "r"),
        pytest.raises(
            RunLockedError, match=re.escape(f"pid {os.getpid()} on host {socket.gethostname()}")
        ),
    ):
        RunLock(tmp_path / "r").acquire()
    with RunLock(tmp_path / "r"):  # released on exit: free again
        pass


def test_a_holder_that_has_not_written_its_name_yet_is_waited_for(tmp_path: Path) -> None:
    # both resumers reach the lock at once: the loser reads the line the winner is writing
    (tmp_path / "r").mkdir()
    fd = os.open(tmp_path / "r" / LOCK_NAME, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        line = b'{"pid": 4242, "host": "h", "since": "now"}\n'
        threading.Timer(0.3, os.pwrite, (fd, line, 0)).start()
        with pytest.raises(RunLockedError, match=r"pid 4242 on host h \(evalkit, since now\)"):
            RunLock(tmp_path / "r").acquire()
    finally:
        os.close(fd)


def test_a_lock_kept_by_an_orphan_of_a_dead_writer_says_so(tmp_path: Path) -> None:
    # the writer was killed; a child it forked (an engine process) still holds the lock
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _owner_line(tmp_path / "r", pid=dead.pid, host=socket.gethostname())
    fd = os.open(tmp_path / "r" / LOCK_NAME, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(RunLockedError, match=r"no longer running.*orphaned engine"):
            RunLock(tmp_path / "r").acquire()
    finally:
        os.close(fd)


def test_the_lock_of_a_dead_process_is_taken_over_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _owner_line(tmp_path / "r", pid=dead.pid, host=socket.gethostname(), since="then")
    with caplog.at_level(logging.WARNING), RunLock(tmp_path / "r") as lock:
        assert lock.stale is not None and lock.stale["pid"] == dead.pid
    assert f"pid {dead.pid}" in caplog.text and "no longer running" in caplog.text


def test_an_owner_line_of_a_live_process_is_honoured_where_flock_is_not(tmp_path: Path) -> None:
    # a file system that ignores flock: the owner line alone must keep a second writer out
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        _owner_line(tmp_path / "r", pid=live.pid, host=socket.gethostname())
        with pytest.raises(RunLockedError, match=rf"pid {live.pid} .*ignores flock"):
            RunLock(tmp_path / "r").acquire()
    finally:
        live.kill()
        live.wait()


def test_a_lock_left_by_another_host_says_what_to_check(tmp_path: Path) -> None:
    _owner_line(tmp_path / "r", pid=4242, host="gpu-node-7", since="2026-12-01T10:00:00")
    with pytest.raises(RunLockedError, match=r"pid 4242 on host gpu-node-7.*another host.*delete"):
        RunLock(tmp_path / "r").acquire()


def test_a_new_run_that_fails_before_writing_leaves_no_directory(tmp_path: Path) -> None:
    write_set(tmp_path, 2)
    with pytest.raises(ConfigError, match="no local copy"):
        execute(run_config(tmp_path, bench=["Video-MME"], data=None), engine=Counting())
    assert not (tmp_path / "runs" / "r").exists()


# Two `evalkit run --resume` processes on one run directory. Their engine waits for a gate
# file, so the one that gets in holds the directory until the test opens the gate: the other
# must be refused meanwhile, whichever starts first. Every original flag is given, so the
# script also runs against an evalkit that cannot resume by directory alone.
RESUMER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    import evalkit.run.execute as runner
    from evalkit.cli.main import main
    from tests.scripted_engine import ScriptedEngine

    class Gated(ScriptedEngine):
        async def generate(self, request):
            while not Path({gate!r}).exists():
                await asyncio.sleep(0.02)
            return await super().generate(request)

    runner.make_engine = lambda cfg: Gated(prefill_s=0.0, decode_s=0.0)
    sys.exit(main(sys.argv[1:]))
    """
)


def test_two_concurrent_resumers_one_refused_every_sample_exactly_once(tmp_path: Path) -> None:
    data = write_set(tmp_path, 40)
    run = execute(run_config(tmp_path), engine=Counting()).path
    cut_store(run, 20)  # a crash after 20 samples
    script = tmp_path / "resume.py"
    gate = tmp_path / "gate"
    script.write_text(RESUMER.format(root=str(ROOT), gate=str(gate)))
    argv = [sys.executable, str(script), "run", "--model", "letter-a", "--engine", "openai"]
    argv += ["--engine-opt", "probe=false"]  # the engine is scripted: no server to ask
    argv += ["--data", str(data)]
    argv += ["--cache-root", str(tmp_path / "cache"), "--cache-workers", "1"]
    argv += ["--runs-dir", str(tmp_path / "runs"), "--resume", str(run), "--no-progress"]
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    deadline = time.time() + 90
    while time.time() < deadline and all(p.poll() is None for p in procs):
        time.sleep(0.05)
    gate.touch()  # let the one that got in finish (both, if neither was refused)
    outs = [p.communicate(timeout=120) for p in procs]
    recorded = ids(run)
    assert len(recorded) == 40 and sorted(recorded) == expected_ids(40), outs
    assert sorted(p.returncode for p in procs) == [0, 2], outs
    winner, loser = sorted(range(2), key=lambda i: procs[i].returncode)
    assert f"is being written by pid {procs[winner].pid}" in outs[loser][1]
    assert "Traceback" not in outs[loser][1]
