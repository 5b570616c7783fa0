"""Sandboxes started ahead of their jobs (``sandbox._Spares``): each is still one sandbox
per job, none outlives the process that started it, and a dead one never costs a verdict."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalkit.scoring import sandbox
from evalkit.scoring.bounded import BoundedScorer
from evalkit.scoring.sandbox import Limits, _Started, close_spares, run_job
from tests._processes import descendants, survivors

JOB = {
    "kind": "python",
    "code": "def add(a, b):\n    return a + b",
    "tests": ["assert add(1, 2) == 3"],
}
KEY = (Limits(), True)


@pytest.fixture(autouse=True)
def _no_spares_left() -> Iterator[None]:
    close_spares()
    yield
    close_spares()


def _waiting(key: tuple[Limits, bool] = KEY, n: int = sandbox._Spares.DEPTH) -> list[_Started]:
    """The sandboxes waiting for ``key``, once ``n`` of them are up (bounded wait)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with sandbox._spares._lock:
            ready = list(sandbox._spares._ready.get(key, []))
        if len(ready) >= n:
            return ready
        time.sleep(0.02)
    raise AssertionError(f"{n} sandboxes not started ahead within 30 s (have {len(ready)})")


def _folders(pid: int, since: float = 0.0) -> set[Path]:
    """The sandbox folders named for ``pid`` (made after ``since``, a ``time.time()``: a
    process killed earlier with the same pid may have left some)."""
    found = set()
    for folder in Path(tempfile.gettempdir()).glob(f"evalkit-*-{pid}-*"):
        with contextlib.suppress(OSError):
            if folder.stat().st_ctime >= since:
                found.add(folder)
    return found


def test_a_job_leaves_sandboxes_waiting_and_the_next_job_takes_one() -> None:
    assert run_job(JOB).result == {"passed": [True]}
    first, _ = _waiting()
    assert first.proc.poll() is None
    assert run_job(JOB).result == {"passed": [True]}
    assert first.proc.returncode is not None  # it ran that job and is gone
    assert not first.workdir.exists()


def test_each_job_gets_a_fresh_sandbox_of_its_own() -> None:
    # Each job lists its working folder, leaves a file there and reports its uid.
    code = "import os\nSEEN = sorted(os.listdir('.'))\nopen('left', 'w').write('x')\n"
    job = {"kind": "python", "code": code + "UID = os.getuid()", "tests": ["print(SEEN, UID)"]}
    got = []
    for i in range(3):
        if i:  # the second and third go to sandboxes started ahead
            _waiting()
        run = run_job(job)
        assert run.result == {"passed": [True]}, run.stderr
        got.append(run.stdout)
    assert all(line.startswith("[] ") for line in got), got  # no job file, nothing left
    assert len(set(got)) == 3, got  # three uids


def test_a_sandbox_that_died_waiting_is_not_given_the_job() -> None:
    run_job(JOB)
    for spare in _waiting():
        os.killpg(spare.proc.pid, signal.SIGKILL)
        spare.proc.wait(10)
    assert run_job(JOB).result == {"passed": [True]}


def test_a_sandbox_that_dies_as_it_is_handed_the_job_is_replaced() -> None:
    # Alive when taken, but it shuts its stdin before reading: the job never ran there,
    # so it runs in a fresh sandbox instead of ending without a verdict.
    proc = subprocess.Popen(
        ["sh", "-c", "exec 0<&-; exec sleep 30"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 10
    while Path(f"/proc/{proc.pid}/fd/0").exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # until it has shut its stdin
    verdict_r, verdict_w = os.pipe()
    os.close(verdict_w)
    stand_in = _Started(proc, verdict_r, Path(tempfile.mkdtemp()), None, sandbox.isolation())
    with sandbox._spares._lock:
        sandbox._spares._ready[KEY] = [stand_in]
    t = time.monotonic()
    run = run_job(JOB)
    assert run.result == {"passed": [True]}, run
    assert time.monotonic() - t < 10  # not held until the stand-in's sleep ends
    assert proc.returncode is not None


def test_a_forked_child_does_not_see_its_parents_sandboxes() -> None:
    run_job(JOB)
    _waiting()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        os.close(r)
        os.write(w, json.dumps(len(sandbox._spares._ready)).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        assert json.loads(f.read()) == 0
    os.waitpid(pid, 0)
    assert all(s.proc.poll() is None for s in _waiting())  # the parent's are untouched


def test_a_set_of_limits_used_least_recently_is_dropped_past_keep() -> None:
    keys = [(Limits(wall_s=10.0 + i), True) for i in range(sandbox._Spares.KEEP + 1)]
    run_job(JOB, keys[0][0])
    oldest = _waiting(keys[0])
    for key in keys[1:]:
        sandbox._spares.refill(key)
    with sandbox._spares._lock:
        assert keys[0] not in sandbox._spares._ready
        assert len(sandbox._spares._ready) == sandbox._Spares.KEEP
    assert all(s.proc.poll() is not None for s in oldest)
    assert all(not s.workdir.exists() for s in oldest)


def test_close_leaves_no_sandbox_and_no_folder_even_with_a_start_under_way() -> None:
    since = time.time() - 1
    run_job(JOB)
    sandbox._spares.refill((Limits(wall_s=11.0), True))  # starts still under way
    close_spares()
    assert _folders(os.getpid(), since) == set()
    assert run_job(JOB).result == {"passed": [True]}  # and it keeps working after


_HOLDER = """
import sys, time
from evalkit.scoring import sandbox
sandbox.run_job({"kind": "python", "code": "x = 1", "tests": ["assert x == 1"]})
while len(sandbox._spares._ready.get((sandbox.Limits(), True), [])) < 2:
    time.sleep(0.02)
print("ready", flush=True)
time.sleep(120)
"""


def test_sandboxes_waiting_in_a_killed_process_die_with_it() -> None:
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        waiting = descendants(holder.pid)
        assert len(waiting) >= 2
        holder.kill()
        holder.wait(10)
        assert survivors(waiting) == []
    finally:
        holder.kill()
        for folder in _folders(holder.pid):  # SIGKILL runs no cleanup: its folders stay
            subprocess.run(["rm", "-rf", str(folder)], check=False)


def _job_then_hang(sample: object, reply: object) -> object:
    if reply == "hang":
        time.sleep(600)
    return run_job(JOB).result


@pytest.mark.parametrize("how", ["close", "budget", "sigterm"])
def test_a_scoring_child_leaves_no_sandbox_folder_however_it_ends(how: str) -> None:
    # Closed, it closes the sandboxes it started ahead itself. Past its budget it is killed
    # with SIGKILL and runs no cleanup: the parent that reaped it removes their folders. A
    # SIGTERM (a terminated run stops its children so) ends it through its own cleanup.
    scorer = BoundedScorer(_job_then_hang, budget_s=1.0 if how == "budget" else 30.0)
    since = time.time() - 1  # (ctime has the kernel's tick)
    try:
        assert scorer(None, None) == {"passed": [True]}  # type: ignore[arg-type]
        child = scorer._child.pid
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(_folders(child, since)) < 2:
            time.sleep(0.02)
        assert _folders(child, since)  # its sandboxes, started ahead
        if how == "close":
            scorer.close()
        elif how == "budget":
            got = scorer(None, "hang")  # type: ignore[arg-type]
            assert "time budget" in got.explanation
        else:
            os.kill(child, signal.SIGTERM)
            scorer._child.join(10)
            assert scorer._child.exitcode is not None
        assert _folders(child, since) == set()
    finally:
        scorer.close()
