"""Two runs side by side: paired bootstrap deltas; engine utilisation from timings."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalkit.reports import compare, load_run
from evalkit.reports.timeline import Span, in_engine, occupancy, utilisation
from evalkit.testing.runs import Rec, write_run


def _vmme(values: list[float]) -> list[Rec]:
    return [Rec(str(i), v, {"duration": "short"}) for i, v in enumerate(values)]


def _mbin(values: list[float]) -> list[Rec]:
    # pairs (2k, 2k+1) share a question id
    return [Rec(f"r{i}", v, {"question_id": f"q{i // 2}"}) for i, v in enumerate(values)]


def test_identical_runs_are_not_significantly_different(tmp_path: Path) -> None:
    values = [float(i % 3 != 0) for i in range(60)]
    a = load_run(write_run(tmp_path / "a", "m", {"Video-MME": _vmme(values)}))
    b = load_run(write_run(tmp_path / "b", "m", {"Video-MME": _vmme(values)}))
    c = compare(a.benchmarks["Video-MME"], b.benchmarks["Video-MME"])
    assert c.delta == 0.0 and c.verdict == "not significant" and not c.significant
    assert c.n_common == 60 and (c.n_only_a, c.n_only_b) == (0, 0)


def test_a_large_consistent_gain_is_significant(tmp_path: Path) -> None:
    a = load_run(write_run(tmp_path / "a", "m", {"Video-MME": _vmme([0.0] * 40)}))
    b = load_run(write_run(tmp_path / "b", "m", {"Video-MME": _vmme([1.0] * 30 + [0.0] * 10)}))
    c = compare(a.benchmarks["Video-MME"], b.benchmarks["Video-MME"])
    assert c.delta == pytest.approx(75.0)
    assert c.ci_low is not None and c.ci_low > 0 and c.verdict == "B better"


def test_noise_sized_difference_is_not_called_a_win(tmp_path: Path) -> None:
    # one answer of 50 flips: +2 points, well inside the paired interval
    va = [float(i % 2) for i in range(50)]
    vb = list(va)
    vb[0] = 1.0
    a = load_run(write_run(tmp_path / "a", "m", {"Video-MME": _vmme(va)}))
    b = load_run(write_run(tmp_path / "b", "m", {"Video-MME": _vmme(vb)}))
    c = compare(a.benchmarks["Video-MME"], b.benchmarks["Video-MME"])
    assert c.delta == pytest.approx(2.0) and c.verdict == "not significant"


def test_comparison_is_over_common_samples_only(tmp_path: Path) -> None:
    a = load_run(write_run(tmp_path / "a", "m", {"Video-MME": _vmme([1.0, 0.0, 1.0, 1.0])}))
    b = load_run(write_run(tmp_path / "b", "m", {"Video-MME": _vmme([1.0, 0.0])}))
    c = compare(a.benchmarks["Video-MME"], b.benchmarks["Video-MME"])
    assert c.a == pytest.approx(75.0) and c.a_common == pytest.approx(50.0)
    assert c.delta == 0.0 and (c.n_common, c.n_only_a, c.n_only_b) == (2, 2, 0)


def test_bootstrap_is_seeded(tmp_path: Path) -> None:
    va = [float(i % 2) for i in range(30)]
    vb = [float(i % 3 == 0) for i in range(30)]
    a = load_run(write_run(tmp_path / "a", "m", {"Video-MME": _vmme(va)}))
    b = load_run(write_run(tmp_path / "b", "m", {"Video-MME": _vmme(vb)}))
    ba, bb = a.benchmarks["Video-MME"], b.benchmarks["Video-MME"]
    c1, c2 = compare(ba, bb, seed=3), compare(ba, bb, seed=3)
    assert (c1.ci_low, c1.ci_high) == (c2.ci_low, c2.ci_high)


def test_grouped_official_aggregate_is_compared_on_whole_groups(tmp_path: Path) -> None:
    values = [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0] * 3
    a = load_run(write_run(tmp_path / "a", "m", {"VideoMathQA": _mbin(values)}, variant="mbin"))
    b = load_run(write_run(tmp_path / "b", "m", {"VideoMathQA": _mbin(values)}, variant="mbin"))
    c = compare(a.benchmarks["VideoMathQA:mbin"], b.benchmarks["VideoMathQA:mbin"], n_boot=200)
    assert c.a_common == pytest.approx(50.0)  # q0 and q3 right of every 4 questions
    assert c.delta == 0.0 and c.verdict == "not significant"
    assert "clusters by question_id" in c.method


def _span(io: float, sub: float, fin: float) -> Span:
    return Span("b", str(io), "ok", io, io + 0.1, sub, sub + 0.5, fin, output_tokens=10)


def test_utilisation_is_computed_from_engine_intervals() -> None:
    # in the engine: [1, 3] and [2, 5]; wall time from the first IO start (0) to 5
    spans = [_span(0.0, 1.0, 3.0), _span(0.5, 2.0, 5.0)]
    u = utilisation(spans)
    assert u is not None
    assert u.wall_s == pytest.approx(5.0)
    assert u.busy_fraction == pytest.approx(4 / 5)
    assert u.mean_in_flight == pytest.approx((2 + 3) / 5)
    assert u.max_in_flight == 2
    assert u.output_tokens_per_s == pytest.approx(20 / 5)
    assert occupancy(in_engine(spans)) == [(1.0, 1), (2.0, 2), (3.0, 1), (5.0, 0)]


def test_a_run_without_timings_has_no_utilisation() -> None:
    assert utilisation([]) is None


def test_only_benchmarks_both_runs_hold_are_compared(tmp_path: Path) -> None:
    from evalkit.reports import build_report

    mv = [Rec(f"m{i}", float(i % 2), {"task": "A"}) for i in range(10)]
    a = write_run(tmp_path / "a", "m", {"Video-MME": _vmme([1.0, 0.0] * 5), "MVBench": mv})
    b = write_run(tmp_path / "b", "m", {"Video-MME": _vmme([1.0, 0.0] * 5)})
    report = build_report([a, b], bootstrap=50)
    (comp,) = report.data["comparisons"]
    assert [c["benchmark"] for c in comp["benchmarks"]] == ["Video-MME"]
    section = report.sections[-1]
    assert "not compared (in one run only): A MVBench; B -" in section.notes
