"""The scoring pool a sweep's settings share: many scorers, at most ``size`` processes, each
sample scored by its own scorer under the budget, and a child that outlives the thread
(a pipeline's sink) that first needed it."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from evalkit.scoring.bounded import BoundedScorer, ScoringPool
from evalkit.scoring.types import Score

pytestmark = pytest.mark.skipif(not BoundedScorer.available(), reason="no fork")


def _scorer(name: str) -> Any:
    def score(sample: object, reply: object) -> Score:
        if reply == "hang":
            time.sleep(600)
        return Score(1.0, explanation=f"{name} {reply} in {os.getpid()}")

    return score


def _pid(score: Score) -> int:
    return int(score.explanation.rsplit(" ", 1)[1])


def test_many_scorers_share_at_most_size_processes_each_scoring_with_its_own() -> None:
    pool = ScoringPool(2, budget_s=30.0)
    handles = [pool.scorer(_scorer(f"s{i}")) for i in range(12)]
    try:
        with ThreadPoolExecutor(12) as sinks:  # one sink per pipeline, side by side
            got = list(sinks.map(lambda i: handles[i](None, f"r{i}"), range(12)))  # type: ignore[arg-type]
    finally:
        pool.close()
    assert [g.explanation.split(" in ")[0] for g in got] == [f"s{i} r{i}" for i in range(12)]
    pids = {_pid(g) for g in got}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2


def test_a_child_outlives_the_sink_thread_that_first_needed_it() -> None:
    # the parent-death signal follows the thread that forked: forked from a sink's thread,
    # the child died when that pipeline ended, under the next setting's sample
    pool = ScoringPool(1, budget_s=30.0)
    first, second = pool.scorer(_scorer("a")), pool.scorer(_scorer("b"))
    try:
        got: list[Score] = []
        sink = threading.Thread(target=lambda: got.append(first(None, "x")))  # type: ignore[arg-type]
        sink.start()
        sink.join()
        time.sleep(0.2)  # the signal, had it come, has killed the child by now
        got.append(second(None, "y"))  # type: ignore[arg-type]
    finally:
        pool.close()
    assert [g.explanation.split(" in ")[0] for g in got] == ["a x", "b y"], got
    assert _pid(got[0]) == _pid(got[1])


def test_a_scorer_registered_after_the_fork_gets_a_child_that_knows_it() -> None:
    pool = ScoringPool(1, budget_s=30.0)
    try:
        early = pool.scorer(_scorer("early"))
        assert early(None, "x").explanation.startswith("early x")  # type: ignore[arg-type]
        late = pool.scorer(_scorer("late"))  # a setting's second benchmark, say
        assert late(None, "y").explanation.startswith("late y")  # type: ignore[arg-type]
        assert early(None, "z").explanation.startswith("early z")  # type: ignore[arg-type]
    finally:
        pool.close()


def test_a_sample_past_the_budget_fails_alone_and_the_pool_goes_on() -> None:
    pool = ScoringPool(1, budget_s=1.0)
    slow, other = pool.scorer(_scorer("slow")), pool.scorer(_scorer("other"))
    try:
        hung = slow(None, "hang")  # type: ignore[arg-type]
        assert hung.value is None and "time budget" in hung.explanation
        assert other(None, "x").explanation.startswith("other x")  # type: ignore[arg-type]
    finally:
        pool.close()
