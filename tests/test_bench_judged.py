"""LLM-judged benchmarks: without a judge they are reported partially scored (never 0);
with one, any Engine grades them through the scorers' judge."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evalkit.bench.aggregations import AggregateResult, Scored, aggregate
from evalkit.bench.loader import load
from evalkit.bench.registry import get_benchmark
from evalkit.engines.base import Completion, Request, Timings
from evalkit.prompts import PROMPTS_DIR
from evalkit.scoring import LLMJudge, ScoringContext, score
from evalkit.scoring.context import NO_CONTEXT
from tests.fixtures.bench import official_reasoning_streaming


class ExactJudge:
    """A judge Engine that says 1 when the candidate equals the reference verbatim."""

    model = "exact-judge"

    async def generate(self, request: Request) -> Completion:
        ref = re.search(r"Reference answer: (.*)", request.text)
        got = re.search(r"Candidate answer: (.*)", request.text)
        same = bool(ref and got and ref.group(1).strip() == got.group(1).strip())
        return Completion(
            request_id=request.id,
            texts=[f"Compared.\nVERDICT: {int(same)}"],
            prompt_tokens=1,
            output_tokens=1,
            timings=Timings(),
        )

    async def close(self) -> None:
        return None


def _run(
    name: str, root: Path, replies: dict[str, str], ctx: ScoringContext = NO_CONTEXT
) -> AggregateResult:
    spec = get_benchmark(name)
    out = []
    for s in load(spec, root):
        got = score(s, replies[s.id], ctx)
        out.append(Scored(s, got.value, got.metadata))
    return aggregate(spec, out)


VCR_REPLIES = {"1": "A", "2": "C", "3": "C", "4": "[2.0, 5.0]", "5": "four"}
VRB_REPLIES = {
    "cup/q1": "2nd: (a2, c2)",
    "cup/q2": "a1, b2",
    "file_sys/q3": "two files",
    "file_sys/q4": "4",
    "file_sys/q5": "mv path0/a.txt path1",
}


@pytest.mark.parametrize("name", ["VCR-Bench", "VideoReasonBench"])
def test_judged_specs_name_their_default_judge_and_prompt(name: str) -> None:
    judge = get_benchmark(name).judge
    assert judge is not None and judge.model.startswith("gpt-4o") and judge.source
    assert (PROMPTS_DIR / f"{judge.prompt}.jinja").is_file()


def test_vcrbench_rows_become_choice_or_judged_samples(tmp_path: Path) -> None:
    by = {
        s.id: s
        for s in load(get_benchmark("VCR-Bench"), official_reasoning_streaming.vcrbench(tmp_path))
    }
    assert by["1"].task_type == "multiple_choice" and by["4"].task_type == "llm_judge"
    assert by["1"].question == "Question 1?"  # the embedded option lines are cut off
    assert by["1"].options == [f"option {k}1" for k in "ABCD"] and by["4"].options == []
    assert by["4"].target == "[2.0, 5.0]"
    assert by["2"].media[0].path.endswith("v1/video/COIN/clip2.mp4")


def test_vcrbench_without_a_judge_is_partially_scored(tmp_path: Path) -> None:
    res = _run("VCR-Bench", official_reasoning_streaming.vcrbench(tmp_path), VCR_REPLIES)
    assert (res.n, res.n_scored, res.n_unscored) == (5, 3, 2)
    assert res.overall == pytest.approx(200 / 3)  # the 3 choice questions only, not 2/5 as 0
    # the judged dimensions are absent (unscored), not 0
    assert res.breakdowns["dimension"] == {
        "Fundamental Temporal Reasoning": 100.0,
        "Video Temporal Counting": 0.0,
    }
    assert res.breakdowns["duration_group"] == {"0-60": 100.0, "60-300": 0.0, "300+": 100.0}


def test_videoreasonbench_without_a_judge_has_no_number_at_all(tmp_path: Path) -> None:
    res = _run(
        "VideoReasonBench", official_reasoning_streaming.videoreasonbench(tmp_path), VRB_REPLIES
    )
    assert (res.n, res.n_scored, res.n_unscored) == (5, 0, 5)
    assert res.overall is None and res.breakdowns["level"] == {}


def test_videoreasonbench_rows_from_keyed_question_files(tmp_path: Path) -> None:
    spec = get_benchmark("VideoReasonBench")
    by = {s.id: s for s in load(spec, official_reasoning_streaming.videoreasonbench(tmp_path))}
    assert sorted(by) == ["cup/q1", "cup/q2", "file_sys/q3", "file_sys/q4", "file_sys/q5"]
    assert by["cup/q2"].fields["skill"] == "infer_state"  # order_state, merged as upstream
    assert by["cup/q2"].fields["state_size"] == "2" and by["cup/q2"].fields["level"] == "infer"
    assert by["file_sys/q5"].fields["needs_simulation"] is True
    assert by["cup/q1"].media[0].path.endswith("videos/cup/s1.mp4")


def test_with_a_judge_engine_every_sample_is_scored(tmp_path: Path) -> None:
    ctx = ScoringContext(LLMJudge(ExactJudge(), model="exact-judge"))
    res = _run(
        "VCR-Bench", official_reasoning_streaming.vcrbench(tmp_path / "vcr"), VCR_REPLIES, ctx
    )
    assert (res.n_scored, res.n_unscored) == (5, 0)
    assert res.overall == pytest.approx(60.0)  # 1, 0, 1 (choice) + 1, 0 (judged)
    assert res.breakdowns["duration_group"] == pytest.approx(
        {"0-60": 100.0, "60-300": 0.0, "300+": 100.0}
    )
    res = _run(
        "VideoReasonBench",
        official_reasoning_streaming.videoreasonbench(tmp_path / "vrb"),
        VRB_REPLIES,
        ctx,
    )
    # q5 (prediction_operation) has no reference to judge against: not scored, counted
    assert (res.n, res.n_scored, res.n_unscored) == (5, 4, 1)
    assert res.overall == 75.0  # q1, q3, q4 right; q2 wrong
    assert res.breakdowns["level"] == {"recall": 100.0, "infer": 0.0, "predict": 100.0}
    assert res.breakdowns["demo"] == {"cup": 50.0, "file_sys": 100.0}
    assert res.breakdowns["num_operation_group"] == pytest.approx({"5-9": 100.0, "10-14": 50.0})
