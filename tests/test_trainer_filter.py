"""Pass-rate filtering: k scored samples per item, keep 0 < rate < 1, histogram outputs."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from evalkit.engines.base import Completion, Request, SamplingParams
from evalkit.sample import Sample
from evalkit.trainer.filter import histogram, keep, pass_rates, write_outputs


@dataclass
class AnswerEngine:
    """Test engine: returns chosen answers per request id (cycled over the n samples)."""

    answers: dict[str, list[str]]
    seen_n: list[int] = field(default_factory=list)

    async def generate(self, request: Request) -> Completion:
        self.seen_n.append(request.sampling.n)
        pool = self.answers[request.id]
        texts = [pool[i % len(pool)] for i in range(request.sampling.n)]
        return Completion(request.id, texts, token_ids=[[1]] * len(texts))

    async def close(self) -> None:
        pass


def _sample(i: int) -> Sample:
    return Sample(id=f"s{i}", task_type="boolean", question="?", target="Yes")


def _build(sample: Sample) -> Request:
    return Request(id=sample.id, text=sample.question)


def test_pass_rate_is_the_mean_score_over_k_samples() -> None:
    right, wrong = "<think>.</think><answer>Yes</answer>", "<think>.</think><answer>No</answer>"
    engine = AnswerEngine({"s0": [right], "s1": [wrong], "s2": [right, wrong, wrong, wrong]})
    rates = pass_rates([_sample(i) for i in range(3)], engine, _build, k=4, concurrency=2)
    assert rates == [1.0, 0.0, 0.25]
    assert engine.seen_n == [4, 4, 4]


def test_only_items_sometimes_solved_are_kept() -> None:
    assert [keep(r) for r in (0.0, 0.125, 0.875, 1.0)] == [False, True, True, False]


def test_outputs_kept_rows_and_histogram(tmp_path: Path) -> None:
    rows = [{"problem_id": f"q{i}"} for i in range(4)]
    report = write_outputs(rows, [0.0, 0.5, 1.0, 0.25], 4, tmp_path / "kept.jsonl")
    kept = [json.loads(line) for line in (tmp_path / "kept.jsonl").read_text().splitlines()]
    assert kept == [{"problem_id": "q1"}, {"problem_id": "q3"}]
    assert report.kept == [1, 3]
    summary = json.loads((tmp_path / "kept.hist.json").read_text())
    assert summary["passes_histogram"] == {"0": 1, "1": 1, "2": 1, "3": 0, "4": 1}
    assert summary["kept"] == 2 and summary["items"] == 4
    assert (tmp_path / "kept.hist.png").read_bytes()[:4] == b"\x89PNG"


def test_histogram_counts_passes() -> None:
    assert histogram([0.0, 0.0, 0.5, 1.0], 2) == {0: 2, 1: 1, 2: 1}


def test_sampling_settings_reach_the_engine() -> None:
    seen: list[SamplingParams] = []

    class Spy(AnswerEngine):
        async def generate(self, request: Request) -> Completion:
            seen.append(request.sampling)
            return await super().generate(request)

    pass_rates([_sample(0)], Spy({"s0": ["Yes"]}), _build, 3, SamplingParams(temperature=0.7))
    assert seen[0].n == 3 and seen[0].temperature == 0.7
