"""The code sandbox and the code scorers: hostile snippets score 0 and harm nothing."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from evalkit.scoring import code as code_rules
from evalkit.scoring import sandbox, score
from evalkit.scoring.sandbox import SANDBOX_UIDS, Limits, isolation, run_job

from ._scoring_helpers import sample

TESTS = ["assert add(2, 3) == 5", "assert add(-1, 1) == 0"]
GOOD = "```python\ndef add(a, b):\n    return a + b\n```"

HOSTILE = {
    "fork_bomb": (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    ),
    "infinite_loop": "while True:\n    pass",
    "memory_hog": "x = bytearray(8 << 30)\nx[::4096] = b'1' * len(x[::4096])",
    "read_passwd": "data = open('/etc/passwd').read()\ndef add(a, b):\n    return len(data)",
    "socket": "import socket\ns = socket.create_connection(('127.0.0.1', 22), timeout=1)",
    "exit_early": "import os\nos._exit(0)",
    "fake_verdict": "print('passed [true, true]')\nraise SystemExit(0)",
    "subprocess": "import subprocess\nsubprocess.run(['sh', '-c', 'echo hi'])",
    "raw_fork_exec": "import _posixsubprocess",
    "ctypes_libc": "import ctypes\nctypes.CDLL(None).system(b'echo hi')",
}


# The uids this test process's runs are given (sandbox._sandbox_uid hands them out in
# order from here): sandboxes run at the same time by other processes use other uids.
_FIRST = sandbox._uid_next[0] + 1


def _leftovers() -> list[str]:
    """Processes of this test's sandbox uids still present (a zombie gets a moment), once
    the sandboxes started ahead of their jobs are closed."""
    sandbox.close_spares()
    mine = {SANDBOX_UIDS[k % len(SANDBOX_UIDS)] for k in range(_FIRST, sandbox._uid_next[0] + 1)}
    for _ in range(20):
        out = subprocess.run(["ps", "-eo", "uid,pid,stat,args"], capture_output=True, text=True)
        lines = out.stdout.splitlines()[1:]
        left = [line for line in lines if int(line.split()[0]) in mine]
        if not left:
            return []
        time.sleep(0.1)
    return left


def test_the_correct_solution_passes_every_test() -> None:
    s = score(sample("code_python", TESTS), GOOD)
    assert s.value == 1.0 and s.metadata["format"] == 1.0


def test_a_wrong_solution_scores_the_share_of_tests_passed() -> None:
    wrong = "```python\ndef add(a, b):\n    return a + b if a > 0 else 99\n```"
    assert score(sample("code_python", TESTS), wrong).value == 0.5


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_code_scores_zero_and_harms_nothing(name: str) -> None:
    s = score(sample("code_python", TESTS), f"```python\n{HOSTILE[name]}\n```")
    assert s.value == 0.0, s
    assert _leftovers() == []
    assert Path("/etc/passwd").exists()


def test_the_os_layers_hold_without_the_audit_hook() -> None:
    # The in-process audit hook is only the inner wall: turn it off and the OS limits
    # (process count as a non-root uid, CPU time, wall clock, network namespace) must hold.
    limits = Limits(cpu_s=2, wall_s=5)
    bomb = run_job(
        {"kind": "python", "code": HOSTILE["fork_bomb"], "tests": [], "audit_hook": False}, limits
    )
    assert bomb.result is None
    assert _leftovers() == []
    net = run_job(
        {"kind": "python", "code": HOSTILE["socket"], "tests": ["pass"], "audit_hook": False},
        limits,
    )
    if "net_namespace" in isolation():
        assert net.result is not None and net.result["passed"] == [False]
        assert (
            "unreachable" in net.result["error"].lower() or "refused" in net.result["error"].lower()
        )
    mem = run_job(
        {"kind": "python", "code": HOSTILE["memory_hog"], "tests": ["pass"], "audit_hook": False},
        limits,
    )
    assert mem.result is None or mem.result["passed"] == [False]


@pytest.mark.skipif(os.geteuid() != 0, reason="privileges are only dropped when root")
def test_files_outside_the_job_are_out_of_reach_even_without_the_audit_hook() -> None:
    # As an unprivileged uid, root-only files are unreadable; inside the filesystem jail,
    # world-readable files (/etc/passwd, this repository) are not there at all.
    paths = ["/etc/shadow"]
    if "filesystem_jail" in isolation():
        paths += ["/etc/passwd", str(Path(__file__).resolve())]
    for path in paths:
        code = f"open({path!r}).read()"
        got = run_job({"kind": "python", "code": code, "tests": ["pass"], "audit_hook": False})
        assert got.result is not None and got.result["passed"] == [False], path
        assert "Error" in got.result["error"], path


def test_the_jail_is_read_only_outside_the_job_directory() -> None:
    if "filesystem_jail" not in isolation():
        pytest.skip("no filesystem jail on this machine")
    code = "open('/usr/evalkit-was-here', 'w')"
    got = run_job({"kind": "python", "code": code, "tests": ["pass"], "audit_hook": False})
    assert got.result is not None and got.result["passed"] == [False]
    assert not Path("/usr/evalkit-was-here").exists()


def test_every_host_path_in_the_jail_is_mounted_read_only() -> None:
    # the answer runs unprivileged (it could not write /usr anyway): read-only binds are
    # the second wall, checked from inside in the jail's own mount table
    if "filesystem_jail" not in isolation():
        pytest.skip("no filesystem jail on this machine")
    code = "mounts = {m[4]: m[5].split(',') for m in map(str.split, open('/proc/self/mountinfo'))}"
    test = (
        "own = {'/', '/sandbox', '/proc'}\n"
        "host = [p for p in mounts if p not in own and not p.startswith('/dev/')]\n"
        "assert '/usr' in host and all('ro' in mounts[p] for p in host), mounts"
    )
    got = run_job({"kind": "python", "code": code, "tests": [test], "audit_hook": False})
    assert got.result == {"passed": [True]}, (got.result, got.stderr[-500:])


def test_the_sandbox_starts_from_an_empty_environment_in_a_fresh_directory() -> None:
    os.environ["EVALKIT_SECRET_FOR_TEST"] = "x"
    code = "import os\nenv = dict(os.environ)\nhere = os.listdir('.')"
    tests = ["assert 'EVALKIT_SECRET_FOR_TEST' not in env", "assert here == []"]
    got = run_job({"kind": "python", "code": code, "tests": tests})
    assert got.result == {"passed": [True, True]}


def test_sockets_fail_inside_the_network_namespace() -> None:
    if "net_namespace" not in isolation():
        pytest.skip("no network namespace on this machine")
    with socket.socket() as server:  # a real listener on the host's loopback
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)"
        got = run_job({"kind": "python", "code": code, "tests": ["pass"], "audit_hook": False})
    assert got.result is not None and got.result["passed"] == [False]


SVG_OPEN = '<svg xmlns="http://www.w3.org/2000/svg" width="100" height="100">'
SQUARE = SVG_OPEN + '<rect x="10" y="10" width="50" height="50" fill="red"/></svg>'


def test_svg_identical_rendering_scores_one_and_blank_scores_zero() -> None:
    pytest.importorskip("cairosvg")
    s = sample("code_svg", SQUARE)
    assert score(s, f"```svg\n{SQUARE}\n```").value == pytest.approx(1.0)
    blank = '<svg xmlns="http://www.w3.org/2000/svg" width="100" height="100"></svg>'
    assert score(s, blank).value == pytest.approx(0.0)
    moved = SQUARE.replace('x="10"', 'x="20"')
    assert 0.0 < score(s, moved).value < 1.0
    assert score(s, "no svg here").value == 0.0


def test_svg_cannot_pull_in_local_files() -> None:
    pytest.importorskip("cairosvg")
    evil = SVG_OPEN.replace("<svg ", '<svg xmlns:xlink="http://www.w3.org/1999/xlink" ') + (
        '<image xlink:href="file:///etc/passwd" width="100" height="100"/></svg>'
    )
    s = score(sample("code_svg", SQUARE), evil)
    assert s.value == pytest.approx(0.0)


def test_html_is_compared_by_structure() -> None:
    ref = "<html><body><h1>Title</h1><ul><li>a</li><li>b</li></ul></body></html>"
    s = sample("code_html", ref)
    assert score(s, f"```html\n{ref}\n```").value == pytest.approx(1.0)
    other = "<html><body><p>Title</p></body></html>"
    assert score(s, other).value < 0.6
    assert score(s, "plain words, no markup").value == 0.0


def test_ordinary_libraries_still_work_inside_the_sandbox() -> None:
    code = "import json, re, math, collections\nimport numpy as np\nx = int(np.arange(4).sum())"
    got = run_job({"kind": "python", "code": code, "tests": ["assert x == 6"]})
    assert got.result == {"passed": [True]}


def test_parallel_runs_do_not_share_a_process_limit() -> None:
    # Each run has its own uid, so 24 runs at once (more than Limits.processes) all work.
    from concurrent.futures import ThreadPoolExecutor

    job = {"kind": "python", "code": "x = 1", "tests": ["assert x == 1"]}
    with ThreadPoolExecutor(24) as pool:
        results = list(pool.map(lambda _: run_job(job, Limits(wall_s=60)), range(24)))
    assert [r.result for r in results] == [{"passed": [True]}] * 24


NOT_PYTHON = [
    "A. " * 2000,  # a degenerate reply: the parser's slow error pass, ~2 ms here
    "def f(:\n    return 1",
    "def f(x):\nreturn x",  # IndentationError, a subclass: named as such
    "if True:\n\tx = 1\n        y = 2",  # TabError
    "x = (1,\n",  # never closed
    "print 'py2'",
    "f(**)",
    "x = 1\u00a0+ 2",  # a character the tokenizer refuses
    "x = " + "1" * 5000,  # over the stock int/str digit limit, under which answers run
]


@pytest.mark.parametrize("code", NOT_PYTHON, ids=range(len(NOT_PYTHON)))
def test_code_that_does_not_parse_gets_the_sandboxs_verdict_without_it(
    code: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = sample("code_python", ["assert f(1) == 1", "assert True"])
    reply = f"```python\n{code}\n```"
    got = score(s, reply)
    assert got.metadata["program_error"] is not None and "wall_s" not in got.metadata  # no sandbox
    monkeypatch.setattr(code_rules, "syntax_error", lambda code: None)  # the sandbox's say
    ran = score(s, reply)
    assert "wall_s" in ran.metadata
    assert (got.value, got.answer) == (ran.value, ran.answer) == (0.0, "0/2 tests")
    assert got.metadata["program_error"] == ran.metadata["program_error"]
    assert got.metadata["passed"] == ran.metadata["passed"] == [False, False]


@pytest.mark.parametrize(
    "code",
    [
        "return 1",  # refused by the compiler after the parser: the sandbox says so
        "def f(x):\n    return x",
    ],
)
def test_code_only_the_sandbox_can_judge_goes_to_it(code: str) -> None:
    assert code_rules.syntax_error(code) is None


def test_the_answer_runs_under_a_stock_interpreters_digit_limit() -> None:
    # As under an official harness's interpreter (CPython >= 3.11 refuses int/str
    # conversions over 4300 digits); an answer that lifts the limit itself keeps it lifted,
    # and big integers still cross the judge-solver link either way.
    code = (
        "import sys\n"
        "def digits(n):\n    return len(str(10 ** n))\n"
        "def lifted(n):\n    sys.set_int_max_str_digits(0)\n    return len(str(10 ** n))\n"
        "def limit():\n    return sys.get_int_max_str_digits()\n"
        "def big():\n    return 10 ** 6000"
    )
    tests = [
        "assert digits(4000) == 4001",
        "assert digits(5000) == 5001",  # ValueError inside the answer
        "assert lifted(5000) == 5001 and limit() == 0",
        "assert big() == 10 ** 6000",
    ]
    got = run_job({"kind": "python", "code": code, "tests": tests})
    assert got.result is not None, got.stderr
    assert got.result["passed"] == [True, False, True, True]
