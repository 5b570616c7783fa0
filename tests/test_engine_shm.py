"""Shared memory an engine's processes leave when vLLM force-kills them at shutdown is
released by the engine's close, so a normal run's exit prints no "leaked shared_memory"
warning (multiprocessing's resource tracker, shared with the engine processes, would).

The engine is played by a spawned child that creates a segment and is then SIGKILLed, as
vLLM's shutdown kills an engine core whose workers are slow to exit.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("psutil")

SCRIPT = textwrap.dedent(
    """
    import multiprocessing as mp, os, signal, sys, time
    from multiprocessing import shared_memory

    def engine_core(q):
        segment = shared_memory.SharedMemory(create=True, size=4096)
        q.put(segment.name)
        time.sleep(120)

    if __name__ == "__main__":
        from evalkit.engines.lifecycle import engine_shm, release_engine_shm

        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        core = ctx.Process(target=engine_core, args=(q,))
        core.start()
        name = q.get(timeout=30).lstrip("/")
        held = engine_shm()
        assert name in held, (name, held)
        os.kill(core.pid, signal.SIGKILL)
        core.join()
        if sys.argv[1] == "release":
            assert release_engine_shm(held) == [name]
        print("left", os.path.exists("/dev/shm/" + name), flush=True)
    """
)


def _run(tmp_path: Path, mode: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "engine.py"  # a file: spawned children re-import their target
    script.write_text(SCRIPT)
    return subprocess.run(
        [sys.executable, str(script), mode], capture_output=True, text=True, timeout=120
    )


def test_a_segment_left_by_a_killed_engine_process_is_released_without_a_warning(
    tmp_path: Path,
) -> None:
    done = _run(tmp_path, "release")
    assert done.returncode == 0, done.stderr
    assert "left False" in done.stdout
    assert "leaked shared_memory" not in done.stderr


def test_control_without_the_release_the_tracker_warns_at_exit(tmp_path: Path) -> None:
    # proves the test above can fail: the same script, the segment not released
    done = _run(tmp_path, "keep")
    assert done.returncode == 0, done.stderr
    assert "left True" in done.stdout
    assert "leaked shared_memory" in done.stderr
