"""Scoring in bounded time: the sink's scoring runs in a child process under a budget.

Every rule is meant to run in time linear in the reply, but a rule that does not (a
plug-in's, one not yet found) must cost one sample, never the run. A thread cannot be
stopped (a regex runs in C and holds the GIL), so the sink hands each sample to a forked
child and waits at most ``budget_s``; past it the child is killed, the sample is recorded
"scorer failed: time budget ...", and the next sample gets a fresh child. The child is
forked from the run's process, so it has every rule the run registered (plug-ins and
test rules included) and nothing is pickled but the sample, the reply and the verdicts.
Where ``fork`` is missing (not Linux/macOS) scoring stays on the sink thread, unbounded.

Pipelines that run side by side in one process (a sweep's settings) share a
:class:`ScoringPool` instead: a few such children for them all, however many there are.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import signal
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from evalkit.scoring.sandbox import close_spares, remove_sandbox_folders
from evalkit.scoring.types import Score, ScorerFailure

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from evalkit.engines.base import Completion
    from evalkit.sample import Sample
    from evalkit.scoring.verdicts import Verdicts

ScoreFn = Callable[..., Any]


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
        return self._ask(sample, completion)

    def _ask(self, *job: Any) -> Score | Verdicts:
        """``score(*job)`` in the child, as ``__call__`` says."""
        self.start()
        try:
            self._conn.send(job)
            if not self._conn.poll(self.budget_s):
                self._kill()
                return budget_failure(self.budget_s)
            kind, value = self._conn.recv()
        except (EOFError, OSError) as exc:  # the child died under the scorer (a crash)
            self._kill()
            return Score.scorer_failed(RuntimeError(f"the scoring process died ({exc!r})"))
        if kind == "raised":
            return Score(None, explanation=f"scorer failed: {value.error}", failed=value)
        result: Score | Verdicts = value
        return result

    def _hang_up(self) -> None:
        """Close the pipe: the child leaves at its next look at it (within 0.5 s)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

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


class ScoringPool:
    """At most ``size`` scoring children (each a :class:`BoundedScorer`) shared by the
    sinks of several pipelines: a sweep's settings run side by side, each with a sink, and
    one child per sink made 197 processes for a 200-setting grid.

    A pipeline registers its scorer (:meth:`scorer`) and calls the handle it gets. A child
    is forked when a sample needs one, and knows the scorers registered by then (fork
    copies them: nothing is pickled but the job, as with one child); a sample of a scorer
    registered later replaces an idle child that does not know it (a sweep's settings
    register theirs as they start, before any sample is scored; a second benchmark's
    comes once its setting's first is done). Thread-safe. Every child is forked from one
    thread of the pool's own, which lives as long as the pool: the parent-death signal
    that ends a child with the run follows the thread that forked it, and a sink's thread
    ends with its pipeline, while the child goes on scoring for the others.
    """

    def __init__(self, size: int, budget_s: float) -> None:
        self.size = max(1, size)
        self.budget_s = budget_s
        self._scorers: dict[int, ScoreFn] = {}
        self._keys = itertools.count()
        self._idle: list[tuple[BoundedScorer, frozenset[int]]] = []  # (child, scorers it has)
        self._made = 0  # children made and not ended (idle or scoring)
        self._slots = threading.BoundedSemaphore(self.size)
        self._lock = threading.Lock()
        self._closed = False
        self._forker = ThreadPoolExecutor(1, thread_name_prefix="evalkit-score-fork")

    def scorer(self, score: ScoreFn) -> PooledScorer:
        """A handle that scores with ``score`` in one of the pool's children."""
        with self._lock:
            key = next(self._keys)
            self._scorers[key] = score
        return PooledScorer(self, key)

    def _forget(self, key: int) -> None:
        with self._lock:  # children forked from now on leave it out
            self._scorers.pop(key, None)

    def _score(self, key: int, sample: Sample, completion: Completion) -> Score | Verdicts:
        with self._slots:
            child, knows = self._take(key)
            try:
                self._forker.submit(child.start).result()  # (a no-op while it runs)
                return child._ask(key, sample, completion)
            finally:
                with self._lock:  # killed past its budget, it forks again when next asked
                    closed = self._closed
                    if not closed:
                        self._idle.append((child, knows))
                if closed:  # the pool closed while this sample was scored
                    child.close()

    def _take(self, key: int) -> tuple[BoundedScorer, frozenset[int]]:
        """An idle child that knows scorer ``key``, else a new one (ending an idle one
        that does not know it when the pool is full). The caller holds a slot, so there
        is an idle child whenever ``size`` are made."""
        with self._lock:
            for i, (_, knows) in enumerate(self._idle):
                if key in knows:
                    return self._idle.pop(i)
            stale = self._idle.pop()[0] if self._made >= self.size else None
            self._made += stale is None
            scorers = dict(self._scorers)
        if stale is not None:
            stale.close()
        return BoundedScorer(_Table(scorers), self.budget_s), frozenset(scorers)

    def close(self) -> None:
        """End every child, all at once (each is given its moment to close its sandboxes)."""
        with self._lock:
            children = [child for child, _ in self._idle]
            self._idle, self._made, self._closed = [], 0, True
        for child in children:
            child._hang_up()
        for child in children:
            child.close()
        self._forker.shutdown(wait=True)  # after the children: its end would kill them


class PooledScorer:
    """One pipeline's scorer in a :class:`ScoringPool` (called as ``BoundedScorer`` is)."""

    def __init__(self, pool: ScoringPool, key: int) -> None:
        self._pool, self._key = pool, key

    def __call__(self, sample: Sample, completion: Completion) -> Score | Verdicts:
        """As :meth:`BoundedScorer.__call__`, in whichever of the pool's children is free."""
        return self._pool._score(self._key, sample, completion)

    def close(self) -> None:
        """The pipeline is done: its scorer leaves the pool (the children stay)."""
        self._pool._forget(self._key)


class _Table:
    """The scorers a pool's child was forked with, by key: the job is (key, sample, reply)."""

    def __init__(self, scorers: dict[int, ScoreFn]) -> None:
        self.scorers = scorers

    def __call__(self, key: int, sample: Sample, completion: Completion) -> Score | Verdicts:
        return self.scorers[key](sample, completion)


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
                job = conn.recv()
            except (EOFError, OSError):
                break
            try:
                answer: tuple[str, Any] = ("ok", score(*job))
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
