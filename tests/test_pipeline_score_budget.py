"""The sink scores each sample under a time budget, in a child process: a reply that no
rule scores in time is "scorer failed: time budget", and the run goes on."""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
from pathlib import Path

import pytest

from evalkit.engines.base import Completion
from evalkit.pipeline import Pipeline, PipelineConfig
from evalkit.sample import Sample
from evalkit.scoring.types import Score
from evalkit.store import Store
from tests.scripted_engine import ScriptedEngine
from tests.test_pipeline import ScriptedIO, make_samples

# Exponential backtracking inside one C call: it never returns and never lets go of the
# GIL, as a super-linear rule on a long degenerate reply would.
_CATASTROPHIC = re.compile(r"(a+)+$")


def stalls_on_s001(sample: Sample, completion: Completion) -> Score:
    if sample.id == "s001":
        _CATASTROPHIC.match("a" * 64 + "b")
    return Score(1.0, completion.text)


def _run(tmp_path: Path, score, budget_s: float, n: int = 4) -> list[dict]:
    store = Store(tmp_path / "r.jsonl")
    cfg = PipelineConfig(score_budget_s=budget_s)
    pipe = Pipeline(ScriptedEngine(prefill_s=0.0, decode_s=0.0), ScriptedIO(0.0), score, store, cfg)
    asyncio.run(pipe.run(make_samples(n)))
    store.close()
    return [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()]


@pytest.mark.timeout(120)
def test_a_sample_past_the_budget_is_scorer_failed_and_the_run_goes_on(tmp_path: Path) -> None:
    records = {r["id"]: r for r in _run(tmp_path, stalls_on_s001, budget_s=2.0)}
    assert records["s001"]["status"] == "failed" and records["s001"]["stage"] == "score"
    assert records["s001"]["error"].startswith("time budget: ")
    assert all(records[i]["status"] == "ok" for i in ("s000", "s002", "s003"))


def test_a_raising_scorer_is_still_scorer_failed_with_its_error(tmp_path: Path) -> None:
    def raises(sample: Sample, completion: Completion) -> Score:
        raise KeyError("boom")

    (record,) = _run(tmp_path, raises, budget_s=30.0, n=1)
    assert record["status"] == "failed" and record["error"] == "KeyError: 'boom'"
    assert "raises" in record["traceback"]


def test_scoring_runs_in_a_child_that_ends_with_the_run(tmp_path: Path) -> None:
    def where(sample: Sample, completion: Completion) -> Score:
        return Score(1.0, str(os.getpid()))

    records = _run(tmp_path, where, budget_s=30.0, n=3)
    pids = {int(r["score"]["answer"]) for r in records}
    assert len(pids) == 1 and os.getpid() not in pids
    with pytest.raises(ProcessLookupError):
        os.kill(pids.pop(), 0)


def test_without_a_budget_scoring_stays_on_the_sink_thread(tmp_path: Path) -> None:
    def where(sample: Sample, completion: Completion) -> Score:
        return Score(1.0, f"{os.getpid()} {threading.current_thread().name}")

    (record,) = _run(tmp_path, where, budget_s=0.0, n=1)
    assert record["score"]["answer"].startswith(f"{os.getpid()} evalkit-sink")


def test_the_budget_must_be_a_finite_number_of_seconds() -> None:
    assert PipelineConfig(score_budget_s=5.0).score_budget_s == 5.0
    for bad in (float("nan"), float("inf"), -1.0):
        with pytest.raises(ValueError):
            PipelineConfig(score_budget_s=bad)
