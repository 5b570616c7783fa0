"""`evalkit run --resume DIR` resumes from the run directory alone, checks it before any
engine starts, and never rewrites the recorded configuration."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

import evalkit.run.execute as runner
from evalkit.cli.main import main
from evalkit.cli.run import add_arguments, config_from_args
from evalkit.errors import ConfigError, DataError
from evalkit.reports.load import load_run
from evalkit.run.execute import execute
from evalkit.rundir import RunDir
from tests._run_dirs import (
    BENCH,
    Counting,
    cut_store,
    expected_ids,
    ids,
    run_config,
    write_set,
)


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(argv)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write_set(tmp_path, 6)
    return tmp_path


@pytest.fixture
def no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(cfg: object) -> None:
        raise AssertionError("an engine was started")

    monkeypatch.setattr(runner, "make_engine", refuse)


def finished_run(root: Path, **kw: object) -> Path:
    return execute(run_config(root, **kw), engine=Counting()).path


def test_resume_by_directory_alone_takes_the_recorded_settings(root: Path) -> None:
    run = finished_run(root, frames={"fps": 1.0}, max_tokens=7, limit=4)
    cut_store(run, 2)
    cfg = config_from_args(parse("--resume", str(run)))
    assert (cfg.model, cfg.frames.fps, cfg.max_tokens, cfg.limit) == ("letter-a", 1.0, 7, 4)
    engine = Counting()
    execute(cfg, engine=engine)
    assert engine.calls == 2 and sorted(ids(run)) == expected_ids(4)
    assert RunDir(run).amendments() == []  # the same settings: nothing to amend


def test_a_finished_run_says_nothing_to_run_without_starting_an_engine(
    root: Path, no_engine: None
) -> None:
    run = finished_run(root)
    result = execute(run_config(root, resume=str(run)))
    assert result.nothing_to_run and result.stats[BENCH].skipped == 6


def test_the_cli_resumes_a_finished_run_by_directory_and_says_nothing_to_run(
    root: Path, no_engine: None, capsys: pytest.CaptureFixture[str]
) -> None:
    run = finished_run(root)
    assert main(["run", "--resume", str(run), "--no-progress"]) == 0
    assert "nothing to run" in capsys.readouterr().out


def test_a_damaged_store_is_reported_before_any_engine_starts(root: Path, no_engine: None) -> None:
    run = finished_run(root)
    cut_store(run, 3)
    with open(run / f"{BENCH}.jsonl", "a") as f:
        f.write("not a record\n")
    with pytest.raises(DataError, match=rf"{BENCH}\.jsonl:4: not a valid result record"):
        execute(run_config(root, resume=str(run)))


def test_a_result_override_without_force_is_refused_before_any_engine(
    root: Path, no_engine: None
) -> None:
    run = finished_run(root, limit=4)
    cut_store(run, 2)
    before = (run / "config.json").read_bytes()
    cfg = run_config(root, limit=4, resume=str(run), frames={"fps": 1.0})
    with pytest.raises(ConfigError, match=r"another configuration.*frames\.fps: 2\.0 -> 1\.0"):
        execute(cfg)
    assert (run / "config.json").read_bytes() == before and RunDir(run).amendments() == []


def test_force_keeps_config_json_byte_identical_and_records_an_amendment(root: Path) -> None:
    run = finished_run(root, limit=4)
    cut_store(run, 2)
    before = (run / "config.json").read_bytes()
    first_fp = json.loads(before)["fingerprint"]
    cfg = run_config(root, limit=4, resume=str(run), frames={"fps": 1.0}, force=True)
    execute(cfg, engine=Counting())
    assert (run / "config.json").read_bytes() == before
    (amendment,) = RunDir(run).amendments()
    assert f"benchmarks.{BENCH}.frames.fps: 2.0 -> 1.0" in amendment["changes"]
    assert amendment["previous_fingerprint"] == first_fp != amendment["fingerprint"]
    notes = load_run(run, bootstrap=0).benchmarks[BENCH].notes
    made = [n for n in notes if n.startswith("records by configuration")]
    assert made and f"2 under config.json ({first_fp})" in made[0]
    assert f"2 under amendment 1 of {amendment['at']} ({amendment['fingerprint']}" in made[0]
    assert "frames.fps: 2.0 -> 1.0" in made[0]


def test_the_cli_refuses_a_result_override_unless_forced(root: Path, no_engine: None) -> None:
    run = finished_run(root, limit=4)
    cut_store(run, 2)
    with pytest.raises(ConfigError, match=r"frames\.fps: 2\.0 -> 1\.0.*--force"):
        execute(config_from_args(parse("--resume", str(run), "--frames-fps", "1")))


def test_an_operational_override_runs_and_is_recorded_under_the_same_fingerprint(
    root: Path,
) -> None:
    run = finished_run(root, limit=4)
    engine = Counting()
    execute(config_from_args(parse("--resume", str(run), "--limit", "6")), engine=engine)
    assert engine.calls == 2 and sorted(ids(run)) == expected_ids(6)
    (amendment,) = RunDir(run).amendments()
    assert amendment["changes"] == ["extra.limit: 4 -> 6"]
    assert amendment["fingerprint"] == RunDir(run).original()["fingerprint"]


def test_resume_of_a_folder_without_config_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--resume .*nowhere: not a run directory"):
        config_from_args(parse("--resume", str(tmp_path / "nowhere")))
