"""``evalkit bench``: list, show, validate."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalkit.cli.main import main
from tests.fixtures.bench import official


def test_list_shows_every_benchmark_with_its_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "list"]) == 0
    out = capsys.readouterr().out
    names = (
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
    )
    for name in names:
        assert f"│ {name} " in out
    assert "macro_mean" in out and "768" in out


def test_show_prints_the_resolved_variant(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "show", "videomathqa:mbin"]) == 0
    out = capsys.readouterr().out
    assert '"variant": "mbin"' in out and '"name": "mbin"' in out


def test_validate_exits_1_and_lists_each_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = official.lvbench(tmp_path)
    (root / "videos" / "vidL2.mp4").unlink()
    assert main(["bench", "validate", "lvbench", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "2 samples loaded" in out and "2 problem(s)" in out
    assert out.count("video not found") == 2 and "expected layout" in out


def test_validate_a_good_copy_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = official.lvbench(tmp_path)
    assert main(["bench", "validate", "LVBench", "--root", str(root), "--decode"]) == 0
    assert "no problems found" in capsys.readouterr().out


def test_an_unknown_benchmark_is_a_clean_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "show", "lvbnch"]) == 2
    assert "did you mean 'LVBench'" in capsys.readouterr().err


def test_list_counts_samples_of_local_copies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    official.lvbench(tmp_path / "LVBench")
    assert main(["bench", "list", "--root", str(tmp_path)]) == 0
    row = next(x for x in capsys.readouterr().out.splitlines() if "│ LVBench " in x)
    assert "│ 4 " in row
