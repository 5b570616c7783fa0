"""VideoReasonBench's official rating (eval_huggingface.py evaluate / evaluate_operation,
utils/eval_utils.py extract_final_answer), traced by hand, and its all-rows aggregate."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from evalkit.bench.aggregate import Scored, aggregate
from evalkit.bench.registry import get_benchmark
from evalkit.engines.base import Completion, Request, Timings
from evalkit.sample import Sample
from evalkit.scoring import LLMJudge, configure_judge, score

from ._official_prompts import render_official

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


@pytest.fixture(autouse=True)
def no_judge() -> Iterator[None]:
    configure_judge(None)
    yield
    configure_judge(None)


def _sample(simulated: bool = False, skill: str = "order_operation") -> Sample:
    return Sample(
        id="cup/q1",
        task_type="llm_judge",
        question="What are the 2nd to 4th moves? Provide a summary after 'Final Answer:'",
        target="" if simulated else _REF,
        fields={"needs_simulation": simulated, "skill": skill, "level": "recall"},
    )


_THINK = "\u25c1think\u25b7"
_THINK_END = "\u25c1/think\u25b7"

NO_JUDGE_CASES = [
    ("I saw swaps. Final Answer: 2nd: (a2, c2)", False, None),  # judged: no judge, unscored
    ("no final answer here", False, 0.0),  # rated incorrect before any judge
    ("Final Answer", False, 0.0),  # nothing after it
    ("Final Answer:", False, None),  # ":" is text: it goes to the judge
    ("final answer: 2nd: (a2, c2)", False, 0.0),  # case-sensitive
    ("Final Answer: left, up", True, None),  # simulated upstream: not scored here
    ("left, up", True, 0.0),  # no final answer: incorrect even for simulated questions
    (f"{_THINK}Final Answer: x{_THINK_END} the moves", False, 0.0),  # only after the marker
    (f"{_THINK} hmm {_THINK_END} Final Answer: {_REF}", False, None),
    ("", False, 0.0),
]


@pytest.mark.parametrize(("reply", "simulated", "value"), NO_JUDGE_CASES)
def test_rating_without_a_judge(reply: str, simulated: bool, value: float | None) -> None:
    assert score(_sample(simulated), reply, rule="videoreasonbench").value == value


@pytest.fixture
def judge() -> ContainsJudge:
    engine = ContainsJudge()
    configure_judge(LLMJudge(engine, model=engine.model))
    return engine


JUDGED_CASES = [
    (f"Final Answer: {_REF}", 1.0),
    ("Final Answer: 1st: (b1, c2)", 0.0),
    # the FIRST "Final Answer" starts the text: the judge also sees the second one
    (f"Final Answer: unsure\nlet me recheck\nFinal Answer: {_REF}", 1.0),
]


@pytest.mark.parametrize(("reply", "value"), JUDGED_CASES)
def test_rating_with_a_judge(judge: ContainsJudge, reply: str, value: float) -> None:
    assert score(_sample(), reply, rule="videoreasonbench").value == value
    assert judge.calls == 1


def test_no_final_answer_is_wrong_without_asking_the_judge(judge: ContainsJudge) -> None:
    assert score(_sample(), "the moves were a2 and c2", rule="videoreasonbench").value == 0.0
    assert judge.calls == 0


def test_simulated_question_is_not_judged_against_its_empty_reference(
    judge: ContainsJudge,
) -> None:
    assert score(_sample(True), "Final Answer: left", rule="videoreasonbench").value is None
    assert score(_sample(True), "Final Answer: left").value is None  # evalkit's judge too
    assert judge.calls == 0


def test_videoreasonbench_is_the_headline_rule() -> None:
    assert get_benchmark("VideoReasonBench").headline_rule("llm_judge") == "videoreasonbench"


def test_overall_is_over_all_questions_simulated_ones_included() -> None:
    spec = get_benchmark("VideoReasonBench")
    rows = [
        Scored(_sample(), 1.0),
        Scored(_sample(), 0.0),
        Scored(_sample(True, "prediction_operation"), 0.0),  # no final answer: rated 0
        Scored(_sample(True, "prediction_operation"), None),  # needs the simulator
    ]
    got = aggregate(spec, rows)
    assert got.overall == pytest.approx(100 / 3)
    assert (got.n, got.n_scored, got.n_unscored) == (4, 3, 1)
    assert got.breakdowns["skill"] == {"order_operation": 50.0, "prediction_operation": 0.0}


def test_official_prompt_is_the_question_itself() -> None:
    s = _sample()
    assert render_official("VideoReasonBench", "llm_judge", s) == s.question
