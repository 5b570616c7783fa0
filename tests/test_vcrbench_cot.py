"""VCR-Bench's CoT score: per-sample recall / precision from a scripted judge, absent
(never 0) without a judge or with an unparsable reply, and the official aggregate
(eval_code/cau_total.py: F1 of the mean recall and the mean precision)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evalkit.bench.aggregations import AggregateResult, Scored, aggregate
from evalkit.bench.loader import load
from evalkit.bench.registry import get_benchmark
from evalkit.engines.base import Completion, Request, Timings
from evalkit.run.config import JudgeConfig
from evalkit.sample import Sample
from evalkit.scoring import LLMJudge, Score, ScoringContext, score
from evalkit.scoring.context import NO_CONTEXT
from evalkit.scoring.judge import parse_cot_steps
from tests.fixtures.bench import official_reasoning_streaming
from tests.test_bench_judged import VCR_REPLIES, ExactJudge
from tests.test_run_judge import run as run_vcrbench


def _steps(*pairs: tuple[str, str], fenced: bool = False) -> str:
    text = json.dumps([{"step": i + 1, "kind": k, "verdict": v} for i, (k, v) in enumerate(pairs)])
    return f"```json\n{text}\n```" if fenced else text


P, R, B = "perception", "reasoning", "background"
# (question, ask) -> the judge's reply. Per-sample figures, by hand:
#   q1 recall 1/2 (P ok, R miss)          precision 2/2 (background redundant left out)
#   q2 recall 1/3                         precision 1/2 (P wrong, R ok)
#   q3 recall absent (background only)    precision 1/1 (redundant P left out)
#   q4 recall unparsable                  precision 1/2
#   q5 recall 2/2                         precision 1/1 (fenced reply)
COT_REPLIES = {
    ("Question 1?", "recall"): _steps((P, "matched"), (R, "unmatched")),
    ("Question 1?", "precision"): _steps((P, "matched"), (R, "matched"), (B, "redundant")),
    ("Question 2?", "recall"): _steps((P, "unmatched"), (P, "unmatched"), (R, "matched")),
    ("Question 2?", "precision"): _steps((P, "wrong"), (R, "matched")),
    ("Question 3?", "recall"): _steps((B, "matched")),
    ("Question 3?", "precision"): _steps((R, "Match"), (P, "redundant")),
    ("Question 4?", "recall"): "I cannot compare these steps.",
    ("Question 4?", "precision"): _steps((P, "matched"), (R, "wrong")),
    ("Question 5?", "recall"): _steps((P, "matched"), (R, "matched")),
    ("Question 5?", "precision"): _steps((R, "matched"), fenced=True),
}


class CotJudge(ExactJudge):
    """A scripted judge Engine: CoT asks get canned step lists, answer asks an exact match."""

    model = "cot-judge"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def generate(self, request: Request) -> Completion:
        self.prompts.append(request.text)
        text = request.text
        if "Reference rationale" not in text:
            return await super().generate(request)
        question = re.search(r"Question:\n(.*)", text)
        ask = "recall" if "Go through EVERY step" in text else "precision"
        reply = COT_REPLIES[(question.group(1).strip() if question else "", ask)]
        return Completion(request_id=request.id, texts=[reply], timings=Timings())


def _scores(root: Path, ctx: ScoringContext = NO_CONTEXT) -> dict[str, tuple[Sample, Score]]:
    samples = load(get_benchmark("VCR-Bench"), root)
    return {s.id: (s, score(s, VCR_REPLIES[s.id], ctx)) for s in samples}


def _cot_judge() -> ScoringContext:
    return ScoringContext(LLMJudge(CotJudge(), model="cot-judge"))


def _aggregate(scores: dict[str, tuple[Sample, Score]]) -> AggregateResult:
    scored = [Scored(s, got.value, got.metadata) for s, got in scores.values()]
    return aggregate(get_benchmark("VCR-Bench"), scored)


def test_samples_keep_the_reference_steps(tmp_path: Path) -> None:
    by = {
        s.id: s
        for s in load(get_benchmark("VCR-Bench"), official_reasoning_streaming.vcrbench(tmp_path))
    }
    assert by["1"].fields["reasoning"] == ["1. step", "2. step"]
    assert by["4"].fields["extra_metrics"] == ["cot_steps"]


def test_the_judge_is_asked_about_the_reference_steps_and_the_whole_response(
    tmp_path: Path,
) -> None:
    engine = CotJudge()
    ctx = ScoringContext(LLMJudge(engine, model="cot-judge"))
    sample = next(
        s for s in load(get_benchmark("VCR-Bench"), official_reasoning_streaming.vcrbench(tmp_path))
    )
    score(sample, "<think>first I look</think><answer>A</answer>", ctx)
    asks = [p for p in engine.prompts if "Reference rationale" in p]
    assert len(asks) == 2 and all("1. step\n2. step" in p for p in asks)
    assert all("first I look" in p and "A. option A1" in p for p in asks)


def test_per_sample_recall_and_precision_from_the_judge(tmp_path: Path) -> None:
    scores = _scores(official_reasoning_streaming.vcrbench(tmp_path), _cot_judge())
    got = {k: v.metadata for k, (_, v) in scores.items()}
    assert (got["1"]["cot_recall"], got["1"]["cot_precision"]) == (0.5, 1.0)
    assert got["1"]["cot_recall_perception"] == 1.0 and got["1"]["cot_recall_reasoning"] == 0.0
    assert got["1"]["cot_efficiency"] == pytest.approx(2 / 3)
    assert got["2"]["cot_recall"] == pytest.approx(1 / 3) and got["2"]["cot_precision"] == 0.5
    assert got["2"]["cot_precision_perception"] == 0.0
    assert got["3"]["cot_recall"] is None and got["3"]["cot_precision"] == 1.0
    assert got["3"]["cot_precision_perception"] is None  # only a redundant step
    assert got["5"]["cot_precision"] == 1.0 and got["5"]["cot_recall"] == 1.0
    assert got["1"]["cot_recall_steps"] == [[P, "matched"], [R, "unmatched"]]


def test_an_unparsable_reply_leaves_its_figures_absent_with_the_reason(tmp_path: Path) -> None:
    _, got = _scores(official_reasoning_streaming.vcrbench(tmp_path), _cot_judge())["4"]
    assert got.metadata["cot_recall"] is None and got.metadata["cot_precision"] == 0.5
    assert "recall: reply is not a JSON step list" in got.explanation
    assert got.metadata["cot_recall_judgement"] == "I cannot compare these steps."


def test_without_a_judge_cot_is_absent_and_accuracy_unchanged(tmp_path: Path) -> None:
    scores = _scores(official_reasoning_streaming.vcrbench(tmp_path))
    for _, got in scores.values():
        assert got.metadata["cot_recall"] is None and got.metadata["cot_precision"] is None
        assert "no judge configured" in got.explanation
    assert [got.value for _, got in scores.values()] == [1.0, 0.0, 1.0, None, None]
    res = _aggregate(scores)
    assert res.overall == pytest.approx(200 / 3)  # as before: the 3 choice questions
    assert res.metrics["cot_missing"] == 5.0
    assert not any(k.startswith(("cot_f1", "cot_recall", "cot_precision")) for k in res.metrics)


def test_aggregate_is_f1_of_the_mean_recall_and_mean_precision(tmp_path: Path) -> None:
    res = _aggregate(_scores(official_reasoning_streaming.vcrbench(tmp_path), _cot_judge()))
    assert res.overall == pytest.approx(60.0)  # accuracy as with the plain judge
    recall, precision = 11 / 18, 4 / 5  # mean over q1, q2, q5 / over all five
    assert res.metrics["cot_recall"] == pytest.approx(100 * recall)
    assert res.metrics["cot_precision"] == pytest.approx(100 * precision)
    assert res.metrics["cot_f1"] == pytest.approx(100 * 88 / 127)  # 2PR/(P+R), not mean F1
    assert res.metrics["cot_recall_perception"] == pytest.approx(100 * 2 / 3)
    assert res.metrics["cot_precision_perception"] == pytest.approx(100 * 2 / 3)
    assert res.metrics["cot_precision_reasoning"] == pytest.approx(80.0)
    assert res.metrics["cot_f1_reasoning"] == pytest.approx(100 * 2 * (2 / 3 * 0.8) / (2 / 3 + 0.8))
    assert (res.metrics["cot_n_recall"], res.metrics["cot_n_precision"]) == (3.0, 5.0)
    assert res.metrics["cot_missing"] == 2.0  # q3 and q4 lack a recall


def test_parse_rejects_unknown_verdicts_and_kinds() -> None:
    ok = frozenset({"matched", "unmatched"})
    assert parse_cot_steps('[{"kind": "reasoning", "verdict": "maybe"}]', ok) is None
    assert parse_cot_steps('[{"kind": "opinion", "verdict": "matched"}]', ok) is None
    assert parse_cot_steps("[]", ok) is None
    assert parse_cot_steps('Here: [{"kind": "Perception", "verdict": "Matched"}]', ok) == [
        (P, "matched")
    ]


def test_evalkit_run_records_the_cot_figures(tmp_path: Path) -> None:
    judge = JudgeConfig(model="cot-judge", engine="openai")
    records = run_vcrbench(tmp_path, judge, "cot", judge_engine=CotJudge())
    meta = {r.id: r.score.metadata for r in records}
    assert (meta["1"]["cot_recall"], meta["2"]["cot_precision"]) == (0.5, 0.5)
    assert meta["4"]["cot_recall"] is None and "cot_error" in meta["4"]


def test_parsed_cot_replies_are_cached_and_reused(tmp_path: Path) -> None:
    class Down:
        async def generate(self, request: Request) -> Completion:
            raise ConnectionError("judge is down")

    sample = next(
        s for s in load(get_benchmark("VCR-Bench"), official_reasoning_streaming.vcrbench(tmp_path))
    )
    judge = LLMJudge(CotJudge(), model="cot-judge", cache_dir=tmp_path / "judge_cache")
    first = judge.judge_cot(sample, "A", ["1. step", "2. step"])
    judge.engine = Down()  # type: ignore[assignment]
    again = judge.judge_cot(sample, "A", ["1. step", "2. step"])
    assert (again["cot_recall"], again["cot_precision"]) == (first["cot_recall"], 1.0)
    failed = judge.judge_cot(sample, "B", ["1. step", "2. step"])  # not cached: absent
    assert failed["cot_recall"] is None and "judge is down" in failed["cot_error"]


def test_async_callers_get_the_cot_figures_too(tmp_path: Path) -> None:
    """``ascore`` from a running loop: the judge runs on that loop, the figures arrive."""
    import asyncio

    from evalkit.scoring import ascore

    sample = next(
        s for s in load(get_benchmark("VCR-Bench"), official_reasoning_streaming.vcrbench(tmp_path))
    )

    async def go() -> Score:
        judge = LLMJudge(CotJudge(), model="cot-judge", loop=asyncio.get_running_loop())
        return await ascore(sample, VCR_REPLIES[sample.id], ScoringContext(judge))

    got = asyncio.run(go())
    assert (got.metadata["cot_recall"], got.metadata["cot_precision"]) == (0.5, 1.0)
