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
- a wall-clock limit: the whole process group is killed with SIGKILL; and a parent-death
  signal (``setpriv --pdeathsig``): if the scoring process dies, the sandbox dies too;
- an empty environment and a fresh working directory: in the jail a tmpfs of its own,
  capped at ``Limits.disk_mb`` in total (the per-file rlimit alone let an answer write
  40 x 16 MB to the host's /tmp), which vanishes with the namespace on every exit path;
  outside the jail a temporary directory on the host, removed afterwards;
- output read through bounded buffers (``sandbox_io``): the first and last 4 KiB of
  stdout and stderr are kept, the rest counted, and past ``Limits.output_bytes`` the run
  is killed, so the scoring process's memory does not depend on what the answer prints;
- inside, two processes (``_sandbox_child.py``): a solver that runs the answer's code
  under an audit hook (refusing files outside the directory, sockets, subprocesses,
  ctypes), and a judge that never runs it, evaluates the tests against the solver's
  answers (plain data only) and alone holds the pipe the verdict comes back on.
``isolation()`` says which layers are available on this machine; without root (or
without util-linux) only the rlimits, the wall clock, the empty environment, the temporary
directory, the judge/solver split and the audit hook remain, and ``RunResult.isolation``
records that.

Why not bubblewrap (``bwrap``): run as root it gives the same namespaces and read-only
binds in one command, but not a per-run unprivileged uid outside a user namespace (its
``--uid`` needs ``--unshare-user``, whose uid maps back to root for RLIMIT_NPROC), so
``setpriv`` would stay; and the util-linux path must stay for machines without it. Using
it would add a second way to build the same jail, not replace ours.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from evalkit.scoring.sandbox_io import collect, stop

_CHILD = Path(__file__).with_name("_sandbox_child.py")
_HARNESS = [Path(__file__).with_name(f"_sandbox_{m}.py") for m in ("link", "judge")]
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
    disk_mb: int = 64  # all files together: the jail's working folder is a tmpfs this big
    processes: int = 16
    open_files: int = 64
    output_bytes: int = 1 << 20  # stdout + stderr; past this the run is killed


@dataclass
class RunResult:
    """What came back from a sandboxed run: the job's result, or why there is none."""

    result: dict[str, Any] | None
    returncode: int | None
    timed_out: bool
    wall_s: float
    stderr: str = ""
    isolation: list[str] = field(default_factory=list)
    stdout: str = ""
    output_total: int = 0  # bytes written to stdout + stderr (as far as they were read)
    output_dropped: int = 0  # of those, bytes not kept (only the start and end are)
    output_exceeded: bool = False  # killed for writing more than Limits.output_bytes


@lru_cache(maxsize=1)
def isolation() -> tuple[str, ...]:
    """The isolation layers this machine supports (checked once, by trying them)."""
    layers = ["rlimits", "wall_clock_kill", "empty_env", "temp_cwd", "audit_hook"]
    if os.name != "posix":
        return tuple(layers)
    if shutil.which("prlimit"):
        layers.append("prlimit")
    if shutil.which("setpriv") and _works(["setpriv", "--pdeathsig", "KILL", "--", "true"]):
        layers.append("parent_death_signal")
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
root=$1; work=$2; disk=$3; owner=$4; shift 4
mount -t tmpfs -o size=8m,mode=755 evalkit-jail "$root"
while [ "$1" != "--" ]; do
  p=$1; shift
  case $1 in  # what p is, as the host side found it (a link also gives its target)
    link) mkdir -p "$root${p%/*}"; ln -sfn "$2" "$root$p"; shift 2 ;;
    dir) mkdir -p "$root$p"; mount --rbind -o ro "$p" "$root$p"; shift ;;
    file) mkdir -p "$root${p%/*}"; : > "$root$p"; mount --bind -o ro "$p" "$root$p"; shift ;;
  esac
done
shift
mkdir -p "$root/sandbox" "$root/dev" "$root/proc" "$root/tmp"
for d in null zero urandom random; do
  : > "$root/dev/$d"; mount --bind "/dev/$d" "$root/dev/$d"
done
# the answer's working folder: a tmpfs of its own, capped in total (not the host's /tmp),
# gone with the namespace on every exit path; the job's files are copied in
mount -t tmpfs -o "size=${disk}m,mode=700,uid=$owner,gid=$owner" evalkit-work "$root/sandbox"
cp -a "$work"/. "$root/sandbox"/
mount -t proc proc "$root/proc"
exec chroot "$root" "$@"
"""


def _works(cmd: list[str]) -> bool:
    try:
        return subprocess.run(cmd, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


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


def _jail_entries() -> list[str]:
    # (path, kind[, link target]) for the script: read here, once per job, so that the
    # jail's shell runs no `readlink`/`dirname` and binds read-only in one `mount` each
    # (util-linux >= 2.27 remounts a --bind with -o ro itself): half the processes the
    # jail used to start, ~20% of a short job's time.
    out: list[str] = []
    for p in _jail_paths():
        if os.path.islink(p):
            out += [p, "link", os.readlink(p)]
        elif os.path.isdir(p):
            out += [p, "dir"]
        elif os.path.isfile(p):
            out += [p, "file"]
    return out


def _jail_prefix(root: Path, workdir: Path, disk_mb: int = 64, owner: int = 0) -> list[str]:
    args = [str(root), str(workdir), str(disk_mb), str(owner)]
    return ["sh", "-c", _JAIL, "jail", *args, *_jail_entries(), "--"]


def _probe_jail() -> bool:
    root = Path(tempfile.mkdtemp(prefix=f"evalkit-jail-{os.getpid()}-"))
    work = Path(tempfile.mkdtemp(prefix=f"evalkit-jail-work-{os.getpid()}-"))
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
    layers: tuple[str, ...],
    limits: Limits,
    workdir: Path,
    jail: Path | None,
    uid: int,
    args: list[str],
) -> list[str]:
    cmd: list[str] = []
    if "parent_death_signal" in layers:
        # Killed with the scoring thread that started it: an answer that sleeps uses no
        # CPU time, and the wall clock dies with the scorer. Kept across the execs below;
        # unshare --kill-child passes it on to the namespace, which takes the rest with it.
        cmd += ["setpriv", "--pdeathsig", "KILL", "--"]
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
        owner = uid if "drop_privileges" in layers else 0
        cmd += _jail_prefix(jail, workdir, limits.disk_mb, owner)
    if "drop_privileges" in layers:
        cmd += [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--no-new-privs",
            # A new uid clears the parent-death signal unshare --kill-child had set.
            *(["--pdeathsig", "KILL"] if "parent_death_signal" in layers else []),
            "--",
        ]
    if jail is not None:  # the harness was copied into the job directory, /sandbox inside
        return [*cmd, sys.executable, "-I", "-B", "/sandbox/_child.py", "/sandbox", *args]
    return [*cmd, sys.executable, "-I", "-B", str(_CHILD), ".", *args]


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
    """Run one job (``{"kind": "python", "code", "tests"}`` or ``{"kind": "svg", ...}``).

    It goes to a sandbox started ahead for these limits where one is waiting (see
    ``_Spares``), else to one started now; either way, one sandbox per job.
    """
    limits = limits or Limits()
    audit_hook = bool(job.get("audit_hook", True))
    payload = json.dumps(job).encode()
    key = (limits, audit_hook)
    spare = _spares.take(key)
    ran = _run(spare, payload, limits) if spare is not None else None
    if ran is None:  # none was waiting, or it died before it took the job
        ran = _run(_start(limits, audit_hook), payload, limits)
    _spares.refill(key)
    return ran or _not_started()


@dataclass
class _Started:
    """A sandbox whose judge is up and waiting for its job on stdin."""

    proc: subprocess.Popen[bytes]
    verdict_r: int
    workdir: Path
    jail: Path | None
    layers: tuple[str, ...]

    def discard(self) -> None:
        """Kill it and remove its folders (it ran a job, or never will)."""
        stop(self.proc)
        with contextlib.suppress(OSError):
            os.close(self.verdict_r)
        shutil.rmtree(self.workdir, ignore_errors=True)
        if self.jail is not None:
            _remove_jail(self.jail)


def _start(limits: Limits, audit_hook: bool) -> _Started:
    """Start a sandbox for ``limits``; its judge waits for the job on stdin."""
    layers = isolation()
    pid = os.getpid()  # folders named by the process they serve
    workdir = Path(tempfile.mkdtemp(prefix=f"evalkit-sandbox-{pid}-"))
    jail = None
    if "filesystem_jail" in layers:
        jail = Path(tempfile.mkdtemp(prefix=f"evalkit-jail-{pid}-"))
    # The verdict comes back on a pipe of its own that only the judge process holds (see
    # _sandbox_child.py); stdout and stderr are the answer's, read through bounded buffers.
    verdict_r, verdict_w = os.pipe()
    try:
        if jail is not None:
            shutil.copyfile(_CHILD, workdir / "_child.py")
            for f in _HARNESS:
                shutil.copyfile(f, workdir / f.name)
        uid = _sandbox_uid()
        if "drop_privileges" in layers:
            os.chown(workdir, uid, uid)
            for f in workdir.iterdir():
                os.chown(f, uid, uid)
        os.chmod(workdir, 0o700)
        args = [str(verdict_w)] + ([] if audit_hook else ["no-audit-hook"])
        proc = subprocess.Popen(
            _command(layers, limits, workdir, jail, uid, args),
            cwd=workdir,
            env={},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(verdict_w,),
            start_new_session=True,  # its own process group, killed as one
            preexec_fn=None if "prlimit" in layers else _set_limits(limits),
        )
    except BaseException:
        os.close(verdict_r)
        shutil.rmtree(workdir, ignore_errors=True)
        if jail is not None:
            _remove_jail(jail)
        raise
    finally:
        os.close(verdict_w)
    return _Started(proc, verdict_r, workdir, jail, layers)


def _run(sandbox: _Started, job: bytes, limits: Limits) -> RunResult | None:
    """Hand ``job`` to ``sandbox`` and read what comes back; None when it died before it
    took the job (nothing of the job ran: the caller starts another)."""
    start = time.monotonic()
    try:
        got = collect(
            sandbox.proc, sandbox.verdict_r, start + limits.wall_s, limits.output_bytes, job
        )
    finally:
        sandbox.discard()
    if got.fed < len(job) and got.verdict.total == 0:
        return None
    return RunResult(
        result=None if got.exceeded else got.verdict_dict(),
        returncode=sandbox.proc.returncode,
        timed_out=got.timed_out,
        wall_s=time.monotonic() - start,
        stderr=got.err.text(),
        isolation=list(sandbox.layers),
        stdout=got.out.text(),
        output_total=got.out.total + got.err.total,
        output_dropped=got.out.dropped + got.err.dropped,
        output_exceeded=got.exceeded,
    )


def _not_started() -> RunResult:
    return RunResult(None, None, False, 0.0, "the sandbox died before it took the job")


_Key = tuple[Limits, bool]


class _Spares:
    """Sandboxes started ahead of their jobs, ``DEPTH`` per (limits, audit hook), for the
    ``KEEP`` most recently used.

    Of a short job's ~90 ms, nearly all is the start (processes, namespaces, the jail's
    mounts, the judge's interpreter), and none of it depends on the job: after each job the
    next ones are started in the background, and their judges wait in ``read(stdin)``. Each
    is an ordinary sandbox used once. They are started from one thread that lives as long
    as the process, because the parent-death signal that kills a sandbox with its scorer
    follows the thread that started it. A forked child starts with none (see
    ``os.register_at_fork`` below); :func:`close_spares` (and the process's exit) kills
    those waiting.
    """

    DEPTH = 2
    KEEP = 4

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: OrderedDict[_Key, list[_Started]] = OrderedDict()
        self._starting: dict[_Key, int] = {}
        self._wanted: queue.SimpleQueue[tuple[int, _Key]] = queue.SimpleQueue()
        self._generation = 0  # bumped by close: starts asked for before it are discarded
        self._busy = 0  # starts under way (the thread's, 0 or 1)
        self._idle = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None

    def take(self, key: _Key) -> _Started | None:
        """A waiting sandbox for ``key`` that is still alive, if there is one."""
        dead: list[_Started] = []
        found = None
        with self._lock:
            waiting = self._ready.get(key, [])
            while waiting and found is None:
                sandbox = waiting.pop(0)
                if sandbox.proc.poll() is None:
                    found = sandbox
                else:
                    dead.append(sandbox)
        for sandbox in dead:
            sandbox.discard()
        return found

    def refill(self, key: _Key) -> None:
        """Ask for sandboxes for ``key`` up to ``DEPTH``; forget the least recently used
        set past ``KEEP``."""
        dropped: list[_Started] = []
        with self._lock:
            waiting = self._ready.setdefault(key, [])
            self._ready.move_to_end(key)
            for _ in range(self.DEPTH - len(waiting) - self._starting.get(key, 0)):
                self._starting[key] = self._starting.get(key, 0) + 1
                self._wanted.put((self._generation, key))
            while len(self._ready) > self.KEEP:
                _, old = self._ready.popitem(last=False)
                dropped += old
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="evalkit-sandbox-spares", daemon=True
                )
                self._thread.start()
        for sandbox in dropped:
            sandbox.discard()

    def _serve(self) -> None:
        while True:
            generation, key = self._wanted.get()
            with self._lock:
                if generation != self._generation:
                    continue  # asked for before a close
                self._busy += 1
            sandbox = None
            with contextlib.suppress(Exception):  # a failed start: the job starts its own
                sandbox = _start(*key)
            with self._lock:
                if generation == self._generation:
                    self._starting[key] -= 1
                    if sandbox is not None and key in self._ready:
                        self._ready[key].append(sandbox)
                        sandbox = None
            if sandbox is not None:  # closed or forgotten meanwhile
                sandbox.discard()
            with self._idle:
                self._busy -= 1
                self._idle.notify_all()

    def close(self, wait_s: float = 10.0) -> None:
        """Kill every waiting sandbox, and the one being started (once it is up)."""
        with self._lock:
            self._generation += 1
            self._starting.clear()
            waiting = [s for group in self._ready.values() for s in group]
            self._ready.clear()
        for sandbox in waiting:
            sandbox.discard()
        with self._idle:
            self._idle.wait_for(lambda: self._busy == 0, wait_s)


_spares = _Spares()


def close_spares() -> None:
    """Kill the sandboxes this process started ahead of their jobs (it keeps working: the
    next job starts its own, and new ones are started after it)."""
    _spares.close()


def remove_sandbox_folders(pid: int) -> None:
    """Remove the host folders of the sandboxes process ``pid`` started, once it is known
    to be dead (a child of the caller's, reaped): one killed with SIGKILL ran no cleanup,
    and the sandboxes it started ahead died with it (parent-death signal), folders left.
    Never for another process's pid: in a container sharing /tmp, "not running here" is
    not "dead"."""
    tmp = Path(tempfile.gettempdir())
    for folder in [*tmp.glob(f"evalkit-sandbox-{pid}-*"), *tmp.glob(f"evalkit-jail-{pid}-*")]:
        if folder.name.startswith("evalkit-jail-"):
            _remove_jail(folder)  # an empty mount point (rmdir only, never recursive)
        else:
            shutil.rmtree(folder, ignore_errors=True)


def _forget_in_child() -> None:
    # A forked child must not hand its jobs to its parent's sandboxes (nor kill them), and
    # must not wait on a lock the parent's threads held at the fork.
    global _spares, _uid_lock
    _spares = _Spares()
    _uid_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)
atexit.register(close_spares)
