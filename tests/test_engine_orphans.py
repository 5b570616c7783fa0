"""Engine processes die with the evalkit process that started them, even when it is
killed with SIGKILL, and the shared memory they held in /dev/shm is released.

The "main process" is a subprocess (tests/_orphan_main.py); the test kills it and watches
what it had started. The heavy test starts a real vLLM engine on the tiny model (CPU).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

psutil = pytest.importorskip("psutil")

ROOT = Path(__file__).resolve().parent.parent
MAIN = ROOT / "tests" / "_orphan_main.py"
SHM = Path("/dev/shm")
SURVIVAL_S = 8.0  # "a few seconds": the watchdog polls every 0.5 s, then TERM, 1.5 s, KILL

pytestmark = pytest.mark.skipif(not SHM.is_dir(), reason="needs Linux /dev/shm")


def _start(mode: str, arg: str, env: dict[str, str], timeout: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, str(MAIN), mode, arg],
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    deadline = time.time() + timeout
    assert proc.stdout is not None
    for line in proc.stdout:  # vLLM prints to stdout too: wait for our line
        if line.startswith("READY"):
            return proc
        if time.time() > deadline:
            break
    proc.kill()
    raise AssertionError(f"the main process did not get ready (exit {proc.wait()})")


def _held_shm(procs: list[psutil.Process]) -> set[str]:
    sys.path.insert(0, str(ROOT / "evalkit" / "engines"))
    try:
        from _watchdog import shm_held  # the watchdog's own reading of /proc
    finally:
        sys.path.pop(0)
    return shm_held(procs)


def _survivors(procs: list[psutil.Process], within: float) -> list[str]:
    deadline = time.time() + within
    while True:
        alive = [p for p in procs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if not alive or time.time() > deadline:
            return [f"{p.pid} {p.name()}" for p in alive]
        time.sleep(0.2)


def _kill_and_check(proc: subprocess.Popen[str]) -> tuple[list[str], list[str]]:
    """SIGKILL the main process; what it started, and the shm they held, still there."""
    main = psutil.Process(proc.pid)
    started = main.children(recursive=True)
    held = _held_shm([main, *started])
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    try:
        survivors = _survivors(started, SURVIVAL_S)
        left = sorted(n for n in held if (SHM / n).exists())
    finally:  # never leave them to the next test, whatever the verdict
        for p in started:
            with contextlib.suppress(psutil.Error):
                p.kill()
    return survivors, left


def test_a_spawned_engine_stand_in_dies_with_its_killed_parent() -> None:
    name = f"evalkit-orphan-test-{uuid.uuid4().hex[:8]}"
    proc = _start("fake", name, {}, timeout=60)
    survivors, left = _kill_and_check(proc)
    assert survivors == []
    assert not (SHM / name).exists(), "the /dev/shm entry the child held was not released"
    assert left == []


def test_a_segment_made_just_before_the_kill_is_released_too() -> None:
    # the watchdog polls every 0.5 s; the kill lands a millisecond after the segment exists
    name = f"evalkit-orphan-test-{uuid.uuid4().hex[:8]}"
    proc = _start("late", name, {}, timeout=60)
    started = psutil.Process(proc.pid).children(recursive=True)
    proc.wait(timeout=30)
    try:
        assert _survivors(started, SURVIVAL_S) == []
        deadline = time.time() + SURVIVAL_S
        while (SHM / name).exists() and time.time() < deadline:
            time.sleep(0.1)
        assert not (SHM / name).exists(), "a segment made after the watchdog's last poll stayed"
    finally:
        for p in started:
            with contextlib.suppress(psutil.Error):
                p.kill()
        with contextlib.suppress(OSError):
            (SHM / name).unlink()


def test_a_segment_held_only_between_two_polls_is_released() -> None:
    # the watchdog looks when an entry appears in /dev/shm, not only every 0.5 s
    name = f"evalkit-orphan-test-{uuid.uuid4().hex[:8]}"
    entries = [SHM / f"{name}-{part}" for part in ("a", "b")]
    proc = _start("brief", name, {}, timeout=60)
    try:
        assert all(e.exists() for e in entries)  # made, and held by nobody now
        survivors, _ = _kill_and_check(proc)
        assert survivors == []
        deadline = time.time() + SURVIVAL_S
        while any(e.exists() for e in entries) and time.time() < deadline:
            time.sleep(0.1)
        assert [e.name for e in entries if e.exists()] == []
    finally:
        for e in entries:
            with contextlib.suppress(OSError):
                e.unlink()


@pytest.mark.heavy
def test_vllm_engine_processes_die_with_a_killed_main_process(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    pytest.importorskip("vllm")
    from evalkit.tiny_checkpoint import build_tiny_model
    from tests._engine_env import engine_env

    env = engine_env()
    for key in ("VLLM_CACHE_ROOT", "HF_HOME", "XDG_CACHE_HOME"):
        os.makedirs(env[key], exist_ok=True)
    model = build_tiny_model(tmp_path_factory.mktemp("tiny") / "q25", "qwen2_5_vl", seed=0)
    proc = _start("vllm", str(model), env, timeout=600)
    main = psutil.Process(proc.pid)
    names = {p.name() for p in main.children(recursive=True)}
    assert any("EngineCore" in n for n in names), names  # a real engine process to orphan
    survivors, left = _kill_and_check(proc)
    assert survivors == [], "engine processes outlived the killed main process"
    assert left == [], "shared memory of the engine was not released"
