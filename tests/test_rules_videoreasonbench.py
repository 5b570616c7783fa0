"""VideoReasonBench: the headline over all questions as utils/show_results.py computes it,
simulated (prediction_operation) questions unscored rather than judged against an empty
reference, and the question itself as the official prompt."""

from __future__ import annotations

import re

import pytest

from evalkit.bench.aggregations import Scored, aggregate
from evalkit.bench.registry import get_benchmark
from evalkit.engines.base import Completion, Request, Timings
from evalkit.sample import Sample
from evalkit.scoring import LLMJudge, ScoringContext, score
from evalkit.scoring.rules import has_rule
from tests._official_prompts import render_official

_REF = "2nd: (a2, c2)"


class ContainsJudge:
    """A judge Engine: VERDICT 1 when the candidate contains the reference (counts calls)."""

    model = "contains-judge"

    def __init__(self) -> None:
        self.calls = 0

    async def generate(self, request: Request) -> Completion:
        self.calls += 1
        ref = re.search(r"Reference answer: (.*)", request.text)
        got = re.search(r"Candidate answer: (.*)", request.text, re.DOTALL)
        same = bool(ref and got and ref.group(1).strip() in got.group(1))
        return Completion(
            request_id=request.id,
            texts=[f"VERDICT: {int(same)}"],
            prompt_tokens=1,
            output_tokens=1,
            timings=Timings(),
        )

    async def close(self) -> None:
        return None


def _sample(simulated: bool = False, skill: str = "order_operation") -> Sample:
    return Sample(
        id="cup/q1",
        task_type="llm_judge",
        question="What are the 2nd to 4th moves? Provide a summary after 'Final Answer:'",
        target="" if simulated else _REF,
        fields={"needs_simulation": simulated, "skill": skill, "level": "recall"},
    )


def test_judged_questions_keep_the_judge_and_have_no_extraction_rule() -> None:
    spec = get_benchmark("VideoReasonBench")
    assert not has_rule("videoreasonbench", "llm_judge")
    assert spec.headline_rule("llm_judge") == "evalkit"


def test_simulated_question_is_not_judged_against_its_empty_reference() -> None:
    engine = ContainsJudge()
    ctx = ScoringContext(LLMJudge(engine, model=engine.model))
    assert score(_sample(True), "Final Answer: left, up", ctx).value is None
    assert score(_sample(), f"Final Answer: {_REF}", ctx).value == 1.0
    assert engine.calls == 1  # only the question with a reference was judged


def test_without_a_judge_every_question_is_unscored() -> None:
    assert score(_sample(), f"Final Answer: {_REF}").value is None
    assert score(_sample(True), "Final Answer: left").value is None


def test_overall_is_over_all_questions_simulated_ones_included() -> None:
    spec = get_benchmark("VideoReasonBench")
    assert spec.aggregation.name == "mean"  # show_results.py: sum of ratings / all rated
    rows = [
        Scored(_sample(), 1.0),
        Scored(_sample(), 0.0),
        Scored(_sample(True, "prediction_operation"), 1.0),  # once rated (simulator)
        Scored(_sample(True, "prediction_operation"), None),  # not rated here
    ]
    got = aggregate(spec, rows)
    assert got.overall == pytest.approx(200 / 3)
    assert (got.n, got.n_scored, got.n_unscored) == (4, 3, 1)
    assert got.breakdowns["skill"] == {"order_operation": 50.0, "prediction_operation": 100.0}


def test_official_prompt_is_the_question_itself() -> None:
    s = _sample()
    assert render_official("VideoReasonBench", "llm_judge", s) == s.question
