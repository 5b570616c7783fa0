"""evalkit.atomic: a whole file or the old one, never half, never a stray temporary."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalkit import atomic


def test_a_write_replaces_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("old")
    atomic.write_text_atomic(path, "new ✓")
    assert path.read_text(encoding="utf-8") == "new ✓"
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_its_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "verdict.json"
    path.write_text("old")

    def power_cut(tmp: Path, dest: Path) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(atomic, "commit", power_cut)
    with pytest.raises(OSError, match="disk gone"):
        atomic.write_text_atomic(path, "new")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["verdict.json"]


def test_two_writers_of_one_path_never_share_a_temporary(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    assert atomic.temp_path(path) != atomic.temp_path(path)
    assert atomic.TEMP_MARK in atomic.temp_path(path).name
