"""Run directories refuse to mix configurations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalkit.bench.registry import get_benchmark
from evalkit.errors import ConfigError
from evalkit.manifest import RunManifest
from evalkit.rundir import RunDir
from evalkit.testing.runs import Rec, record


def manifest(
    frames: dict[str, Any] | None = None, extra: dict[str, Any] | None = None, bench: str = "A"
) -> RunManifest:
    """A run's manifest with one benchmark run at ``frames``."""
    rc = {
        "model": "m",
        "model_hash": "h",
        "engine": "vllm",
        "benchmarks": {bench: {"frames": frames or {"fps": 2.0}}},
    }
    return RunManifest.build(rc, extra or {}, specs={})


def test_reopening_with_the_same_config_keeps_the_fingerprint(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "r1")
    fp1 = run.open(manifest(extra={"limit": 5}), force=False)
    fp2 = run.open(manifest(extra={"limit": 50}), force=False)
    assert fp1 == fp2 and run.config()["extra"] == {"limit": 50}
    assert run.original()["extra"] == {"limit": 5}  # config.json is never rewritten
    (amendment,) = run.amendments()
    assert amendment["changes"] == ["extra.limit: 5 -> 50"] and amendment["fingerprint"] == fp1


def test_reopening_unchanged_adds_no_amendment(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "r1")
    run.open(manifest(extra={"limit": 5}), force=False)
    before = run.config_path.read_bytes()
    run.open(manifest(extra={"limit": 5}), force=False)
    assert run.config_path.read_bytes() == before and run.amendments() == []


def test_a_forced_change_is_an_amendment_and_config_json_stays_byte_identical(
    tmp_path: Path,
) -> None:
    run = RunDir(tmp_path / "r1")
    fp1 = run.open(manifest({"fps": 2.0}), force=False)
    before = run.config_path.read_bytes()
    fp2 = run.open(manifest({"fps": 1.0}), force=True)
    assert run.config_path.read_bytes() == before
    (amendment,) = run.amendments()
    assert amendment["changes"] == ["benchmarks.A.frames.fps: 2.0 -> 1.0"] and amendment["at"]
    assert (amendment["previous_fingerprint"], amendment["fingerprint"]) == (fp1, fp2)
    assert [c["label"] for c in run.configurations()] == [
        "config.json",
        f"amendment 1 of {amendment['at']}",
    ]
    # the amended settings are the run's now: reopening under them needs no --force
    assert run.open(manifest({"fps": 1.0}), force=False) == fp2
    assert len(run.amendments()) == 1


def test_benchmarks_of_earlier_configurations_stay_in_the_report_view(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "r1")
    a, b = get_benchmark("Video-MME"), get_benchmark("MVBench")
    first, second = manifest({"fps": 1}, bench="A"), manifest({"fps": 2}, bench="B")
    first.specs, second.specs = {"A": a.model_dump(mode="json")}, {"B": b.model_dump(mode="json")}
    run.open(first, force=False)
    run.open(second, force=True)
    cfg = run.config()
    assert cfg["result_config"]["benchmarks"] == {
        "A": {"frames": {"fps": 1}},
        "B": {"frames": {"fps": 2}},
    }
    assert cfg["specs"] == {**first.specs, **second.specs}
    assert run.latest()["result_config"]["benchmarks"] == {"B": {"frames": {"fps": 2}}}
    recorded = {name: run.manifest().recorded_spec(name) for name in "AB"}
    assert {k: v and v.model_dump() for k, v in recorded.items()} == {
        "A": a.model_dump(),
        "B": b.model_dump(),
    }


def test_resuming_under_another_config_is_refused_naming_the_difference(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "r1")
    run.open(manifest({"fps": 2.0}), force=False)
    with pytest.raises(ConfigError, match=r"benchmarks\.A\.frames\.fps: 2\.0 -> 1\.0"):
        run.open(manifest({"fps": 1.0}), force=False)
    assert run.open(manifest({"fps": 1.0}), force=True)


def test_each_benchmark_gets_its_own_store(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "r1")
    run.open(manifest(), force=False)
    with run.store("Video-MME") as s:
        s.append(record(Rec("1"), "Video-MME"))
    assert run.benchmarks() == ["Video-MME"]
