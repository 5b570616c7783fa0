"""A run directory written by the real pipeline (scripted engine) reports correctly."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from evalkit.engines.base import Completion, Request
from evalkit.errors import VideoError
from evalkit.pipeline import Pipeline, PipelineConfig
from evalkit.reports import load_run
from evalkit.reports.timeline import spans, utilisation
from evalkit.sample import Sample
from evalkit.scoring.types import Score
from evalkit.testing.runs import open_run
from tests.scripted_engine import ScriptedEngine

DURATIONS = ("short", "medium", "long")


def _samples(n: int) -> list[Sample]:
    return [
        Sample(
            id=f"s{i:02d}",
            task_type="multiple_choice",
            question=f"q{i}",
            target="A",
            benchmark="Video-MME",
            fields={"duration": DURATIONS[i % 3]},
        )
        for i in range(n)
    ]


def _prepare(sample: Sample) -> Request:
    if sample.id == "s00":
        raise VideoError(f"/videos/{sample.id}.mp4", "truncated file")
    # every third sample gets a wrong answer; s05 is left unscored by the scorer
    answer = "B" if int(sample.id[1:]) % 3 == 1 else "A"
    return Request(id=sample.id, text=sample.question, metadata={"answer": answer})


def _score(sample: Sample, completion: Completion) -> Score:
    if sample.id == "s05":
        return Score(None, completion.text, "no judge configured")
    return Score(float(completion.text == sample.target), completion.text)


@pytest.fixture
def pipeline_run(tmp_path: Path) -> Path:
    run, fp, _ = open_run(tmp_path / "run", "/ckpt/Qwen2.5-VL-7B-Instruct", ["Video-MME"])
    engine = ScriptedEngine(prefill_s=0.002, decode_s=0.01, fail_ids={"s07"})
    cfg = PipelineConfig(max_in_flight=4, lookahead=4, max_retries=0)
    with run.store("Video-MME") as store:
        asyncio.run(Pipeline(engine, _prepare, _score, store, cfg, fp).run(_samples(24)))
    return run.path


def test_pipeline_records_aggregate_to_the_hand_counted_score(pipeline_run: Path) -> None:
    b = load_run(pipeline_run).benchmarks["Video-MME"]
    c = b.counts
    assert (c.total, c.scored, c.failed, c.unscored) == (24, 21, 2, 1)
    assert c.failed_by_stage == {"io": 1, "engine": 1}
    # wrong: s01 s04 s07(failed) s10 s13 s16 s19 s22 and s00 (failed) -> 9 wrong of 23
    assert b.overall == pytest.approx(100 * 14 / 23)
    # short = s00 s03 ... s21: s00 failed (counts 0), the other 7 are right
    assert b.result.breakdowns["duration"]["short"] == pytest.approx(100 * 7 / 8)


def test_stage_timeline_comes_from_the_recorded_timings(pipeline_run: Path) -> None:
    b = load_run(pipeline_run).benchmarks["Video-MME"]
    sp = spans(b.records, b.name)
    assert len(sp) == 24  # failed ones too, with the stamps they reached
    done = [s for s in sp if s.status == "ok"]
    assert all(
        s.io_start <= s.io_end <= s.submitted <= s.first_token <= s.finished  # type: ignore[operator]
        for s in done
    )
    u = utilisation(sp)
    assert u is not None and u.samples == 24
    assert 0 < u.busy_fraction <= 1 and 1 <= u.max_in_flight <= 4
    assert u.mean_in_flight <= u.max_in_flight
