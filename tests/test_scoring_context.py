"""The judge travels in a ScoringContext: per benchmark, never process-wide, awaited."""

from __future__ import annotations

import asyncio

import pytest

from evalkit.bench.registry import get_benchmark
from evalkit.engines.base import Completion
from evalkit.run.components import make_scorer
from evalkit.sample import Sample
from evalkit.scoring import LLMJudge, ScoringContext, score
from evalkit.scoring.judge import LLMJudge as JudgeClass

from .test_scoring_judge import FakeJudgeEngine


def _judged() -> Sample:
    return Sample(id="j", task_type="llm_judge", question="q", target="x")


def test_each_benchmark_gets_the_judge_with_its_own_prompt_and_the_runs_is_untouched() -> None:
    judge = LLMJudge(FakeJudgeEngine([]), model="m")
    mmvu = get_benchmark("MMVU")
    assert mmvu.judge is not None
    other = mmvu.model_copy(update={"judge": mmvu.judge.model_copy(update={"prompt": "strict"})})
    first, second = make_scorer(mmvu, judge), make_scorer(other, judge)
    assert first.ctx.judge is not None and second.ctx.judge is not None
    assert (first.ctx.judge.template, second.ctx.judge.template) == ("judge.jinja", "strict.jinja")
    assert judge.template == "judge.jinja"  # the run's judge is not rewritten per benchmark
    assert second.ctx.judge.guard is judge.guard  # one breaker for the run's judge engine


def test_a_judge_in_one_context_is_not_seen_by_a_call_without_it() -> None:
    ctx = ScoringContext(LLMJudge(FakeJudgeEngine(["VERDICT: 1"]), model="m"))
    assert score(_judged(), "y", ctx).value == 1.0
    alone = score(_judged(), "y")
    assert alone.value is None and "no judge" in alone.explanation


def test_the_run_scorer_awaits_the_judge_on_the_loop_without_a_thread_bridge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def bridged(self: JudgeClass, coro: object) -> None:
        raise AssertionError("the pipeline's scorer bridged to the loop from a thread")

    monkeypatch.setattr(JudgeClass, "_run", bridged)
    engine = FakeJudgeEngine(["VERDICT: 1"])

    async def main() -> float | None:
        scorer = make_scorer(None, LLMJudge(engine, model="m", loop=asyncio.get_running_loop()))
        assert scorer.awaits(_judged())
        got = await scorer.ascore(_judged(), Completion(request_id="j", texts=["y"]))
        return got.score.value

    assert asyncio.run(main()) == 1.0
    assert len(engine.prompts) == 1
