"""``evalkit bench list`` shows all 22 benchmarks of the suite with their settings."""

from __future__ import annotations

import pytest

from evalkit.bench.registry import registry
from evalkit.cli.main import main

SUITE = (
    # Benchmarks I
    "Video-MME",
    "Video-MME-v2",
    "MVBench",
    "LVBench",
    "MLVU",
    "VideoMathQA",
    "TempCompass",
    "MotionBench",
    "LongVideoBench",
    "MMVU",
    "Video-MMMU",
    # reasoning, spatial, grounding, streaming
    "Video-Holmes",
    "MINERVA",
    "VCR-Bench",
    "VideoReasonBench",
    "LongVideo-Reason",
    "VSI-Bench",
    "Charades-STA",
    "STVG",
    "OVO-Bench",
    "ODV-Bench",
    "LiveSports-3K-QA",
)


def row_of(out: str, name: str) -> list[str]:
    """The cells of the first line of ``name``'s row in ``bench list``'s table (compact at
    100 columns: cells two spaces apart, the name first), [] when there is none."""
    line = next((x for x in out.splitlines() if x.split("  ")[0] == name), "")
    return [c.strip() for c in line.split("  ") if c.strip()]


def test_all_22_benchmarks_are_listed(capsys: pytest.CaptureFixture[str]) -> None:
    assert len(SUITE) == 22
    assert main(["bench", "list"]) == 0
    out = capsys.readouterr().out
    for name in SUITE:
        assert row_of(out, name), name
    for agg in ("merged_macro_mean", "hierarchical_mean", "temporal_grounding"):
        assert agg in out
    assert set(SUITE) <= set(registry().names())


@pytest.mark.parametrize(
    "alias, name",
    [
        ("vsibench", "VSI-Bench"),
        ("ovo_bench", "OVO-Bench"),
        ("charades_sta", "Charades-STA"),
        ("livesports3k_qa", "LiveSports-3K-QA"),
        ("holmes", "Video-Holmes"),
    ],
)
def test_easyvideor1_style_names_find_the_specs(alias: str, name: str) -> None:
    assert registry().get(alias).name == name


def test_show_prints_the_debiased_vsibench_variant(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "show", "vsi-bench:debiased"]) == 0
    out = capsys.readouterr().out
    assert "VSI-Bench:debiased" in out and "test_debiased.parquet" in out
