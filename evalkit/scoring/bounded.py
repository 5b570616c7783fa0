"""Scoring in bounded time: the sink's scoring runs in a child process under a budget.

Every rule is meant to run in time linear in the reply, but a rule that does not (a
plug-in's, one not yet found) must cost one sample, never the run. A thread cannot be
stopped (a regex runs in C and holds the GIL), so the sink hands each sample to a forked
child and waits at most ``budget_s``; past it the child is killed, the sample is recorded
"scorer failed: time budget ...", and the next sample gets a fresh child. The child is
forked from the run's process, so it has every rule the run registered (plug-ins and
test rules included) and nothing is pickled but the sample, the reply and the verdicts.
Where ``fork`` is missing (not Linux/macOS) scoring stays on the sink thread, unbounded.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from evalkit.scoring.sandbox import close_spares, remove_sandbox_folders
from evalkit.scoring.types import Score, ScorerFailure

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from evalkit.engines.base import Completion
    from evalkit.sample import Sample
    from evalkit.scoring.verdicts import Verdicts

ScoreFn = Callable[[Any, Any], Any]


def budget_failure(budget_s: float) -> Score:
    """The Score of a sample whose scoring ran past its budget (reported "scorer failed")."""
    error = (
        f"time budget: scoring under every rule of the task type ran past {budget_s:g} s "
        "(a rule super-linear on this reply?); raise pipeline.score_budget_s to allow more"
    )
    return Score(None, explanation=f"scorer failed: {error}", failed=ScorerFailure(error, ""))


class BoundedScorer:
    """``score(sample, completion)`` in a child process, at most ``budget_s`` per call.

    One caller at a time (the pipeline's single sink thread). :meth:`close` ends the child;
    it also ends by itself when this process goes (its pipe closes, and it is sent SIGKILL
    by the kernel when its parent dies).
    """

    CLOSE_GRACE_S = 2.0  # for the child to close what it started (its waiting sandboxes)

    def __init__(self, score: ScoreFn, budget_s: float) -> None:
        self.score = score
        self.budget_s = budget_s
        self._child: Any = None
        self._conn: Any = None

    @staticmethod
    def available() -> bool:
        """Whether this platform can fork the scoring child."""
        import multiprocessing

        return "fork" in multiprocessing.get_all_start_methods()

    def start(self) -> None:
        """Fork the child now (before the run's threads multiply), if it is not running."""
        if self._child is not None and self._child.is_alive():
            return
        import multiprocessing

        ctx = multiprocessing.get_context("fork")
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=_serve, args=(child, self.score, parent), name="evalkit-score", daemon=True
        )
        proc.start()
        child.close()
        self._child, self._conn = proc, parent

    def __call__(self, sample: Sample, completion: Completion) -> Score | Verdicts:
        """The verdicts, a failed Score naming the budget, or what the scorer raised (as a
        failed Score)."""
        self.start()
        try:
            self._conn.send((sample, completion))
            if not self._conn.poll(self.budget_s):
                self._kill()
                return budget_failure(self.budget_s)
            kind, value = self._conn.recv()
        except (EOFError, OSError) as exc:  # the child died under the scorer (a crash)
            self._kill()
            return Score.scorer_failed(RuntimeError(f"the scoring process died ({exc!r})"))
        if kind == "raised":
            return Score(None, explanation=f"scorer failed: {value.error}", failed=value)
        return value

    def _kill(self, grace_s: float = 0.0) -> None:
        proc, conn = self._child, self._conn
        self._child = self._conn = None
        if conn is not None:
            conn.close()  # the child sees its pipe close and leaves
        if proc is not None:
            with contextlib.suppress(Exception):
                proc.join(grace_s)
                proc.kill()
                proc.join(5)
            if proc.exitcode is not None:  # reaped: its pid names nobody else's folders
                remove_sandbox_folders(proc.pid)

    def close(self) -> None:
        """End the child (it finishes nothing: the sink waited for every answer), giving it
        a moment to close the sandboxes it started ahead."""
        self._kill(self.CLOSE_GRACE_S)


def _serve(conn: Connection, score: ScoreFn, parents_end: Connection) -> None:
    """The child: score what comes down the pipe until it closes, then leave at once."""
    parents_end.close()  # else the pipe never closes here: this copy would hold it open
    gc.freeze()  # the parent's objects are never collected here: no finaliser of theirs runs
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    signal.signal(signal.SIGTERM, _leave)  # through the finally below (closes its sandboxes)
    _die_with_parent()
    try:
        while True:
            try:
                # waits in slices: a SIGTERM the kernel hands to another thread (the
                # sandboxes' starter) interrupts no wait here, and its handler runs on
                # this thread between two slices
                while not conn.poll(0.5):
                    pass
                sample, completion = conn.recv()
            except (EOFError, OSError):
                break
            try:
                answer: tuple[str, Any] = ("ok", score(sample, completion))
                conn.send(answer)
            except Exception as exc:  # the scorer raised, or its verdicts do not pickle
                conn.send(("raised", ScorerFailure.of(exc)))
    finally:
        close_spares()  # the sandboxes it started ahead (os._exit runs no atexit handler)
        os._exit(0)  # never the parent's atexit handlers (engines, Ray) in this copy of it


def _leave(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _die_with_parent() -> None:
    """PR_SET_PDEATHSIG(SIGKILL) where Linux has it: the child never outlives the run."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
