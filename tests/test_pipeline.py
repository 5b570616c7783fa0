"""Scheduling behaviour of the pipeline, with a scripted engine and scripted IO."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from evalkit.engines.base import Completion, Request
from evalkit.errors import DataError, VideoError
from evalkit.pipeline import Pipeline, PipelineConfig
from evalkit.sample import Sample
from evalkit.scoring.types import Score
from evalkit.store import Store
from evalkit.testing.runs import Rec, record
from tests.scripted_engine import ScriptedEngine


def make_samples(n: int) -> list[Sample]:
    return [
        Sample(id=f"s{i:03d}", task_type="multiple_choice", question=f"q{i}", target="A")
        for i in range(n)
    ]


def letter_score(sample: Sample, completion: Completion) -> Score:
    return Score(float(completion.text == sample.target), completion.text)


class ScriptedIO:
    """prepare() that sleeps like a cache read and records when it ran."""

    def __init__(self, io_s: float = 0.02, fail: set[str] | None = None) -> None:
        self.io_s = io_s
        self.fail = fail or set()
        self.intervals: dict[str, tuple[float, float]] = {}
        self.alive = 0
        self.max_alive = 0
        self._lock = threading.Lock()

    def __call__(self, sample: Sample) -> Request:
        start = time.time()
        if sample.id in self.fail:
            raise VideoError(f"/videos/{sample.id}.mp4", "truncated file")
        time.sleep(self.io_s)
        with self._lock:
            self.alive += 1
            self.max_alive = max(self.max_alive, self.alive)
        self.intervals[sample.id] = (start, time.time())
        return Request(id=sample.id, text=sample.question)

    def release(self, n: int = 1) -> None:
        with self._lock:
            self.alive -= n


def run(pipeline: Pipeline, samples: list[Sample]):
    return asyncio.run(pipeline.run(samples))


def test_io_of_later_samples_overlaps_decode_of_earlier_ones(tmp_path: Path) -> None:
    engine = ScriptedEngine(prefill_s=0.01, decode_s=0.15)
    io = ScriptedIO(io_s=0.03)
    cfg = PipelineConfig(io_workers=2, max_in_flight=4, lookahead=4)
    with Store(tmp_path / "b.jsonl") as store:
        run(Pipeline(engine, io, letter_score, store, cfg), make_samples(12))
    first_start, first_end = engine.interval("s000")
    overlapping = [
        sid
        for sid, (a, b) in io.intervals.items()
        if sid != "s000" and a < first_end and b > first_start
    ]
    assert overlapping, "no IO ran while the first request was in the engine"
    # no batch boundary: a request is submitted before IO of the whole set finished
    last_io_end = max(b for _, b in io.intervals.values())
    assert first_start < last_io_end


def test_requests_in_flight_never_exceed_the_bound_and_reach_it(tmp_path: Path) -> None:
    engine = ScriptedEngine(prefill_s=0.0, decode_s=0.05)
    cfg = PipelineConfig(io_workers=4, max_in_flight=3, lookahead=2)
    with Store(tmp_path / "b.jsonl") as store:
        run(Pipeline(engine, ScriptedIO(io_s=0.001), letter_score, store, cfg), make_samples(20))
    assert engine.max_active == 3


def test_prepared_requests_alive_are_bounded_by_lookahead_plus_in_flight(tmp_path: Path) -> None:
    io = ScriptedIO(io_s=0.0)
    engine = ScriptedEngine(prefill_s=0.0, decode_s=0.02)

    def score(sample: Sample, completion: Completion) -> Score:
        io.release()
        return letter_score(sample, completion)

    # score_budget_s=0: the scorer releases ``io`` here, so it must run in this process
    cfg = PipelineConfig(io_workers=4, max_in_flight=2, lookahead=3, score_budget_s=0)
    with Store(tmp_path / "b.jsonl") as store:
        run(Pipeline(engine, io, score, store, cfg), make_samples(40))
    assert io.max_alive <= 2 + 3


def test_every_sample_is_recorded_once_with_its_timeline(tmp_path: Path) -> None:
    with Store(tmp_path / "b.jsonl") as store:
        stats = run(
            Pipeline(ScriptedEngine(), ScriptedIO(0.0), letter_score, store), make_samples(50)
        )
    lines = [json.loads(x) for x in (tmp_path / "b.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in lines) == [s.id for s in make_samples(50)]
    assert stats.completed == 50 and stats.failed == 0
    t = lines[0]["timings"]
    assert (
        t["io_start"]
        <= t["io_end"]
        <= t["submitted"]
        <= t["first_token"]
        <= t["finished"]
        <= t["scored"]
    )
    assert lines[0]["score"]["value"] == 1.0 and lines[0]["prompt_hash"]


def test_an_undecodable_video_fails_only_its_sample(tmp_path: Path) -> None:
    io = ScriptedIO(0.0, fail={"s003"})
    with Store(tmp_path / "b.jsonl") as store:
        stats = run(Pipeline(ScriptedEngine(), io, letter_score, store), make_samples(8))
        recs = {r.id: r for r in store.records()}
    assert stats.failed == 1 and stats.completed == 7
    assert recs["s003"].status == "failed" and recs["s003"].stage == "io"
    assert "s003.mp4" in recs["s003"].error and "truncated" in recs["s003"].error


def test_transient_engine_errors_are_retried_and_others_fail_the_sample(tmp_path: Path) -> None:
    engine = ScriptedEngine(transient_failures={"s001": 2}, fail_ids={"s002"})
    cfg = PipelineConfig(max_retries=2, retry_backoff_s=0.001)
    with Store(tmp_path / "b.jsonl") as store:
        run(Pipeline(engine, ScriptedIO(0.0), letter_score, store, cfg), make_samples(4))
        recs = {r.id: r for r in store.records()}
    assert recs["s001"].status == "ok"
    assert recs["s002"].status == "failed" and recs["s002"].stage == "engine"
    assert "scripted failure" in recs["s002"].error


def test_resume_skips_ids_already_recorded_in_any_order(tmp_path: Path) -> None:
    samples = make_samples(10)
    path = tmp_path / "b.jsonl"
    with Store(path) as store:  # an earlier run finished these, out of order
        for sid in ("s007", "s002", "s009"):
            store.append(record(Rec(sid), "b"))
    engine = ScriptedEngine()
    with Store(path) as store:
        stats = run(Pipeline(engine, ScriptedIO(0.0), letter_score, store), samples)
    ids = [json.loads(x)["id"] for x in path.read_text().splitlines()]
    assert sorted(ids) == [s.id for s in samples]
    assert stats.skipped == 3 and engine.calls == 7


def test_duplicate_sample_ids_in_the_input_are_an_error(tmp_path: Path) -> None:
    samples = make_samples(3) + make_samples(1)
    with Store(tmp_path / "b.jsonl") as store, pytest.raises(DataError, match="s000"):
        run(Pipeline(ScriptedEngine(), ScriptedIO(0.0), letter_score, store), samples)


def test_cancelling_a_run_keeps_finished_records_whole_and_resume_completes(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    samples = make_samples(30)

    async def cancel_midway() -> None:
        with Store(path) as store:
            pipe = Pipeline(
                ScriptedEngine(decode_s=0.05),
                ScriptedIO(0.0),
                letter_score,
                store,
                PipelineConfig(max_in_flight=4, lookahead=2),
            )
            task = asyncio.create_task(pipe.run(samples))
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(cancel_midway())
    partial = [json.loads(x)["id"] for x in path.read_text().splitlines()]
    assert 0 < len(partial) < 30
    with Store(path) as store:
        run(Pipeline(ScriptedEngine(decode_s=0.0), ScriptedIO(0.0), letter_score, store), samples)
    ids = [json.loads(x)["id"] for x in path.read_text().splitlines()]
    assert sorted(ids) == [s.id for s in samples]


KILL_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, {root!r})
    from tests.test_pipeline import make_samples, letter_score, ScriptedIO
    from tests.scripted_engine import ScriptedEngine
    from evalkit.pipeline import Pipeline, PipelineConfig
    from evalkit.store import Store
    store = Store(sys.argv[1])
    pipe = Pipeline(ScriptedEngine(decode_s=float(sys.argv[2])), ScriptedIO(0.0), letter_score,
                    store, PipelineConfig(max_in_flight=4, lookahead=2))
    asyncio.run(pipe.run(make_samples(40)))
    """
)


def test_a_process_killed_mid_run_resumes_with_each_id_exactly_once(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    script = tmp_path / "run.py"
    script.write_text(KILL_SCRIPT.format(root=str(Path(__file__).resolve().parents[1])))
    proc = subprocess.Popen([sys.executable, str(script), str(path), "0.05"])
    deadline = time.time() + 60
    while time.time() < deadline:
        if path.exists() and path.read_text().count("\n") >= 8:
            break
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # simulate the worst case as well: the kill tore the last line in half
    with open(path, "ab") as f:
        f.write(b'{"id": "s039", "status": "ok", "predic')
    before = len(path.read_text().splitlines())
    assert 8 <= before < 41
    subprocess.run([sys.executable, str(script), str(path), "0.0"], check=True)
    ids = [json.loads(x)["id"] for x in path.read_text().splitlines()]
    assert sorted(ids) == [f"s{i:03d}" for i in range(40)]


def test_sync_mode_waits_for_the_whole_batch_before_the_next(tmp_path: Path) -> None:
    engine = ScriptedEngine(prefill_s=0.0, decode_s=0.02)
    cfg = PipelineConfig(batch_size=4)
    with Store(tmp_path / "b.jsonl") as store:
        asyncio.run(
            Pipeline(engine, ScriptedIO(0.0), letter_score, store, cfg).run_sync(make_samples(12))
        )
    ends = {rid: t for kind, rid, t in engine.events if kind == "end"}
    starts = {rid: t for kind, rid, t in engine.events if kind == "start"}
    batch1_end = max(ends[f"s{i:03d}"] for i in range(4))
    assert all(starts[f"s{i:03d}"] >= batch1_end for i in range(4, 8))


def test_cache_reads_run_in_parallel_not_one_await_at_a_time(tmp_path: Path) -> None:
    io = ScriptedIO(io_s=0.05)
    cfg = PipelineConfig(io_workers=4, max_in_flight=8, lookahead=8)
    with Store(tmp_path / "b.jsonl") as store:
        run(Pipeline(ScriptedEngine(decode_s=0.0), io, letter_score, store, cfg), make_samples(8))
    spans = sorted(io.intervals.values())
    concurrent = max(sum(1 for a, b in spans if a <= t < b) for t, _ in spans)
    assert concurrent >= 3
