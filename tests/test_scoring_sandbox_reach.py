"""The judge is unreachable from the answer: no signal (kill, pidfd_send_signal), no pidfd,
no ptrace, even with the audit hook off (the OS layer alone)."""

from __future__ import annotations

import pytest

from evalkit.scoring.sandbox import run_job

# Each attempt records what happened; the tests then read the records.
_REACH = """
import ctypes, errno, os, signal
JUDGE = os.getppid()
GOT = {}
def attempt(name, fn):
    try:
        fn()
        GOT[name] = "done"
    except OSError as exc:
        GOT[name] = errno.errorcode.get(exc.errno, str(exc.errno))
attempt("pidfd_open", lambda: os.pidfd_open(JUDGE))
attempt("pidfd_send_signal", lambda: signal.pidfd_send_signal(os.pidfd_open(os.getpid()), 0))
attempt("kill", lambda: os.kill(JUDGE, signal.SIGTERM))
libc = ctypes.CDLL(None, use_errno=True)
def ptrace():
    if libc.ptrace(16, JUDGE, 0, 0) != 0:  # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), "ptrace")
attempt("ptrace", ptrace)
def add(a, b):
    return a + b
"""


@pytest.mark.parametrize("call", ["pidfd_open", "pidfd_send_signal", "kill", "ptrace"])
def test_the_answer_cannot_reach_the_judge(call: str) -> None:
    tests = [f"assert GOT[{call!r}] == 'EPERM'", "assert add(2, 3) == 5"]
    out = run_job({"kind": "python", "code": _REACH, "tests": tests, "audit_hook": False})
    assert out.result == {"passed": [True, True]}, out
