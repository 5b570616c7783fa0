"""Math answers: symbolic equivalence with math-verify, under a time limit per call.

math-verify bounds its own parse/verify time with ``signal.alarm``, which only works on
a process's main thread (off it, ``parse`` raises). So: on the main thread we call it
in-process with its own limits; on any other thread (the pipeline's scoring sink) the
call goes to one long-lived worker process, whose main thread may use signals, and we
add a hard wall-clock limit around it — a hung worker is killed and replaced.

Degenerate replies (a unit looped until the token budget ran out) are shortened before
math-verify sees them, so that they cost milliseconds, not seconds: see ``shorten_runs``.
"""

from __future__ import annotations

import json
import re
import select
import subprocess
import sys
import threading
from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.extract import final_span, format_level
from evalkit.scoring.types import Score

TIME_LIMIT_S = 5.0  # per call; math-verify's own default too
MAX_CHARS = 4000  # longer answers are cut: sympy on megabytes of LaTeX is a DoS
RUN_MIN = 32  # a unit repeated this often in a row is a loop, not an answer...
RUN_KEEP = 1  # ...and is cut to one: the loop reads as its unit
RUN_UNIT_CHARS = 8
_RUN = re.compile(rf"(.{{1,{RUN_UNIT_CHARS}}}?)\1{{{RUN_MIN - 1},}}", re.DOTALL)


def shorten_runs(text: str) -> str:
    """``text`` with every run of one short unit repeated ``RUN_MIN`` or more times in a row
    cut to ``RUN_KEEP`` repetitions; the identity on any text without such a run.

    Why (math-verify 0.9.0, latex2sympy2_extended 1.11.0, facts read from their source and
    measured here): math-verify's LaTeX regexes are tried at every start position with lazy
    bodies (``\\(`` x 2000 scans quadratically: ~0.5 s); latex2sympy's ANTLR parser spends
    ~1 ms per token on implicit products (``$1 1 1 ...$``: 2000 tokens, ~1.6 s) and, the
    first time a process meets a nesting depth, ~5 ms per unclosed ``(`` (``((`` x 2000:
    past math-verify's own 5 s limit). Time grows with the run, the verdict does not need it.

    What it can change, and why that is acceptable. Realistic answers: nothing, for none
    has such a run (32 in a row is far beyond a real answer: a 32-column row of zeros would
    be ``0 & `` x 32; long numbers and repeating decimals are digits only, and whitespace is
    cheap: both are left alone). Loops: with about 1000 units or more (every 64k degenerate
    reply fills the 4000-character window so), math-verify never reads the loop itself:
    latex2sympy fails (``1 1 1 ...`` from ~1000 units: RecursionError) or math-verify times
    out (no answer), and math-verify falls back to a number its plain-expression regex finds
    in the window; cut to one unit, the loop reads much the same, and verdicts against
    ordinary targets (0, 1, 2, 4, 0.5, 11, 12, A) stay. What changes is what the loop itself
    reads as, so a target equal to that artifact: ``1.1`` x 1333 read as 11.11 (the window
    began inside a unit), cut it reads as 11.1; an unclosed run's fallback text is ``(``,
    not 4000 of them; and a shorter loop that math-verify still parses whole (``1 1 1 ...``
    x 40 is their sum, 40) reads as one or two units. One more, for the better: a run that
    timed out may now be read (40 nested parentheses around 5: 5, where the 5 s limit gave
    no answer). tests/test_scoring_math_runs.py pins exactly these.
    """

    def cut(m: re.Match[str]) -> str:
        unit = m.group(1)
        return m.group() if unit.isdigit() or unit.isspace() else unit * RUN_KEEP

    return _RUN.sub(cut, text)


def verify_strings(gold: str, answer: str, limit_s: float = TIME_LIMIT_S) -> tuple[bool, str]:
    """(equivalent?, parsed answer as text); runs math-verify with its signal timeouts.

    Must run on a main thread. Never raises: a parse failure is (False, "").
    """
    from math_verify import parse, verify

    t = max(1, int(limit_s))
    try:
        # A bare target ("2(x+1)") is a LaTeX expression: parsed as plain text math-verify
        # would take only its first number.
        bare = "$" not in gold and "\\boxed" not in gold
        g = parse(f"${gold}$" if bare else gold, parsing_timeout=t)
        if not g and bare:
            g = parse(gold, parsing_timeout=t)
        p = parse(answer, parsing_timeout=t)
        if not g or not p:
            return False, str(p[-1]) if p else ""
        return bool(verify(g, p, timeout_seconds=t)), str(p[-1])
    except Exception:  # math-verify raises TimeoutError or sympy errors on odd input
        return False, ""


class _Worker:
    """One long-lived process running ``verify_strings`` for calls made off the main thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None
        self._warm = False  # the first call also pays for importing sympy in the worker

    def _start(self) -> None:
        self._proc = subprocess.Popen(
            # A plain subprocess, not multiprocessing: spawning would re-import the
            # caller's __main__, which breaks scripts without a main guard.
            [sys.executable, "-m", "evalkit.scoring._math_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._warm = False

    def _stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(5)
        self._proc = None

    def call(self, gold: str, answer: str, limit_s: float) -> tuple[bool, str] | None:
        """The result, or None if the call ran past the limit (the worker is replaced)."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            proc = self._proc
            assert proc is not None and proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(json.dumps([gold, answer, limit_s]) + "\n")
                proc.stdin.flush()
            except OSError:
                self._stop()
                return None
            # Start-up (importing sympy) is not the answer's fault: allow for it once.
            wait = limit_s + 2.0 + (0.0 if self._warm else 60.0)
            ready, _, _ = select.select([proc.stdout], [], [], wait)
            line = proc.stdout.readline() if ready else ""
            if not line:
                self._stop()
                return None
            self._warm = True
            ok, parsed = json.loads(line)
            return bool(ok), str(parsed)


_WORKER = _Worker()


def equivalent(gold: str, answer: str, limit_s: float = TIME_LIMIT_S) -> tuple[bool, str] | None:
    """math-verify equivalence from any thread; None when the time limit was hit."""
    if threading.current_thread() is threading.main_thread():
        return verify_strings(gold, answer, limit_s)
    return _WORKER.call(gold, answer, limit_s)


# Rule: math-verify (HuggingFace; github.com/huggingface/Math-Verify) parse + verify —
# the equivalence check used by open-r1 and EasyVideoR1's math reward.
def math(prediction: str, target: Any, sample: Sample) -> Score:
    """1 if the answer is mathematically equivalent to the target (math-verify), else 0."""
    span = final_span(prediction)
    answer = shorten_runs(span.text[-MAX_CHARS:])
    if span.marked and "\\boxed" not in answer and "$" not in answer:
        answer = f"${answer}$"  # a bare "1/2" inside <answer> is LaTeX-parsable this way
    meta: dict[str, Any] = {"format": format_level(span, bool(span.text))}
    if not span.text:
        return Score(0.0, None, "empty answer", meta)
    result = equivalent(str(target), answer)
    if result is None:
        meta["timeout"] = True
        return Score(0.0, None, f"math-verify ran past {TIME_LIMIT_S:g}s", meta)
    ok, parsed = result
    if not parsed:
        meta["format"] = 0.0
    return Score(1.0 if ok else 0.0, parsed or None, f"math-verify ({span.method})", meta)
