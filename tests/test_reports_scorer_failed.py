"""A scorer that raises is reported as "scorer failed", never as a silent 0.

The run is written by the real pipeline (scripted engine, the run's scorer) for a
test-only task type whose scorer raises on the reply "boom" and whose one other
extraction rule raises on the reply "B":

    id  reply   headline scorer      other rule           record
    s1  "C"     1 (C)                1 (C)                ok
    s2  "boom"  raises KeyError      0 (boom)             failed, stage score, traceback
    s3  "B"     0 (B)                raises ValueError    ok, rule verdict with an error
    s4  engine failure                                    failed, stage engine (0)

The ad-hoc benchmark's pooled mean (failed samples count as 0 by default) is 1/3 = 33.33:
s2 is left out. Were the scorer's failure a 0 it would be 1/4 = 25.00.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from evalkit.engines.base import Request
from evalkit.pipeline import Pipeline, PipelineConfig
from evalkit.reports import build_report, load_run, write_report
from evalkit.run.components import make_scorer
from evalkit.sample import Sample
from evalkit.scoring import Score, score
from evalkit.testing.runs import open_run
from tests._registered import task_type
from tests.scripted_engine import ScriptedEngine

TASK = "scorer_failure_test"
RULE = "scorer_failure_test_rule"
BENCH = "scorer-failure-bench"
REPLIES = {"s1": "C", "s2": "boom", "s3": "B", "s4": "C"}


def _raises_on_boom(prediction: str, target: Any, sample: Sample) -> Score:
    """The reply as the answer; a bug (KeyError) on the reply "boom"."""
    letter = prediction.strip()
    {"A": 0, "B": 1, "C": 2}[letter]  # the bug under test: "boom" is not a key
    return Score(float(letter == target), letter, "exact")


def _raises_on_b(prediction: str, target: Any, sample: Sample) -> Score:
    """The reply as the answer; a bug (ValueError) on the reply "B"."""
    if prediction.strip() == "B":
        raise ValueError("rule bug on B")
    return Score(float(prediction.strip() == target), prediction.strip(), "exact")


@pytest.fixture(autouse=True)
def _registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with task_type(monkeypatch, TASK, _raises_on_boom, **{RULE: _raises_on_b}):
        yield


def _samples() -> list[Sample]:
    return [
        Sample(id=sid, task_type=TASK, question=f"q {sid}", target="C", benchmark=BENCH)
        for sid in REPLIES
    ]


def _prepare(sample: Sample) -> Request:
    return Request(id=sample.id, text=sample.question, metadata={"answer": REPLIES[sample.id]})


@pytest.fixture
def failing_run(tmp_path: Path) -> Path:
    run, fp, _ = open_run(tmp_path / "run", "/ckpt/model", [BENCH])
    engine = ScriptedEngine(prefill_s=0.0, decode_s=0.0, fail_ids={"s4"})
    with run.store(BENCH) as store:
        cfg = PipelineConfig(max_retries=0)
        pipe = Pipeline(engine, _prepare, make_scorer(None), store, cfg, fp)
        asyncio.run(pipe.run(_samples()))
    return run.path


def _records(run: Path) -> dict[str, dict[str, Any]]:
    lines = (run / f"{BENCH}.jsonl").read_text().splitlines()
    return {r["id"]: r for r in map(json.loads, lines)}


def test_score_flags_a_raising_scorer_instead_of_scoring_0() -> None:
    got = score(_samples()[1], "boom")
    assert got.value is None and got.failed is not None
    assert got.failed.error == "KeyError: 'boom'"
    assert "_raises_on_boom" in got.failed.traceback
    assert got.explanation == "scorer failed: KeyError: 'boom'"


def test_the_sample_is_recorded_as_failed_at_stage_score_with_its_traceback(
    failing_run: Path,
) -> None:
    recs = _records(failing_run)
    s2 = recs["s2"]
    assert (s2["status"], s2["stage"], s2["error"]) == ("failed", "score", "KeyError: 'boom'")
    assert s2["prediction"] == "boom" and s2["score"] is None
    assert "Traceback" in s2["traceback"] and "_raises_on_boom" in s2["traceback"]
    assert recs["s1"]["status"] == "ok" and recs["s1"]["score"]["value"] == 1.0
    assert "traceback" not in recs["s4"] and recs["s4"]["stage"] == "engine"


def test_another_rule_that_raises_keeps_an_error_verdict_not_a_0(failing_run: Path) -> None:
    s3 = _records(failing_run)["s3"]
    assert s3["status"] == "ok" and s3["score"]["value"] == 0.0
    assert s3["rules"][RULE] == {
        "value": None,
        "answer": None,
        "error": "scorer failed: ValueError: rule bug on B",
    }


def test_the_aggregate_leaves_the_scorer_failure_out_instead_of_counting_0(
    failing_run: Path,
) -> None:
    b = load_run(failing_run, bootstrap=10).benchmarks[BENCH]
    assert b.counts.scorer_failed == {"s2": "KeyError: 'boom'"}
    assert (b.counts.failed, b.counts.failed_by_stage) == (2, {"score": 1, "engine": 1})
    assert b.overall == pytest.approx(100 / 3)  # s1 1, s3 0, s4 0 (engine failure); not s2
    assert "1 failed sample(s) count as wrong (0) in the aggregate" in b.notes
    (rule_row,) = [r for r in b.sensitivity.rows if r.rule == RULE] if b.sensitivity else []
    assert (rule_row.errors, rule_row.changed, rule_row.compared) == (1, 0, 2)


def _expect_scorer_failed(text: str) -> None:
    assert "Scorer failed" in text
    assert "scorer failed on 1 sample(s) (s2)" in text
    assert "KeyError: 'boom'" in text
    assert f"rule {RULE} failed (raised) on 1 sample(s) (s3)" in text
    assert "count as wrong (0) (scorer failures are always left out)" in text


def test_terminal_markdown_and_html_reports_show_scorer_failed_with_ids(
    failing_run: Path, tmp_path: Path
) -> None:
    report = build_report([failing_run], bootstrap=10)
    console = Console(record=True, width=400)
    files = write_report(report, tmp_path / "out", ["table", "md", "html", "json"], console)
    terminal = console.export_text()
    _expect_scorer_failed(terminal)
    _expect_scorer_failed(files["md"].read_text())
    page = files["html"].read_text()
    _expect_scorer_failed(page.replace("&#x27;", "'"))
    assert "<td>s2</td>" in page
    counts = json.loads(files["json"].read_text())["runs"][0]["benchmarks"][BENCH]["counts"]
    assert counts["scorer_failed"] == {"s2": "KeyError: 'boom'"}
