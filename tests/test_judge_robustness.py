"""A silent or slow judge never stalls a run: concurrent judging awaited on the pipeline's
loop, a timeout per attempt, bounded retries, a circuit breaker, and the report says so.

Judges are scripted engines that sleep; delays are sub-second and the assertions are
counts and orderings (plus bounds many times above the expected time).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from evalkit.engines import build
from evalkit.engines.base import Completion, Request, Timings
from evalkit.pipeline import Pipeline, PipelineConfig
from evalkit.reports import load_run
from evalkit.reports.sections import summary
from evalkit.run.components import make_scorer
from evalkit.run.config import JudgeConfig, judge_engine_options
from evalkit.sample import Sample
from evalkit.scoring import LLMJudge, ScoringContext, ascore
from evalkit.scoring.judge_guard import JUDGE_UNAVAILABLE, JudgeGuard, JudgeUnavailable
from evalkit.store import Store
from tests.test_run_judge import run as run_vcrbench

TIMEOUT = 0.25  # a judge attempt's timeout in these tests, seconds


@dataclass
class SleepyJudge:
    """A judge Engine that answers "VERDICT: 1" after ``delay_s`` (None: never answers)."""

    delay_s: float | None = None
    fail_first: int = 0  # this many calls raise ConnectionError first
    calls: int = 0
    active: int = 0
    max_active: int = 0
    started: list[str] = field(default_factory=list)

    async def generate(self, request: Request) -> Completion:
        self.calls += 1
        self.started.append(request.id)
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            if self.calls <= self.fail_first:
                raise ConnectionError("judge refused the connection")
            await asyncio.sleep(3600 if self.delay_s is None else self.delay_s)
        finally:
            self.active -= 1
        return Completion(request_id=request.id, texts=["VERDICT: 1"], timings=Timings())

    async def close(self) -> None:
        return None


class ModelEngine:
    """The model under test: answers at once ("A" to a choice, "a cat" to an open question)."""

    async def generate(self, request: Request) -> Completion:
        text = "a cat" if request.id.startswith("j") else "A"
        return Completion(request_id=request.id, texts=[text], timings=Timings())

    async def close(self) -> None:
        return None


def judged(n: int) -> list[Sample]:
    return [
        Sample(id=f"j{i:02d}", task_type="llm_judge", question=f"q{i}", target="a cat")
        for i in range(n)
    ]


def unjudged(n: int) -> list[Sample]:
    return [
        Sample(
            id=f"u{i:02d}",
            task_type="multiple_choice",
            question=f"c{i}",
            options=["x", "y"],
            target="A",
        )
        for i in range(n)
    ]


def guard(**kw: float) -> JudgeGuard:
    """A guard with test-sized timings (overridable)."""
    settings = {"timeout_s": TIMEOUT, "retries": 0, "backoff_s": 0.01, **kw}
    return JudgeGuard(**settings)  # type: ignore[arg-type]


def run_pipeline(
    tmp_path: Path,
    engine: SleepyJudge,
    samples: list[Sample],
    policy: JudgeGuard,
    cfg: PipelineConfig | None = None,
) -> tuple[list[dict], float]:
    """The samples through the real pipeline and the run's scorer; (records, seconds)."""
    cfg = cfg or PipelineConfig(io_workers=2, max_in_flight=8, lookahead=4)

    async def main() -> float:
        judge = LLMJudge(engine, model="sleepy", loop=asyncio.get_running_loop(), guard=policy)
        with Store(tmp_path / "b.jsonl") as store:
            pipe = Pipeline(ModelEngine(), prepare, make_scorer(None, judge), store, cfg)
            start = time.monotonic()
            # a watchdog far above the expected time, so a regression fails instead of hanging
            await asyncio.wait_for(pipe.run(samples), timeout=60)
            return time.monotonic() - start

    elapsed = asyncio.run(main())
    with Store(tmp_path / "b.jsonl") as store:
        return store.records(), elapsed


def prepare(sample: Sample) -> Request:
    return Request(id=sample.id, text=sample.question)


def status(record: dict) -> str | None:
    return record.score.metadata.get("judge_status")


# -- the circuit breaker --------------------------------------------------------------------


def test_a_silent_judge_is_marked_down_and_the_rest_are_recorded_unavailable_at_once(
    tmp_path: Path,
) -> None:
    engine = SleepyJudge(delay_s=None)
    records, elapsed = run_pipeline(
        tmp_path, engine, judged(20), guard(concurrency=2, max_failures=3)
    )
    # only the calls started before the breaker tripped ever reached the judge
    assert engine.calls <= 3 + 2 - 1
    assert all(r.status == "ok" and r.score.value is None for r in records)
    failed = [r for r in records if status(r) == "failed"]
    down = [r for r in records if status(r) == "unavailable"]
    assert len(failed) == engine.calls and len(down) == 20 - engine.calls
    assert all(r.score.explanation.startswith(JUDGE_UNAVAILABLE) for r in down)
    assert "TimeoutError" in failed[0].score.explanation
    # about two timeouts in all (3 failures, 2 at a time), not one per sample (20 x 0.25 s)
    assert elapsed < 20 * TIMEOUT


def test_the_breaker_counts_consecutive_failures_only() -> None:
    engine = SleepyJudge(delay_s=0.0, fail_first=2)
    policy = guard(max_failures=3)

    async def main() -> None:
        judge = LLMJudge(engine, model="flaky", guard=policy)
        for s in judged(4):
            await ascore(s, "a cat", ScoringContext(judge))

    asyncio.run(main())
    assert (policy.failed, policy.consecutive, policy.down) == (2, 0, False)


def test_a_down_judge_refuses_at_once_and_names_why() -> None:
    policy = guard(max_failures=1)
    engine = SleepyJudge(delay_s=0.0, fail_first=1)

    async def main() -> None:
        await policy.call(lambda: engine.generate(Request(id="r", text="t")))

    with pytest.raises(ConnectionError):
        asyncio.run(main())
    with pytest.raises(JudgeUnavailable, match="1 consecutive failed calls; last: Connection"):
        asyncio.run(main())
    assert engine.calls == 1 and policy.refused == 1


def test_cached_verdicts_stand_while_the_judge_is_down(tmp_path: Path) -> None:
    sample = judged(1)[0]

    async def main(engine: SleepyJudge, policy: JudgeGuard) -> float | None:
        judge = LLMJudge(engine, model="m", cache_dir=tmp_path, guard=policy)
        return (await ascore(sample, "a cat", ScoringContext(judge))).value

    assert asyncio.run(main(SleepyJudge(delay_s=0.0), guard())) == 1.0
    down = guard()
    down.down_reason = "marked down in a test"
    assert asyncio.run(main(SleepyJudge(delay_s=None), down)) == 1.0


# -- timeouts and retries -------------------------------------------------------------------


def test_a_timed_out_attempt_is_retried_once_then_the_sample_is_not_scored() -> None:
    engine = SleepyJudge(delay_s=None)
    policy = guard(retries=1)

    async def main() -> tuple[float | None, str]:
        judge = LLMJudge(engine, model="m", guard=policy)
        got = await ascore(judged(1)[0], "a cat", ScoringContext(judge))
        return got.value, got.explanation

    value, why = asyncio.run(main())
    assert value is None and why.startswith("judge failed: TimeoutError")
    assert engine.calls == 2  # the first attempt and one retry, no more


def test_the_judge_engine_client_timeout_and_retries_come_from_the_judge_config() -> None:
    jc = JudgeConfig(model="m", engine="openai", timeout_s=7)
    assert judge_engine_options(jc) == {"timeout_s": 7, "max_retries": 0}
    engine = build("openai", "m", judge_engine_options(jc))
    assert engine._client.timeout.read == 7 and engine.config.max_retries == 0  # type: ignore[attr-defined]
    asyncio.run(engine.close())
    mine = JudgeConfig(model="m", engine="openai", engine_options={"timeout_s": 30})
    assert judge_engine_options(mine)["timeout_s"] == 30  # an explicit engine option wins
    assert JudgeConfig(model="m").timeout_s == 60  # seconds, not the client's 600


# -- concurrency, and unjudged samples never wait ------------------------------------------


def test_judged_samples_are_judged_concurrently_up_to_the_bound(tmp_path: Path) -> None:
    engine = SleepyJudge(delay_s=0.4)
    records, _ = run_pipeline(tmp_path, engine, judged(12), guard(concurrency=4, timeout_s=30))
    assert [r.score.value for r in records] == [1.0] * 12
    # 12 judgements, 4 at a time: about 3 delays, not 12
    assert engine.max_active == 4


def test_unjudged_samples_are_recorded_before_the_judged_ones_time_out(tmp_path: Path) -> None:
    engine = SleepyJudge(delay_s=None)
    samples = judged(4) + unjudged(6)  # the judged ones first, in input order
    # room for 2 samples at once: a sample waiting on the judge must not hold its place
    cfg = PipelineConfig(io_workers=1, max_in_flight=1, lookahead=1)
    policy = guard(timeout_s=3.0, max_failures=100)  # seconds of room for the others
    records, _ = run_pipeline(tmp_path, engine, samples, policy, cfg)
    order = [r.id[0] for r in records]
    assert sorted(order) == ["j"] * 4 + ["u"] * 6
    assert order == ["u"] * 6 + ["j"] * 4, f"stored in this order: {order}"
    assert all(r.score.value == 1.0 for r in records if r.id[0] == "u")


# -- a dead judge in a run: recorded and reported ------------------------------------------


def test_a_run_with_a_dead_judge_reports_it_and_counts_the_unjudged(tmp_path: Path) -> None:
    jc = JudgeConfig(
        model="dead", engine="openai", timeout_s=TIMEOUT, retries=0, concurrency=1, max_failures=2
    )
    records = run_vcrbench(tmp_path, jc, "dead", judge_engine=SleepyJudge(delay_s=None))
    by = {r.id: r for r in records}
    # the choice questions keep their scores; the judged ones are not scored, never 0
    assert [by[i].score.value for i in "123"] == [1.0, 0.0, 1.0]
    assert by["4"].score.value is None and by["5"].score.value is None
    notes = summary(load_run(tmp_path / "runs" / "dead", bootstrap=0)).notes
    down = [n for n in notes if "judge was down" in n]
    assert down == [
        "VCR-Bench: the judge was down: 5 sample(s) left unjudged "
        "(judge unavailable or failed; not scored, never 0)"
    ], notes


def test_the_sync_baseline_awaits_the_judge_too(tmp_path: Path) -> None:
    """``run_sync`` (mode: sync) judges on the loop, not through the refused sync path."""
    engine = SleepyJudge(delay_s=0.05)

    async def main() -> None:
        judge = LLMJudge(engine, model="m", loop=asyncio.get_running_loop(), guard=guard())
        with Store(tmp_path / "b.jsonl") as store:
            pipe = Pipeline(ModelEngine(), prepare, make_scorer(None, judge), store)
            await asyncio.wait_for(pipe.run_sync(judged(4) + unjudged(2)), timeout=60)

    asyncio.run(main())
    with Store(tmp_path / "b.jsonl") as store:
        assert [r.score.value for r in store.records()] == [1.0] * 6
    assert engine.max_active == 4  # the batch's judged samples at once
