"""The "main process" of the orphan tests (run as a script, then killed with SIGKILL).

    python tests/_orphan_main.py vllm MODEL_DIR   # a real vLLM engine on the tiny model
    python tests/_orphan_main.py fake SHM_NAME    # a Reaper and a spawned child holding SHM
    python tests/_orphan_main.py late SHM_NAME    # the child makes SHM just before the kill
    python tests/_orphan_main.py brief SHM_NAME   # the child holds SHM-a, then SHM-b, briefly

Prints one line ``READY`` once its engine processes run, then waits to be killed.
"""

from __future__ import annotations

import multiprocessing
import sys
import time


def _hold(name: str) -> None:
    """A stand-in engine process: holds a /dev/shm entry open and never exits."""
    f = open(f"/dev/shm/{name}", "w")  # noqa: SIM115 (held open until killed)
    f.write("x")
    f.flush()
    time.sleep(600)


def _fake(name: str) -> None:
    from evalkit.engines.lifecycle import Reaper

    Reaper().start()
    child = multiprocessing.get_context("spawn").Process(target=_hold, args=(name,))
    child.start()
    while not _exists(name):
        time.sleep(0.05)
    time.sleep(1.5)  # the watchdog polls every 0.5 s


def _hold_when(name: str, go: object) -> None:
    go.wait()  # type: ignore[attr-defined]
    _hold(name)


def _late(name: str) -> None:
    """The engine core's case: a child the watchdog has long noted makes its segment, and
    this process is killed at once (before the watchdog's next poll could see it)."""
    import os
    import signal

    from evalkit.engines.lifecycle import Reaper

    Reaper().start()
    ctx = multiprocessing.get_context("spawn")
    go = ctx.Event()
    child = ctx.Process(target=_hold_when, args=(name, go))
    child.start()
    time.sleep(1.5)  # the watchdog polls every 0.5 s: the child is noted
    print("READY", flush=True)
    go.set()
    while not _exists(name):
        time.sleep(0.001)
    os.kill(os.getpid(), signal.SIGKILL)


def _hold_briefly(name: str, go: object, done: object) -> None:
    # Each entry is held 40 ms, and let go (not unlinked) 0.34 s apart: a watchdog that
    # only polled every 0.5 s would see each with a chance of 40 / 500.
    go.wait()  # type: ignore[attr-defined]
    for part in ("a", "b"):
        with open(f"/dev/shm/{name}-{part}", "w") as f:
            f.write("x")
            f.flush()
            time.sleep(0.04)
        time.sleep(0.3)
    done.set()  # type: ignore[attr-defined]
    time.sleep(600)


def _brief(name: str) -> None:
    """A noted child's segments, each held only between two polls; then both are killed."""
    from evalkit.engines.lifecycle import Reaper

    Reaper().start()
    ctx = multiprocessing.get_context("spawn")
    go, done = ctx.Event(), ctx.Event()
    ctx.Process(target=_hold_briefly, args=(name, go, done)).start()
    time.sleep(1.5)  # the watchdog polls every 0.5 s: the child is noted
    go.set()
    done.wait()


def _exists(name: str) -> bool:
    import os

    return os.path.exists(f"/dev/shm/{name}")


def _vllm(model: str) -> None:
    from evalkit.engines.vllm_engine import VLLMConfig, VLLMEngine

    VLLMEngine(
        VLLMConfig(
            model=model,
            dtype="float32",
            enforce_eager=True,
            max_num_batched_tokens=256,
            max_num_seqs=2,
            max_model_len=1024,
        )
    )
    time.sleep(1.5)  # the watchdog polls every 0.5 s


if __name__ == "__main__":
    {"fake": _fake, "late": _late, "brief": _brief, "vllm": _vllm}[sys.argv[1]](sys.argv[2])
    print("READY", flush=True)
    time.sleep(600)
