"""``evalkit sweep`` as one process tree of bounded size: a grid of many settings scores in
a pool of processes whose size does not grow with the settings, SIGTERM stops it as
promptly as a single run with its one summary line and nothing after it, and a second
sweep of its directory is refused while it runs, before any engine starts.

The sweep runs as a process of its own (``tests/_sweep_main.py``) on a scripted engine that
answers one sample of each setting at once and holds the other in flight, so every
setting is mid-run, with a scored record, when it is looked at."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalkit.cli.main import main
from evalkit.engines.lifecycle import Termination
from evalkit.sweep import scoring_processes
from tests._processes import alive, cmdline, descendants, survivors
from tests._synth_world import synth_world

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = 40
SLOW_ID = "yes_no-test-0001"  # of SynthVideo's two samples, the one held in flight


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return synth_world(tmp_path, monkeypatch, 2)


class Sweep:
    """``evalkit sweep`` of ``SETTINGS`` settings in ``world/sw``, as a child process."""

    def __init__(self, world: Path) -> None:
        tokens = ",".join(str(8 + i) for i in range(SETTINGS))
        argv = [sys.executable, str(ROOT / "tests" / "_sweep_main.py"), SLOW_ID, "600"]
        argv += ["sweep", "--model", "ckpt", "--bench", "SynthVideo", "--data-root", "synth"]
        argv += ["--no-progress", "--cache-workers", "1", "--cache-root", "cache"]
        argv += ["--grid", f"generation.max_tokens={tokens}", "--sweep-dir", "sw"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.dir = world / "sw"
        self.proc = subprocess.Popen(
            argv, cwd=world, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        self.seen: set[int] = set()

    def mid_run(self, timeout_s: float = 300.0) -> None:
        """Wait until every setting has scored a sample (and holds the other in flight)."""
        deadline = time.monotonic() + timeout_s
        while not self._every_setting_scored():
            assert self.proc.poll() is None, f"the sweep ended first: {self.proc.stderr.read()}"  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the settings never all scored a sample"
            self.seen |= descendants(self.proc.pid)
            time.sleep(0.1)
        self.seen |= descendants(self.proc.pid)

    def _every_setting_scored(self) -> bool:
        try:
            doc = json.loads((self.dir / "sweep.json").read_text())
        except (OSError, ValueError):
            return False
        for s in doc["settings"]:
            store = self.dir / s["run"] / "SynthVideo.jsonl"
            if not store.exists() or not store.read_bytes().strip():
                return False
        return True

    def terminate(self) -> tuple[float, str]:
        """SIGTERM; seconds until the process exited, and its stderr."""
        err: list[str] = []
        reader = threading.Thread(target=lambda: err.append(self.proc.stderr.read()))  # type: ignore[union-attr]
        reader.start()
        t = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        took = time.monotonic() - t
        reader.join(timeout=30)
        return took, "".join(err)

    def stop(self) -> None:
        """End it as a user would (SIGTERM: it releases what it made, its pool's
        semaphores included), killing it and what it started only if it does not go."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        survivors(self.seen, wait_s=10)


@pytest.fixture
def sweep(world: Path) -> Iterator[Sweep]:
    running = Sweep(world)
    try:
        yield running
    finally:
        running.stop()


def test_a_many_setting_sweep_scores_in_a_pool_that_does_not_grow_with_the_settings(
    sweep: Sweep,
) -> None:
    sweep.mid_run()
    own = cmdline(sweep.proc.pid)
    procs = [p for p in descendants(sweep.proc.pid) if alive(p)]
    # the scoring processes are forked copies of the sweep (its command line); one per
    # setting made 40 here (197 for a 200-setting grid)
    scoring = [p for p in procs if cmdline(p) == own]
    assert 1 <= len(scoring) <= scoring_processes(SETTINGS) < SETTINGS, scoring
    # besides them, multiprocessing's own: its resource tracker, and the fork server the
    # decoding processes fork from (one each, whatever the settings), and at most the one
    # decoding process of --cache-workers 1 (forked from that server: its command line)
    helpers = [p for p in procs if b"multiprocessing." in cmdline(p)]
    assert len(helpers) <= 3, [cmdline(p) for p in helpers]
    assert len(procs) <= scoring_processes(SETTINGS) + len(helpers), [cmdline(p) for p in procs]


def test_sigterm_stops_a_many_setting_sweep_as_a_run_with_one_line(sweep: Sweep) -> None:
    sweep.mid_run()
    took, err = sweep.terminate()
    assert sweep.proc.returncode == 143, err
    # the sweep's one line and nothing after it (an asyncio "Task exception was never
    # retrieved" traceback came after it)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evalkit sweep: terminated (SIGTERM)"), err
    # it unwinds by itself, as a run does: the children are never left for the fallback
    # that kills them GRACE_S after the signal (40 settings took 6 s, 200 more than 10 s)
    assert took < Termination.GRACE_S, took
    assert survivors(sweep.seen) == []


def test_a_second_sweep_of_a_running_sweep_is_refused_before_its_engine_starts(
    world: Path, sweep: Sweep, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    sweep.mid_run()
    started: list[Any] = []
    monkeypatch.setattr("evalkit.run.execute.make_engine", started.append)
    manifest = world / "sw" / "sweep.json"
    before = manifest.stat()
    t = time.monotonic()
    with contextlib.suppress(SystemExit):
        assert main(["sweep", "--resume", "sw", "--no-progress"]) == 2
    took = time.monotonic() - t
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"is being written by pid {sweep.proc.pid}" in err[0], err
    assert started == []
    after = manifest.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    print(f"refused in {took:.2f} s", file=sys.stderr)
