"""Run untrusted code (model-written Python, SVG to render) in a locked-down process.

Layers, outermost first:
- a new network namespace (no interfaces up: every socket fails) and a new PID namespace
  (when the sandbox's first process dies the kernel kills everything it started, even
  processes that left the process group), via util-linux ``unshare`` when running as root;
- privileges dropped to ``nobody`` (``setpriv``) so that RLIMIT_NPROC is enforced — the
  kernel does not apply it to root;
- rlimits: CPU seconds, address space, file size, process count, open files;
- a wall-clock limit: the whole process group is killed with SIGKILL;
- an empty environment and a fresh temporary working directory, removed afterwards;
- inside, an audit hook (``_sandbox_child.py``) refusing files outside that directory,
  sockets, subprocesses and ctypes.
``isolation()`` says which layers are available on this machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

_CHILD = Path(__file__).with_name("_sandbox_child.py")
NOBODY = 65534


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed run."""

    cpu_s: int = 5
    wall_s: float = 10.0
    memory_mb: int = 1024
    file_mb: int = 16
    processes: int = 16
    open_files: int = 64
    output_bytes: int = 1 << 20


@dataclass
class RunResult:
    """What came back from a sandboxed run: the job's result, or why there is none."""

    result: dict[str, Any] | None
    returncode: int | None
    timed_out: bool
    wall_s: float
    stderr: str = ""
    isolation: list[str] = field(default_factory=list)


@lru_cache(maxsize=1)
def isolation() -> tuple[str, ...]:
    """The isolation layers this machine supports (checked once, by trying them)."""
    layers = ["rlimits", "wall_clock_kill", "empty_env", "temp_cwd", "audit_hook"]
    if os.name != "posix":
        return tuple(layers)
    if shutil.which("prlimit"):
        layers.append("prlimit")
    if os.geteuid() == 0 and shutil.which("setpriv"):
        layers.append("drop_to_nobody")
    if os.geteuid() == 0 and shutil.which("unshare"):
        probe = subprocess.run(
            ["unshare", "--net", "--pid", "--fork", "--kill-child", "true"],
            capture_output=True,
            timeout=10,
        )
        if probe.returncode == 0:
            layers += ["net_namespace", "pid_namespace"]
    return tuple(layers)


def _command(layers: tuple[str, ...], limits: Limits) -> list[str]:
    cmd: list[str] = []
    if "prlimit" in layers:
        # Set by util-linux prlimit before exec (preexec_fn is unsafe in threaded parents).
        mb = 1 << 20
        cmd += [
            "prlimit",
            f"--cpu={limits.cpu_s}:{limits.cpu_s + 1}",
            f"--as={limits.memory_mb * mb}",
            f"--fsize={limits.file_mb * mb}",
            f"--nproc={limits.processes}",
            f"--nofile={limits.open_files}",
            "--core=0",
            "--",
        ]
    if "net_namespace" in layers:
        cmd += ["unshare", "--net", "--pid", "--fork", "--kill-child", "--"]
    if "drop_to_nobody" in layers:
        cmd += [
            "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            "--no-new-privs",
            "--",
        ]
    return [*cmd, sys.executable, "-I", "-B", str(_CHILD)]


def _set_limits(limits: Limits) -> Any:
    def apply() -> None:  # runs in the child between fork and exec
        mb = 1 << 20
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * mb,) * 2)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mb * mb,) * 2)
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes,) * 2)
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files,) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def run_job(job: dict[str, Any], limits: Limits | None = None) -> RunResult:
    """Run one job (``{"kind": "python", "code", "tests"}`` or ``{"kind": "svg", ...}``)."""
    limits = limits or Limits()
    layers = isolation()
    workdir = Path(tempfile.mkdtemp(prefix="evalkit-sandbox-"))
    nonce = secrets.token_hex(16)
    start = time.monotonic()
    try:
        (workdir / "job.json").write_text(json.dumps(job))
        if "drop_to_nobody" in layers:
            os.chown(workdir, NOBODY, NOBODY)
            os.chown(workdir / "job.json", NOBODY, NOBODY)
        os.chmod(workdir, 0o700)
        proc = subprocess.Popen(
            _command(layers, limits),
            cwd=workdir,
            env={},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, killed as one
            preexec_fn=None if "prlimit" in layers else _set_limits(limits),
        )
        timed_out = False
        try:
            out, err = proc.communicate(nonce.encode() + b"\n", timeout=limits.wall_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill(proc)
            out, err = proc.communicate()
        _kill_group(proc.pid)  # anything it left behind in its group
        return RunResult(
            result=_result(out[-limits.output_bytes :], nonce),
            returncode=proc.returncode,
            timed_out=timed_out,
            wall_s=time.monotonic() - start,
            stderr=err[-2000:].decode(errors="replace"),
            isolation=list(layers),
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    # Kill unshare's child (the sandbox namespace's first process) before unshare itself,
    # so that unshare reaps it and the kernel tears the namespace down with everything in
    # it; killing both at once would leave a zombie for the machine's init to collect.
    try:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    except OSError:
        children = []
    for pid in children:
        with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(2.0)
    _kill_group(proc.pid)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _result(stdout: bytes, nonce: str) -> dict[str, Any] | None:
    # Only a line with the nonce counts: the code under test cannot fake the verdict by
    # printing, and exiting early leaves no verdict at all.
    for line in reversed(stdout.decode(errors="replace").splitlines()):
        if line.startswith(nonce + " "):
            try:
                got = json.loads(line[len(nonce) + 1 :])
            except ValueError:
                return None
            return got if isinstance(got, dict) else None
    return None
