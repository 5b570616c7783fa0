"""The report's per-replica timeline, from records that name their replica."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.reports import build_report, load_run, write_report
from evalkit.reports.replicas import NO_REPLICA, lanes
from evalkit.testing.runs import Rec, write_run

T0 = 1000.0
TITLE = "Per-replica timeline"


def _rec(i: int, replica: str | None, start: float, end: float, failed: bool = False) -> Rec:
    """A sample that ran from ``start`` to ``end`` seconds after T0 on ``replica``."""
    s, e = T0 + start, T0 + end
    timings = {"io_start": s, "io_end": s + 0.1, "submitted": s + 0.2}
    timings |= {"first_token": s + 0.3, "finished": e}
    return Rec(
        f"s{i}", 1.0, timings=timings, replica=replica, failed_stage="engine" if failed else None
    )


# r-2: s0 0-4 and s1 2-6 overlap (busy 0-6), s2 10-12 -> busy 8 s, last end 12 (the run's)
# r-10: s3 0-1, s4 1.5-3 (failed) -> busy 2.5 s, last end 3, idle tail 9 s
PLAN = [
    _rec(0, "r-2", 0, 4),
    _rec(1, "r-2", 2, 6),
    _rec(2, "r-2", 10, 12),
    _rec(3, "r-10", 0, 1),
    _rec(4, "r-10", 1.5, 3, failed=True),
]


@pytest.fixture
def replica_run(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run", "/ckpt/Qwen2.5-VL-7B-Instruct", {"Video-MME": PLAN})


def test_each_replica_gets_its_samples_busy_time_and_idle_tail(replica_run: Path) -> None:
    got = {ln.replica: ln for ln in lanes(load_run(replica_run))}
    a, b = got["r-2"], got["r-10"]
    assert (a.samples, a.failed, b.samples, b.failed) == (3, 0, 2, 1)
    assert (a.start_s, a.end_s, a.busy_s, a.idle_tail_s) == pytest.approx((0, 12, 8, 0))
    assert (b.start_s, b.end_s, b.busy_s, b.idle_tail_s) == pytest.approx((0, 3, 2.5, 9))
    assert a.segments == [pytest.approx((0, 6)), pytest.approx((10, 12))]


def test_replicas_are_listed_in_natural_order(replica_run: Path) -> None:
    assert [ln.replica for ln in lanes(load_run(replica_run))] == ["r-2", "r-10"]


def test_the_section_tabulates_the_lanes(replica_run: Path) -> None:
    report = build_report([replica_run], bootstrap=10)
    (sec,) = [s for s in report.sections if s.title == TITLE]
    assert sec.rows == [
        ["r-2", "3", "0", "0.0", "12.0", "8.0", "66.7", "0.0"],
        ["r-10", "2", "1", "0.0", "3.0", "2.5", "20.8", "9.0"],
    ]
    assert any("idle tail mean 4.5 s, longest 9.0 s" in n for n in sec.notes)
    replicas = report.data["runs"][0]["replicas"]
    assert [r["replica"] for r in replicas] == ["r-2", "r-10"]
    assert replicas[1]["idle_tail_s"] == pytest.approx(9.0)


def test_records_without_a_replica_get_a_lane_of_their_own(tmp_path: Path) -> None:
    plan = [*PLAN, _rec(5, None, 0, 2)]  # e.g. recorded by a single engine before a resume
    run = write_run(tmp_path / "run", "/ckpt/Qwen2.5-VL-7B-Instruct", {"Video-MME": plan})
    got = {ln.replica: ln for ln in lanes(load_run(run))}
    assert got[NO_REPLICA].samples == 1
    assert got[NO_REPLICA].idle_tail_s == pytest.approx(10.0)


def test_a_single_engine_run_has_no_replica_section(tmp_path: Path) -> None:
    plan = [_rec(i, None, i, i + 1) for i in range(4)]
    run = write_run(tmp_path / "run", "/ckpt/Qwen2.5-VL-7B-Instruct", {"Video-MME": plan})
    report = build_report([run], bootstrap=10)
    assert lanes(load_run(run)) == []
    assert TITLE not in [s.title for s in report.sections]
    assert "replicas" not in report.data["runs"][0]
    files = write_report(report, tmp_path / "out", ["md", "json"])
    assert not list((tmp_path / "out" / "plots").glob("replicas_*.png"))
    assert "replicas" not in json.loads(files["json"].read_text())["runs"][0]


def test_html_and_markdown_show_the_table_and_a_lane_per_replica(
    replica_run: Path, tmp_path: Path
) -> None:
    report = build_report([replica_run], bootstrap=10)
    files = write_report(report, tmp_path / "out", ["md", "html"])
    (png,) = (tmp_path / "out" / "plots").glob("replicas_*.png")
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    md = files["md"].read_text()
    assert f"### {TITLE}" in md
    assert "| r-10 | 2 | 1 | 0.0 | 3.0 | 2.5 | 20.8 | 9.0 |" in md
    assert f"plots/{png.name}" in md
    html = files["html"].read_text()
    assert TITLE in html and "per-replica timeline" in html
