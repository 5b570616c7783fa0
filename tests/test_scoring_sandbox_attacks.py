"""Attacks on the sandbox by the code it scores: forged verdicts score 0, floods stay bounded.

Each answer below defines no working ``add``; every test of ``add`` must fail, whatever the
answer does to the process it runs in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalkit.scoring import score
from evalkit.scoring.sandbox import Limits, run_job
from tests._processes import cmdline, descendants, survivors

from ._scoring_helpers import sample

TESTS = ["assert add(2, 3) == 5", "assert add(-1, 1) == 0"]

# Walk up the interpreter's frames to the harness and write its verdict line for it, with
# whatever secret (a nonce) and fd it holds; then spray a verdict on every other fd.
_FORGE = """
import json, os
def forge(frame):
    verdict = json.dumps({"passed": [True] * 2})
    while frame is not None:
        loc = dict(frame.f_locals)
        if isinstance(loc.get("nonce"), str) and isinstance(loc.get("out"), int):
            os.write(loc["out"], f"\\n{loc['nonce']} {verdict}\\n".encode())
            os._exit(0)
        frame = frame.f_back
    for fd in range(3, 64):
        try:
            os.write(fd, (verdict + "\\n").encode())
        except OSError:
            pass
    os._exit(0)
"""
FORGERIES = {
    "frames_via_sys_getframe": _FORGE + "import sys\nforge(sys._getframe())",
    "frames_via_a_traceback": _FORGE
    + "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    forge(e.__traceback__.tb_frame)",
    "patched_builtins": (
        "import builtins\n"
        "builtins.exec = lambda *a, **k: None\n"
        "builtins.compile = lambda *a, **k: None"
    ),
    "always_equal_result": (
        "class Anything:\n"
        "    def __eq__(self, other):\n"
        "        return True\n"
        "    __hash__ = object.__hash__\n"
        "def add(a, b):\n"
        "    return Anything()"
    ),
}


def test_an_answer_cannot_redefine_the_builtins_the_tests_use() -> None:
    # With the tests run in the answer's namespace, its own `len` and `isinstance` would
    # judge them.
    tests = ["assert len(pair(1, 2)) == 2", "assert isinstance(pair(1, 2), tuple)"]
    code = (
        "def len(x):\n    return 2\n"
        "def isinstance(x, t):\n    return True\n"
        "def pair(a, b):\n    return None"
    )
    assert score(sample("code_python", tests), f"```python\n{code}\n```").value == 0.0


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_forged_verdict_scores_zero(name: str) -> None:
    s = score(sample("code_python", TESTS), f"```python\n{FORGERIES[name]}\n```")
    assert s.value == 0.0, s


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_forgery_fails_even_without_the_audit_hook(name: str) -> None:
    job = {"kind": "python", "code": FORGERIES[name], "tests": TESTS, "audit_hook": False}
    got = run_job(job)
    assert got.result is None or not any(got.result["passed"]), got


FLOODS = {
    "sys_stdout_write": "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)",
    "os_write_fd1": "import os\nb = b'x' * 65536\nwhile True:\n    os.write(1, b)",
    "stderr_lines": "import sys\nwhile True:\n    print('y' * 100, file=sys.stderr)",
}

# A fresh process, so that its peak RSS is this run's alone; its address space is capped so
# that a sandbox which keeps everything fails here with MemoryError, not the machine.
_PROBE = """
import json, resource, sys
from evalkit.scoring.sandbox import Limits, run_job
def peak_mib():  # this process's own peak (ru_maxrss would include a forking parent's)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
job = {"kind": "python", "code": sys.argv[1], "tests": ["pass"]}
try:
    run = run_job(job, Limits(wall_s=5))
    out = {"result": run.result, "exceeded": getattr(run, "output_exceeded", None),
           "stdout": getattr(run, "stdout", "")[:10] + getattr(run, "stdout", "")[-10:],
           "dropped": getattr(run, "output_dropped", None)}
except MemoryError:
    out = {"error": "MemoryError"}
out["peak_mib"] = peak_mib()
print(json.dumps(out))
"""


@pytest.mark.parametrize("name", sorted(FLOODS))
def test_an_output_flood_is_stopped_with_the_scoring_process_memory_bounded(name: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, FLOODS[name]], capture_output=True, text=True, timeout=60
    )
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "error" not in got, got
    assert got["peak_mib"] < 200, got
    assert got["result"] is None and got["exceeded"] is True, got
    assert got["dropped"] > 0 and got["stdout"] in ("", "x" * 20), got


def test_a_flood_scores_zero_and_says_why() -> None:
    s = score(sample("code_python", TESTS), f"```python\n{FLOODS['os_write_fd1']}\n```")
    assert s.value == 0.0 and "output" in s.explanation, s


def test_output_below_the_limit_is_kept_whole() -> None:
    code = "print('hello')\ndef add(a, b):\n    return a + b"
    got = run_job({"kind": "python", "code": code, "tests": TESTS}, Limits())
    assert got.result == {"passed": [True, True]}
    assert got.stdout == "hello\n" and got.output_dropped == 0 and not got.output_exceeded


SOLUTIONS = {  # honest answers the judge must still score right through its proxies
    "a_class": (
        "class Stack:\n    def __init__(self):\n        self.items = []\n"
        "    def push(self, x):\n        self.items.append(x)\n"
        "    def pop(self):\n        return self.items.pop()\n"
        "    def __len__(self):\n        return len(self.items)",
        "s = Stack()\ns.push(1)\ns.push(2)\nassert s.pop() == 2 and len(s) == 1",
    ),
    "in_place": ("def srt(xs):\n    xs.sort()", "xs = [3, 1, 2]\nsrt(xs)\nassert xs == [1, 2, 3]"),
    "humaneval_check": (
        "def f(x):\n    return 2 * x",
        "def check(candidate):\n    assert candidate(2) == 4\ncheck(f)",
    ),
    "numpy_scalars": (
        "import numpy as np\ndef f(x):\n    return np.int64(x) + 1",
        "assert f(1) == 2 and np.array([f(2)]).sum() == 3",
    ),
    "containers": (
        "def f():\n    return (1, {2}, {'a': [b'x']}, 3j, None, 1.5)",
        "assert f() == (1, {2}, {'a': [b'x']}, 3j, None, 1.5)",
    ),
    "expected_exception": (
        "def f(x):\n    raise ValueError(x)",
        "try:\n    f(1)\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError",
    ),
    "callbacks": (
        "def apply(f, x):\n    return f(x)\n"
        "def double(x):\n    return 2 * x\n"
        "def sort_by(xs, key):\n    return sorted(xs, key=key)",
        "assert apply(lambda v: v + 1, 1) == 2\n"
        "assert apply(lambda v: double(v), 3) == 6\n"  # calls back into the answer
        "assert sort_by([3, 1, 2], key=lambda v: -v) == [3, 2, 1]\n"
        "seen = []\napply(seen.append, 5)\nassert seen == [5]",
    ),
    "big_integer": (
        "import math\ndef f(n):\n    return math.factorial(n)",
        "assert f(2000) % 10**9 == 0 and f(2000) == math.factorial(2000)",
    ),
    "module_of_the_answer": (
        "import math\ndef f(x):\n    return math.sqrt(x)",
        "assert math.isclose(f(2.0), 2 ** 0.5)",
    ),
}


@pytest.mark.parametrize("name", sorted(SOLUTIONS))
def test_honest_answers_pass_through_the_judge(name: str) -> None:
    code, test = SOLUTIONS[name]
    got = run_job({"kind": "python", "code": code, "tests": [test]})
    assert got.result == {"passed": [True]}, got


_SCORER = """
import sys
from evalkit.scoring.sandbox import Limits, run_job
print("started", flush=True)
run_job({"kind": "python", "code": sys.argv[1], "tests": ["pass"]}, Limits(wall_s=60))
"""


@pytest.mark.skipif(
    not Path(f"/proc/self/task/{os.getpid()}/children").exists(),
    reason="needs /proc/<pid>/task/<tid>/children to find the sandbox's processes",
)
def test_the_sandbox_dies_with_the_scoring_process() -> None:
    # An answer that sleeps uses no CPU time, so only the scorer's wall clock stops it;
    # when the scorer itself is killed, the answer must not live on.
    code = "import time\ntime.sleep(120)"
    scorer = subprocess.Popen(
        [sys.executable, "-c", _SCORER, code], stdout=subprocess.PIPE, text=True
    )
    assert scorer.stdout is not None and scorer.stdout.readline() == "started\n"
    for _ in range(100):  # until the answer's python is running
        sandbox = descendants(scorer.pid)
        if any(b"time.sleep" in cmdline(p) or b"_child.py" in cmdline(p) for p in sandbox):
            break
        time.sleep(0.1)
    time.sleep(1.0)
    sandbox = descendants(scorer.pid)
    assert sandbox
    scorer.kill()
    scorer.wait()
    assert survivors(sandbox) == []
