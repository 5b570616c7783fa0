"""SIGTERM stops ``evalkit run`` at every phase (before the engine, during its start-up,
mid-run, during its shutdown) within a bound, exits 143 with one summary line, keeps every
durable record, and leaves no process of the run behind, nor any /dev/shm entry its
processes held (vLLM's ``psm_*`` message queues, semaphores); a second signal forces the
exit. Real vLLM CPU engine, tiny model, generated videos (heavy)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

pytest.importorskip("vllm")

from evalkit.engines._watchdog import shm_held
from evalkit.engines.lifecycle import shm_listing
from evalkit.store import Store
from evalkit.tiny_checkpoint import build_tiny_model
from tests._engine_env import engine_env, write_index_video_set

pytestmark = [pytest.mark.heavy, pytest.mark.timeout(600)]

N = 12  # 3 videos x 4 rows
EXIT_BOUND_S = 60.0  # the run used to go on for ~50 s (start-up) or sit ~6 min in poll()
ROOT = Path(__file__).resolve().parent.parent
SHM = Path("/dev/shm")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("signals")
    build_tiny_model(root / "model", "qwen2_5_vl", seed=0)
    return write_index_video_set(root, 3, 4, lambda v: 32 + 16 * v, "signals")


def _argv(world: Path, run_id: str) -> list[str]:
    argv = [sys.executable, "-m", "evalkit", "run", "--model", str(world / "model")]
    argv += ["--data", str(world / "set.jsonl"), "--video-root", str(world / "videos")]
    argv += ["--engine", "vllm", "--runs-dir", str(world / "runs"), "--run-id", run_id]
    argv += ["--no-progress", "--max-tokens", "64", "--cache-root", str(world / "cache")]
    argv += ["--engine-opt", "enforce_eager=true", "--engine-opt", "max_model_len=2048"]
    # two sequences at a time: the records land in six waves, so "mid-run" is a phase a
    # poller sees (with vLLM's default of 64 all twelve can land in one burst)
    argv += ["--engine-opt", "max_num_seqs=2"]
    argv += ["--dtype", "float32", "--frames-fps", "2", "--frames-max-frames", "8"]
    return [*argv, "--frames-max-pixels", str(112 * 84), "--frames-min-pixels", str(28 * 28 * 4)]


class Run:
    """``evalkit run`` as a child process, with every process it started remembered."""

    def __init__(self, world: Path, run_id: str) -> None:
        env = {**os.environ, **engine_env(), "PYTHONPATH": str(ROOT)}
        self.dir = world / "runs" / run_id
        self.shm_before = shm_listing()  # other sessions' entries: never the run's
        self.shm: set[str] = set()
        self._shm_at = 0.0
        self.proc = subprocess.Popen(
            _argv(world, run_id), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        self.ps = psutil.Process(self.proc.pid)
        self.seen: set[int] = set()

    def records(self) -> int:
        store = self.dir / "set.jsonl"
        return len(store.read_bytes().splitlines()) if store.exists() else 0

    def engine_started(self) -> bool:
        with_names = []
        try:
            for child in self.ps.children(recursive=True):
                self.seen.add(child.pid)
                with_names.append(child.name())
        except psutil.Error:
            pass
        return any("EngineCore" in n or "VLLM" in n for n in with_names)

    def note_shm(self) -> None:
        """Note the new /dev/shm entries the run's processes map or hold open now (the
        engine's come and stay for its life: sampling a few times a second sees them)."""
        procs = [self.ps]
        with contextlib.suppress(psutil.Error):
            procs += self.ps.children(recursive=True)
        for pid in self.seen - {p.pid for p in procs}:  # orphans of an exited run
            with contextlib.suppress(psutil.Error):
                procs.append(psutil.Process(pid))
        self.shm |= shm_held(procs) - self.shm_before
        self._shm_at = time.monotonic()

    def wait_for(self, phase: Callable[[Run], bool], timeout_s: float = 400.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not phase(self):
            assert self.proc.poll() is None, f"the run ended first: {self.proc.stderr.read()}"
            assert time.monotonic() < deadline, "the phase never came"
            if time.monotonic() - self._shm_at > 0.5:
                self.note_shm()
            time.sleep(0.05)

    def shm_left(self) -> list[str]:
        """The entries the run's processes held that are still in /dev/shm."""
        return sorted(n for n in self.shm if (SHM / n).exists())

    def terminate(self) -> tuple[float, str]:
        """SIGTERM; seconds until the process exited, and its stderr. The engine may go
        on starting after the signal: its shared memory is noted until the exit."""
        self.note_shm()
        err: list[str] = []
        assert self.proc.stderr is not None
        reader = threading.Thread(target=lambda: err.append(self.proc.stderr.read()))
        reader.start()
        t = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        while self.proc.poll() is None and time.monotonic() - t < EXIT_BOUND_S * 3:
            self.engine_started()  # notes the processes it starts meanwhile
            self.note_shm()
            time.sleep(0.1)
        took = time.monotonic() - t
        self.proc.wait(timeout=10)
        reader.join(timeout=30)
        return took, "".join(err)

    def survivors(self) -> list[int]:
        """Processes of the run still alive a few seconds after it exited."""
        deadline = time.monotonic() + 15
        while True:
            alive = [p for p in self.seen if _alive(p)]
            if not alive or time.monotonic() > deadline:
                return alive
            time.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


PHASES: dict[str, Callable[[Run], bool]] = {
    "before_the_engine": lambda r: (r.dir / "config.json").exists() and not r.engine_started(),
    "during_engine_start_up": lambda r: r.engine_started() and r.records() == 0,
    "mid_run": lambda r: r.engine_started() and 0 < r.records() < N,
    "during_shutdown": lambda r: r.engine_started() and r.records() >= N,
}


@pytest.mark.parametrize("phase", sorted(PHASES))
def test_sigterm_stops_the_run_promptly_at_every_phase(world: Path, phase: str) -> None:
    run = Run(world, phase)
    run.wait_for(PHASES[phase])
    kept = run.records()
    took, err = run.terminate()
    print(f"SIGTERM {phase}: exit {run.proc.returncode} after {took:.1f} s", file=sys.stderr)
    assert run.proc.returncode == 143, err
    assert took < EXIT_BOUND_S
    # evalkit's last word; after it, in one CI run of "during_shutdown", multiprocessing's
    # resource tracker (a child sharing stderr) printed a KeyError for a semaphore name
    assert "evalkit run: terminated (SIGTERM)" in err
    assert run.survivors() == []
    assert run.shm_left() == [], f"held by the run: {sorted(run.shm)}"
    if (run.dir / "set.jsonl").exists():
        with Store(run.dir / "set.jsonl") as store:  # opens: every line a whole record
            assert len(store.done_ids()) >= kept


def test_a_second_sigterm_forces_the_exit(world: Path) -> None:
    run = Run(world, "twice")
    run.wait_for(PHASES["during_engine_start_up"])
    run.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    took, _ = run.terminate()
    assert run.proc.returncode == 143 and took < EXIT_BOUND_S
    assert run.survivors() == []
    assert run.shm_left() == [], f"held by the run: {sorted(run.shm)}"
