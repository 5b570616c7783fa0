"""What the distributed trainer tests share: the tiny model they train and a local Ray."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest


def tiny_model(factory: pytest.TempPathFactory, family: str = "qwen2_5_vl") -> Path:
    """A tiny random ``family`` model (seed 0) in a fresh temporary folder."""
    from evalkit.tiny_checkpoint import build_tiny_model

    return build_tiny_model(factory.mktemp("tiny") / family, family, seed=0)


@contextmanager
def local_ray(num_cpus: int, **options: Any) -> Iterator[Any]:
    """A new local Ray instance of this test's own with ``num_cpus`` logical CPUs (skips
    without Ray), shut down after. ``address="local"``: never a cluster already running on
    the machine (its session files go under the test session's ``RAY_TMPDIR``)."""
    ray = pytest.importorskip("ray")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    options.setdefault("log_to_driver", False)
    ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, **options)
    try:
        yield ray
    finally:
        ray.shutdown()


@contextmanager
def outside_cluster(root: Path, num_cpus: int = 1, timeout_s: float = 120.0) -> Iterator[str]:
    """A separate Ray cluster (``ray start --head --block``, its own port and temp dir) for
    the length of the block, announced as ``RAY_ADDRESS`` the way a user's workstation
    would; yields its address. Stopped by its own process group and the processes whose
    command line names its temp dir, never by ``ray stop`` (which ends every cluster of
    the machine)."""
    import signal
    import socket
    import subprocess
    import time

    pytest.importorskip("ray")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    temp = Path(tempfile.mkdtemp(prefix="ekout-", dir="/tmp"))
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    cmd = ["ray", "start", "--head", f"--port={port}", f"--temp-dir={temp}"]
    cmd += [f"--num-cpus={num_cpus}", "--include-dashboard=false", "--disable-usage-stats"]
    proc = subprocess.Popen(
        [*cmd, "--block"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while not _answers(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"`{' '.join(cmd)}` did not come up (exit {proc.poll()})")
            time.sleep(0.2)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("RAY_ADDRESS", address)
            yield address
    finally:
        _stop_group(proc, temp, signal.SIGTERM)
        shutil.rmtree(temp, ignore_errors=True)


def _answers(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _stop_group(proc: Any, temp: Path, sig: int) -> None:
    """Ends the cluster's processes: its group, then any left that name ``temp``."""
    import signal
    import subprocess

    import psutil

    with suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    # the cluster's own processes end at once; `ray start --block` itself does not exit on
    # SIGTERM (seen: still there 40 s later), so waiting long for it only costs the suite
    with suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    for p in psutil.process_iter(["pid", "cmdline"]):
        if any(str(temp) in part for part in p.info["cmdline"] or []):
            with suppress(psutil.Error):
                p.send_signal(signal.SIGKILL)
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
