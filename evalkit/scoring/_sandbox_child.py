"""Runs INSIDE the sandbox (never imported by evalkit): executes one job.

Started as ``python -I -B _sandbox_child.py WORKDIR VERDICT_FD`` in an empty temporary
directory, ahead of its job, which it then reads as JSON from stdin (no job file touches
the disk). Two processes, so that the code under test cannot forge a verdict:

- the judge (this process) never runs a line of the answer's code. It forks the solver
  before it reads the job, makes itself non-dumpable (a same-uid process can then
  neither ptrace it nor open its /proc/<pid>/mem or /proc/<pid>/fd), runs the tests
  itself and writes the verdict on VERDICT_FD, which only it holds;
- the solver closes VERDICT_FD, installs an audit hook (refusing files outside the
  working directory, sockets, subprocesses, forks, signals, ctypes), runs the answer's
  code and then serves the judge's calls. The tests see the answer's names through
  proxies (``_sandbox_judge.Remote``); what comes back is decoded into plain built-in
  values or opaque handles, so the solver decides what its functions return — which is
  what is tested — but not whether a test passed, and nothing in its memory (frames,
  gc, fds) can say otherwise. The OS layers (rlimits, a non-root uid, namespaces) are
  set by the parent; the hook is a second wall.
"""

import json
import os
import site
import sys

if len(sys.argv) > 1:  # inside the filesystem jail the job directory is /sandbox
    os.chdir(sys.argv[1])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _sandbox_judge  # beside this file; its folder leaves the path below
import _sandbox_link as link

sys.path[:] = [p for p in sys.path[1:] if p and not p.endswith(("scoring", "sandbox"))]
CWD = os.path.realpath(os.getcwd())
_READ_OK = tuple(
    {
        os.path.realpath(p) + os.sep
        for p in (
            sys.prefix,
            sys.base_prefix,
            sys.exec_prefix,
            sys.base_exec_prefix,
            *site.getsitepackages(),
        )
    }
)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_BLOCKED = (
    "socket.",
    "subprocess.",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "os.kill",
    "os.killpg",
    "os.setuid",
    "os.chroot",
    "ctypes.",
    "sys.remote_exec",
    "pty.",
    "resource.setrlimit",
)


# Native back doors around the events above: raw fork/exec, cffi. (ctypes is imported
# before the hook, so numpy works; its library loads and foreign calls are refused by the
# "ctypes." events.)
_BLOCKED_IMPORTS = {
    "_posixsubprocess",
    "_cffi_backend",
    "cffi",
    "_multiprocessing",
    "_socket",
    "socket",
}


def _inside(path, prefixes):
    return path == CWD or path.startswith(CWD + os.sep) or path.startswith(prefixes)


def _hook(event, args):
    if event == "open" and args and isinstance(args[0], (str, bytes)):
        path = os.path.realpath(os.fsdecode(args[0]))
        mode, flags = args[1] if len(args) > 1 else None, args[2] if len(args) > 2 else 0
        writing = bool((flags or 0) & _WRITE_FLAGS) or any(c in (mode or "") for c in "wax+")
        if not _inside(path, () if writing else _READ_OK):
            raise PermissionError(f"sandbox: access to {path} is not allowed")
    elif event in ("os.listdir", "os.scandir", "os.chdir") and args and args[0] is not None:
        if isinstance(args[0], (str, bytes)):
            path = os.path.realpath(os.fsdecode(args[0]))
            if not _inside(path, _READ_OK):
                raise PermissionError(f"sandbox: access to {path} is not allowed")
    elif event == "import" and args and str(args[0]).split(".")[0] in _BLOCKED_IMPORTS:
        raise PermissionError(f"sandbox: importing {args[0]} is not allowed")
    elif event.startswith(_BLOCKED):
        raise PermissionError(f"sandbox: {event} is not allowed")


def _solver(requests, replies, audit_hook, judge_pid):
    # The child side of the fork: nothing of the job is in memory yet, the verdict fd is
    # already closed. The answer's code arrives on the request pipe.
    import ctypes  # noqa: F401  (its import opens libraries; later dlopen/calls are refused)

    _prctl(1, 9, "PR_SET_PDEATHSIG, SIGKILL")  # it dies with the judge, even asleep
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # the job's pipe is the judge's alone
    sys.set_int_max_str_digits(sys.int_info.default_max_str_digits)
    if os.getppid() != judge_pid:  # the judge died before that took effect
        os._exit(1)
    _no_signals_no_ptrace()
    if audit_hook:
        sys.addaudithook(_hook)
    link.serve(os.fdopen(requests, "rb"), os.fdopen(replies, "wb"))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _run_python(job, judge):
    try:
        names = judge.load(job["code"])
    except BaseException as exc:  # the answer failed to load (or its process ended)
        return {"passed": [False] * len(job["tests"]), "error": link.describe(exc)}
    passed, errors = [], []
    for test in job["tests"]:
        try:
            exec(compile(test, "<test>", "exec"), {"__name__": "__main__", **names})
            passed.append(True)
        except BaseException as exc:
            passed.append(False)
            errors.append(link.describe(exc))
    result = {"passed": passed}
    if errors:
        result["error"] = errors[0]
    return result


def _run_svg(job):
    import io

    import cairosvg
    import numpy as np
    from PIL import Image

    size = int(job.get("size", 128))

    def render(svg):
        png = cairosvg.svg2png(
            bytestring=svg.encode(), output_width=size, output_height=size, unsafe=False
        )
        img = Image.open(io.BytesIO(png)).convert("RGBA")
        white = Image.new("RGBA", img.size, (255, 255, 255, 255))
        return np.asarray(Image.alpha_composite(white, img).convert("RGB"), dtype=np.float32)

    ref = render(job["reference"])
    try:
        cand = render(job["candidate"])
    except Exception as exc:
        return {"similarity": 0.0, "error": f"candidate does not render: {exc}"}
    blank = np.full_like(ref, 255.0)
    # 1 - MAE normalised by how far the reference is from a blank canvas: a blank
    # answer scores 0, an identical rendering 1.
    base = float(np.abs(blank - ref).mean())
    mae = float(np.abs(cand - ref).mean())
    if base == 0:
        return {"similarity": 1.0 if mae == 0 else 0.0, "mae": mae}
    return {"similarity": max(0.0, 1.0 - mae / base), "mae": mae}


def _prctl(option, value, what):
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({what}) failed")


# Syscalls that reach another process: signals (kill, tkill, tgkill, rt_(tg)sigqueueinfo),
# pidfds (pidfd_open, pidfd_send_signal, pidfd_getfd), ptrace and process_vm_readv/writev,
# by architecture (the audit arch of seccomp_data, then the numbers).
_REACHING = {
    0xC000003E: (62, 200, 234, 129, 297, 434, 424, 438, 101, 310, 311),  # x86_64
    0xC00000B7: (129, 130, 131, 138, 240, 434, 424, 438, 117, 270, 271),  # aarch64
}
_NATIVE_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}


def _no_signals_no_ptrace():
    # A seccomp filter on the solver: the calls above fail with EPERM, so the answer can
    # neither signal nor trace the judge (nor anything else), whatever it reaches (pidfds
    # and signal.pidfd_send_signal have no audit event; ctypes is allowed without the
    # hook). Another arch's calls (int 0x80, x32 numbers) fail altogether. Installed after
    # PR_SET_NO_NEW_PRIVS, so no privilege is needed; fails closed where it cannot be.
    import ctypes
    import platform

    arch = _NATIVE_ARCH.get(platform.machine())
    if arch is None:
        return  # numbers unknown here: the other layers remain
    nrs = _REACHING[arch]

    class Insn(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte),
                    ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]  # fmt: skip

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Insn))]

    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO|EPERM
    n = len(nrs)
    code = [(ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, deny), (ld, 0, 0, 0)]
    code.append((jge, n + 1, 0, 0x40000000))  # x32 numbers on x86_64
    code += [(jeq, n - i, 0, nr) for i, nr in enumerate(nrs)]
    code += [(ret, 0, 0, allow), (ret, 0, 0, deny)]
    insns = (Insn * len(code))(*[Insn(*c) for c in code])
    prog = Prog(len(code), insns)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:
        os._exit(1)  # PR_SET_NO_NEW_PRIVS / PR_SET_SECCOMP refused: the answer does not run


def _not_dumpable():
    # PR_SET_DUMPABLE 0: only CAP_SYS_PTRACE may then attach to, or read the memory and fds
    # of, this process; the solver runs as the same uid without capabilities.
    _prctl(4, 0, "PR_SET_DUMPABLE, 0")


def _reap(pid, wait_s=1.0):
    # On EOF the solver flushes what the answer printed and exits; give it a moment, as
    # the judge's exit ends the PID namespace and with it the solver, unflushed or not.
    import time

    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        if os.waitpid(pid, os.WNOHANG)[0]:
            return
        time.sleep(0.005)


def main():
    verdict_fd = int(sys.argv[2])
    # The judge reads the answers' big integers as JSON digits: no digit limit for it. The
    # answer runs under the stock interpreter's limit (the solver restores it), as under an
    # official harness; the link lifts it only around its own messages (_sandbox_link).
    sys.set_int_max_str_digits(0)
    to_solver, from_judge = os.pipe()
    from_solver, to_judge = os.pipe()
    audit_hook = "no-audit-hook" not in sys.argv[3:]  # tests prove the OS layers alone
    judge_pid = os.getpid()
    solver = os.fork()
    if solver == 0:
        for fd in (verdict_fd, from_judge, from_solver):
            os.close(fd)
        _solver(to_solver, to_judge, audit_hook, judge_pid)
    os.close(to_solver)
    os.close(to_judge)
    _not_dumpable()
    job = json.loads(sys.stdin.buffer.read())  # waits here until the job is handed over
    if os.path.exists("_child.py"):  # the harness, copied in for the jail: already read
        os.unlink("_child.py")
        os.unlink("_sandbox_link.py")
        os.unlink("_sandbox_judge.py")
    if job["kind"] == "svg":
        import cairosvg  # noqa: F401  (imported before the hook: it reads its own files)
        import numpy  # noqa: F401
        import PIL.Image  # noqa: F401
    if audit_hook:
        sys.addaudithook(_hook)
    judge = _sandbox_judge.Judge(os.fdopen(from_judge, "wb"), os.fdopen(from_solver, "rb"))
    result = _run_svg(job) if job["kind"] == "svg" else _run_python(job, judge)
    judge.close()
    _reap(solver)
    sys.stdout.flush()
    with os.fdopen(verdict_fd, "w") as out:
        out.write(json.dumps(result))
    os._exit(0)


if __name__ == "__main__":
    main()
