"""Run directories refuse to mix configurations."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalkit.errors import ConfigError
from evalkit.rundir import RunDir


def test_reopening_with_the_same_config_keeps_the_fingerprint(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "r1")
    fp1 = run.open({"model": "m", "fps": 2.0}, {"limit": 5}, force=False)
    fp2 = run.open({"model": "m", "fps": 2.0}, {"limit": 50}, force=False)
    assert fp1 == fp2 and run.config()["extra"] == {"limit": 50}


def test_resuming_under_another_config_is_refused_naming_the_difference(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "r1")
    run.open({"model": "m", "spec": {"fps": 2.0}}, {}, force=False)
    with pytest.raises(ConfigError, match=r"spec\.fps: 2\.0 -> 1\.0"):
        run.open({"model": "m", "spec": {"fps": 1.0}}, {}, force=False)
    assert run.open({"model": "m", "spec": {"fps": 1.0}}, {}, force=True)


def test_each_benchmark_gets_its_own_store(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "r1")
    run.open({}, {}, force=False)
    with run.store("Video-MME") as s:
        s.append({"id": "1", "status": "ok"})
    assert run.benchmarks() == ["Video-MME"]
