"""Runs INSIDE the sandbox process (never imported by evalkit): executes one job.

Started as ``python -I _sandbox_child.py`` in a temporary directory holding ``job.json``.
Reads a nonce from stdin, loads the job, installs an audit hook that refuses file access
outside the working directory (reads of the Python installation excepted), sockets,
subprocesses, forks, signals to other processes and ctypes, then runs the job and
prints ``<nonce> <json result>`` as its last line. The OS limits (rlimits, a non-root
user, no network namespace) are set by the parent; this hook is a second wall, not the
only one. It stops crude cheats (``os._exit(0)``, printing "passed"), not deliberate
introspection of this harness.
"""

import json
import os
import site
import sys

if len(sys.argv) > 1:  # inside the filesystem jail the job directory is /sandbox
    os.chdir(sys.argv[1])
sys.path[:] = [p for p in sys.path if p and not p.endswith(("scoring", "sandbox"))]
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


def _run_python(job):
    namespace = {"__name__": "__main__"}
    try:
        exec(compile(job["code"], "<solution>", "exec"), namespace)
    except BaseException as exc:  # SystemExit too: the solution may not end the run
        return {"passed": [False] * len(job["tests"]), "error": f"{type(exc).__name__}: {exc}"}
    passed = []
    for test in job["tests"]:
        try:
            exec(compile(test, "<test>", "exec"), dict(namespace))
            passed.append(True)
        except BaseException:
            passed.append(False)
    return {"passed": passed}


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


def main():
    nonce = sys.stdin.readline().strip()
    with open("job.json") as f:
        job = json.load(f)
    os.unlink("job.json")
    if os.path.exists("_child.py"):  # this file, copied in for the jail: already read
        os.unlink("_child.py")
    out = os.dup(1)
    if job["kind"] == "svg":
        import cairosvg  # noqa: F401  (imported before the hook: it reads its own files)
        import numpy  # noqa: F401
        import PIL.Image  # noqa: F401
    import ctypes  # noqa: F401  (its import opens libraries; later dlopen/calls are refused)

    if job.get("audit_hook", True):  # tests turn it off to prove the OS layers alone
        sys.addaudithook(_hook)
    result = _run_svg(job) if job["kind"] == "svg" else _run_python(job)
    sys.stdout.flush()
    os.write(out, f"\n{nonce} {json.dumps(result)}\n".encode())
    os._exit(0)


if __name__ == "__main__":
    main()
