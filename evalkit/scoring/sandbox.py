"""Run untrusted code (model-written Python, SVG to render) in a locked-down process.

Layers, outermost first:
- a new network namespace (no interfaces up: every socket fails) and a new PID namespace
  (when the sandbox's first process dies the kernel kills everything it started, even
  processes that left the process group), via util-linux ``unshare`` when running as root;
- a filesystem jail (a new mount namespace, chroot into a tmpfs root holding read-only
  binds of /usr and the Python installation, and the job directory at /sandbox): the rest
  of the machine — /etc/passwd, /home, this repository — is not there at all;
- privileges dropped to an unprivileged uid/gid of its own (``setpriv``; a fresh number
  from ``SANDBOX_UIDS`` per run, with no account and no files) so that RLIMIT_NPROC is
  enforced — the kernel does not apply it to root — and counts only this run's processes
  (with a shared uid such as ``nobody``, parallel runs would exhaust each other's limit);
- rlimits: CPU seconds, address space, file size, process count, open files;
- a wall-clock limit: the whole process group is killed with SIGKILL;
- an empty environment and a fresh temporary working directory, removed afterwards;
- inside, an audit hook (``_sandbox_child.py``) refusing files outside that directory,
  sockets, subprocesses and ctypes.
``isolation()`` says which layers are available on this machine; without root (or
without util-linux) only the rlimits, the wall clock, the empty environment, the temporary
directory and the audit hook remain, and ``RunResult.isolation`` records that.
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
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

_CHILD = Path(__file__).with_name("_sandbox_child.py")
SANDBOX_UIDS = range(0x60000, 0x60000 + 0x10000)  # no accounts live there
_uid_lock = threading.Lock()
_uid_next = [os.getpid() * 97]


def _sandbox_uid() -> int:
    # Distinct per run within a process; other processes start elsewhere in the range.
    with _uid_lock:
        _uid_next[0] += 1
        return SANDBOX_UIDS[_uid_next[0] % len(SANDBOX_UIDS)]


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
        layers.append("drop_privileges")
    if os.geteuid() == 0 and shutil.which("unshare"):
        probe = subprocess.run(
            ["unshare", "--net", "--pid", "--fork", "--kill-child", "true"],
            capture_output=True,
            timeout=10,
        )
        if probe.returncode == 0:
            layers += ["net_namespace", "pid_namespace"]
            if shutil.which("mount") and shutil.which("chroot") and _probe_jail():
                layers.append("filesystem_jail")
    return tuple(layers)


# Runs as root inside the new mount namespace (private propagation: nothing here is seen
# outside it). It builds a root on a tmpfs with read-only binds of what Python needs and
# the job directory at /sandbox, then chroots. The tmpfs and every bind vanish with the
# namespace, so the host side only ever has to rmdir one empty directory.
_JAIL = r"""
set -e
root=$1; work=$2; shift 2
mount -t tmpfs -o size=8m,mode=755 evalkit-jail "$root"
while [ "$1" != "--" ]; do
  p=$1; shift
  if [ -L "$p" ]; then
    mkdir -p "$root$(dirname "$p")"; ln -sfn "$(readlink "$p")" "$root$p"
  elif [ -d "$p" ]; then
    mkdir -p "$root$p"; mount --rbind "$p" "$root$p"; mount -o remount,bind,ro "$root$p"
  elif [ -f "$p" ]; then
    mkdir -p "$root$(dirname "$p")"; : > "$root$p"; mount --bind "$p" "$root$p"
    mount -o remount,bind,ro "$root$p"
  fi
done
shift
mkdir -p "$root/sandbox" "$root/dev" "$root/proc" "$root/tmp"
for d in null zero urandom random; do
  : > "$root/dev/$d"; mount --bind "/dev/$d" "$root/dev/$d"
done
mount --bind "$work" "$root/sandbox"
mount -t proc proc "$root/proc"
exec chroot "$root" "$@"
"""


def _jail_paths() -> list[str]:
    # System libraries, the Python installation(s) and what cairo/fontconfig read.
    wanted = ["/usr", "/bin", "/lib", "/lib32", "/lib64", "/sbin", "/etc/ld.so.cache",
              "/etc/fonts", "/etc/alternatives"]  # fmt: skip
    for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        wanted.append(p)
        real = os.path.realpath(p)
        if real != p:
            wanted.append(real)
    exe = os.path.realpath(sys.executable)
    wanted.append(os.path.dirname(exe))
    out: list[str] = []
    for p in wanted:  # parents first, and nothing inside a directory bound already
        if os.path.lexists(p) and not any(p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return out


def _jail_prefix(root: Path, workdir: Path) -> list[str]:
    return ["sh", "-c", _JAIL, "jail", str(root), str(workdir), *_jail_paths(), "--"]


def _probe_jail() -> bool:
    root = Path(tempfile.mkdtemp(prefix="evalkit-jail-"))
    work = Path(tempfile.mkdtemp(prefix="evalkit-jail-work-"))
    try:
        cmd = ["unshare", "--mount", "--pid", "--fork", "--kill-child", "--"]
        cmd += [*_jail_prefix(root, work), sys.executable, "-I", "-c", "pass"]
        return subprocess.run(cmd, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        _remove_jail(root)
        shutil.rmtree(work, ignore_errors=True)


def _remove_jail(root: Path) -> None:
    # Never recursive: if anything were still mounted there, rmdir fails and we leave it.
    with contextlib.suppress(OSError):
        os.rmdir(root)


def _command(
    layers: tuple[str, ...], limits: Limits, workdir: Path, jail: Path | None, uid: int
) -> list[str]:
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
        cmd += ["unshare", "--net", "--pid", "--fork", "--kill-child"]
        cmd += ["--mount", "--"] if jail is not None else ["--"]
    if jail is not None:
        cmd += _jail_prefix(jail, workdir)
    if "drop_privileges" in layers:
        cmd += [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--no-new-privs",
            "--",
        ]
    if jail is not None:  # the harness was copied into the job directory, /sandbox inside
        return [*cmd, sys.executable, "-I", "-B", "/sandbox/_child.py", "/sandbox"]
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
    jail = Path(tempfile.mkdtemp(prefix="evalkit-jail-")) if "filesystem_jail" in layers else None
    nonce = secrets.token_hex(16)
    start = time.monotonic()
    try:
        (workdir / "job.json").write_text(json.dumps(job))
        if jail is not None:
            shutil.copyfile(_CHILD, workdir / "_child.py")
        uid = _sandbox_uid()
        if "drop_privileges" in layers:
            os.chown(workdir, uid, uid)
            for f in workdir.iterdir():
                os.chown(f, uid, uid)
        os.chmod(workdir, 0o700)
        proc = subprocess.Popen(
            _command(layers, limits, workdir, jail, uid),
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
        if jail is not None:
            _remove_jail(jail)


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
