"""The LLM judge: prompt from prompts/, verdict parsing, cache, sync and async paths."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from evalkit.engines.base import Completion, Request
from evalkit.scoring import LLMJudge, ScoringContext, ascore, score
from evalkit.scoring.judge import parse_verdict

from ._scoring_helpers import sample


@dataclass
class FakeJudgeEngine:
    """Answers every judge prompt with the next scripted reply; records the prompts."""

    replies: list[str]
    prompts: list[str] = field(default_factory=list)

    async def generate(self, request: Request) -> Completion:
        self.prompts.append(request.text)
        return Completion(request_id=request.id, texts=[self.replies[len(self.prompts) - 1]])

    async def close(self) -> None:
        pass


def test_without_a_judge_the_sample_is_not_scored_rather_than_zero() -> None:
    s = score(sample("llm_judge", "a cat"), "a dog")
    assert s.value is None and "no judge" in s.explanation


def test_the_judge_renders_its_prompt_and_records_the_judgement(tmp_path: Path) -> None:
    engine = FakeJudgeEngine(["Same meaning.\nVERDICT: 1"])
    ctx = ScoringContext(LLMJudge(engine, model="fake-judge", cache_dir=tmp_path))
    s = score(sample("llm_judge", "a cat"), "<think>hmm</think><answer>a kitten</answer>", ctx)
    assert s.value == 1.0
    assert s.metadata["judgement"] == "Same meaning.\nVERDICT: 1"
    assert "Reference answer: a cat" in engine.prompts[0]
    assert "Candidate answer: a kitten" in engine.prompts[0]  # the answer, not the thinking


def test_verdicts_are_cached_by_model_and_prompt(tmp_path: Path) -> None:
    engine = FakeJudgeEngine(["VERDICT: 0", "VERDICT: 1"])
    ctx = ScoringContext(LLMJudge(engine, model="m1", cache_dir=tmp_path))
    first = score(sample("llm_judge", "a cat"), "a dog", ctx)
    again = score(sample("llm_judge", "a cat"), "a dog", ctx)
    assert (first.value, again.value) == (0.0, 0.0)
    assert len(engine.prompts) == 1 and again.metadata["cached"] is True
    # another model judges anew
    ctx = ScoringContext(LLMJudge(engine, model="m2", cache_dir=tmp_path))
    assert score(sample("llm_judge", "a cat"), "a dog", ctx).value == 1.0
    assert len(engine.prompts) == 2


def test_a_damaged_cache_entry_is_judged_again(tmp_path: Path) -> None:
    engine = FakeJudgeEngine(["VERDICT: 1", "VERDICT: 1"])
    ctx = ScoringContext(LLMJudge(engine, model="m", cache_dir=tmp_path))
    score(sample("llm_judge", "x"), "y", ctx)
    for f in tmp_path.rglob("*.json"):
        f.write_text("{torn")
    assert score(sample("llm_judge", "x"), "y", ctx).value == 1.0
    assert len(engine.prompts) == 2


def test_an_unparsable_judgement_is_not_scored() -> None:
    ctx = ScoringContext(LLMJudge(FakeJudgeEngine(["I am not sure."]), model="m"))
    assert score(sample("llm_judge", "x"), "y", ctx).value is None


def test_graded_verdicts_are_scaled_to_one() -> None:
    ctx = ScoringContext(LLMJudge(FakeJudgeEngine(["VERDICT: 7"]), model="m", graded=True))
    assert score(sample("llm_judge", "x"), "y", ctx).value == pytest.approx(0.7)
    assert parse_verdict("VERDICT: 11", graded=True) is None


def test_async_callers_await_the_judge_on_their_own_loop() -> None:
    engine = FakeJudgeEngine(["VERDICT: 1"])

    async def main() -> float | None:
        ctx = ScoringContext(LLMJudge(engine, model="m", loop=asyncio.get_running_loop()))
        return (await ascore(sample("judge", "x"), "y", ctx)).value

    assert asyncio.run(main()) == 1.0


def test_the_sync_path_uses_the_engine_loop_from_another_thread() -> None:
    engine = FakeJudgeEngine(["VERDICT: 1"])

    async def main() -> float | None:
        ctx = ScoringContext(LLMJudge(engine, model="m", loop=asyncio.get_running_loop()))
        # As the pipeline's sink does: score in a worker thread while the loop runs.
        got = await asyncio.to_thread(score, sample("llm_judge", "x"), "y", ctx)
        return got.value

    assert asyncio.run(main()) == 1.0
