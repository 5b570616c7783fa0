"""``evalkit run --data FILE`` end to end: known rows run under their benchmark's spec,
invalid rows are recorded in the run directory, and the report aggregates officially."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.engines.base import Completion, Request, Timings
from evalkit.reports.load import load_run
from evalkit.run.config import RunConfig
from evalkit.run.execute import execute
from evalkit.rundir import RunDir
from tests.fixtures.bench.media import tiny_video


class LetterA:
    """Answers "A" to everything."""

    async def generate(self, request: Request) -> Completion:
        return Completion(request_id=request.id, texts=["A"], timings=Timings())

    async def close(self) -> None:
        return None


def _row(pid: int, qtype: str, answer: str, **kw: Any) -> dict[str, Any]:
    return {
        "data_type": "video",
        "data_source": "VSIBench",
        "problem_type": "multiple choice",
        "original_question_type": qtype,
        "path": "./scannet/scene0001_00.mp4",
        "problem": f"question {pid}?",
        "problem_id": pid,
        "options": ["A. left", "B. right", "C. back"],
        "solution": f"<answer>{answer}</answer>",
        **kw,
    }


@pytest.fixture
def run(tmp_path: Path) -> Path:
    tiny_video(tmp_path / "data" / "scannet" / "scene0001_00.mp4", n_frames=8)
    rows = [
        _row(1, "object_rel_direction_easy", "A"),
        _row(2, "object_rel_direction_medium", "B"),
        _row(3, "object_rel_direction_hard", "A"),
        _row(4, "route_planning", "A"),
        _row(5, "route_planning", "C"),
        _row(6, "route_planning", "A", options=["A. x", "A. y"]),  # invalid: letters repeat
    ]
    data = tmp_path / "data" / "vsibench.json"
    data.write_text(json.dumps(rows))
    cfg = RunConfig(
        model="letter-a",
        data=str(data),
        cache_root=str(tmp_path / "cache"),
        cache_workers=1,
        runs_dir=str(tmp_path / "runs"),
        run_id="data",
    )
    return execute(cfg, engine=LetterA()).path


def test_invalid_rows_are_recorded_in_the_run_directory(run: Path) -> None:
    (problem,) = RunDir(run).problems("VSI-Bench (vsibench.json)")
    assert (problem["row"], problem["field"], problem["level"]) == ("item 5", "options", "error")
    assert problem["reason"] == "option letters ['A', 'A'] repeat A"


def test_the_report_aggregates_known_rows_officially_and_counts_invalid_ones(run: Path) -> None:
    report = load_run(run, bootstrap=0)
    (bench,) = report.benchmarks.values()
    assert bench.name == "VSI-Bench (vsibench.json)"
    assert bench.official and bench.aggregation == "merged_macro_mean"
    # "A" is right for rows 1, 3, 4: rel_direction (100, 0, 100) -> 66.7; route 50
    assert bench.overall == pytest.approx((200 / 3 + 50) / 2)
    assert bench.counts.invalid == 1 and bench.counts.total == 5
    assert "1 invalid row(s) not loaded (listed in invalid/)" in bench.notes
    assert any("aggregated by its official merged_macro_mean" in n for n in bench.notes)


def test_rows_of_no_known_benchmark_keep_the_pooled_mean_labelled_as_such(tmp_path: Path) -> None:
    from evalkit.reports.load import ADHOC_AGGREGATION

    tiny_video(tmp_path / "data" / "scannet" / "scene0001_00.mp4", n_frames=8)
    rows = [_row(i, "", "A" if i < 2 else "B", data_source="MyOwnSet") for i in range(3)]
    data = tmp_path / "data" / "mine.json"
    data.write_text(json.dumps(rows))
    cfg = RunConfig(
        model="letter-a",
        data=str(data),
        cache_root=str(tmp_path / "cache"),
        cache_workers=1,
        runs_dir=str(tmp_path / "runs"),
        run_id="mine",
    )
    (bench,) = load_run(execute(cfg, engine=LetterA()).path, bootstrap=0).benchmarks.values()
    assert (bench.name, bench.official, bench.aggregation) == ("mine", False, ADHOC_AGGREGATION)
    assert bench.overall == pytest.approx(200 / 3)
    assert any("no known benchmark" in n for n in bench.notes)
