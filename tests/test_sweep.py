"""``evalkit sweep``: settings from the grid (bad keys and values refused in one line), one
run directory per setting equal to a separate ``evalkit run`` with that setting, one
engine start for the whole sweep, every video decoded before the runs (each setting's
frames then cache hits), ``sweep.json``'s schema, and resuming.

The engine is a scripted fake (tests/scripted_engine.py): it sees every request, so it
checks the runs' plumbing; the real-engine sweep is the heavy test at the end."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from evalkit.cli.main import main
from tests._synth_world import synth_world
from tests.scripted_engine import ScriptedEngine

GRID = ["--grid", "frames.nframes=2,4", "--grid", "prompt.variant=plain,thinking"]
BASE = "--model ckpt --bench SynthVideo --data-root synth --no-progress --cache-workers 1"


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return synth_world(tmp_path, monkeypatch, 2)


def _fake_engine(monkeypatch: pytest.MonkeyPatch) -> list[ScriptedEngine]:
    started: list[ScriptedEngine] = []

    def make_engine(cfg: Any) -> ScriptedEngine:
        started.append(ScriptedEngine(prefill_s=0, decode_s=0))
        return started[-1]

    monkeypatch.setattr("evalkit.run.execute.make_engine", make_engine)
    return started


def _records(run: Path) -> dict[str, dict[str, Any]]:
    lines = (run / "SynthVideo.jsonl").read_text().splitlines()
    out = {}
    for r in map(json.loads, lines):
        r.pop("timings", None)
        out[r["id"]] = r
    return out


def _fingerprint(run: Path) -> Any:
    return json.loads((run / "config.json").read_text())["fingerprint"]


def test_each_setting_is_the_run_evalkit_run_writes_from_one_engine_start(
    world: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    started = _fake_engine(monkeypatch)
    flags = [*BASE.split(), "--cache-root", "cache"]
    assert main(["sweep", *flags, *GRID, "--sweep-dir", "sw"]) == 0
    assert len(started) == 1  # one engine for the four settings
    out = capfd.readouterr().out  # the sweep report: each setting's score, what moves it
    assert "SynthVideo: score by setting" in out and "moves the score" in out
    assert "s03" in out
    doc = json.loads((world / "sw" / "sweep.json").read_text())
    assert doc["schema"] == 1 and doc["kind"] == "evalkit-sweep" and doc["zip"] is False
    assert doc["axes"] == {"frames.nframes": [2, 4], "prompt.variant": ["plain", "thinking"]}
    assert doc["benchmarks"] == ["SynthVideo"]
    assert set(doc["pinned"]["SynthVideo"]) == {"frames.nframes", "prompt.variant"}
    assert [s["id"] for s in doc["settings"]] == ["s00", "s01", "s02", "s03"]
    assert doc["base"]["model"] == "ckpt"
    for s in doc["settings"]:
        n, variant = s["values"]["frames.nframes"], s["values"]["prompt.variant"]
        argv = ["run", *flags, "--cache-root", "cache2", "--run-id", s["run"]]
        argv += ["--frames-nframes", str(n), "--variant", variant]
        assert main(argv) == 0
        swept, alone = world / "sw" / s["run"], world / "runs" / s["run"]
        assert json.loads((swept / "startup.json").read_text())["engines_s"] >= 0  # shared
        assert _fingerprint(swept) == _fingerprint(alone)
        assert _records(swept) == _records(alone)
    assert len(started) == 5  # and one per separate run


def test_every_video_is_decoded_before_the_settings_run(
    world: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = _fake_engine(monkeypatch)
    flags = [*BASE.split(), "--cache-root", "cache", *GRID, "--sweep-dir", "sw"]
    calls: list[int] = []
    import evalkit.cache.build as cb

    real = cb.build

    def counting(cache: Any, refs: Any, spec: Any, **kw: Any) -> Any:
        calls.append(len(spec))
        return real(cache, refs, spec, **kw)

    monkeypatch.setattr(cb, "build", counting)
    assert main(["sweep", *flags]) == 0
    assert calls == [2]  # one build of every video for both frame counts
    assert len(started) == 1


def test_a_bad_key_or_value_is_one_line(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", *BASE.split(), "--grid", "frames.nframe=2,4"]) != 0
    err = capsys.readouterr().err
    assert "frames.nframe" in err and "'frames.nframes'" in err and "prompt.variant" in err
    assert main(["sweep", *BASE.split(), "--grid", "prompt.variant=plain,loud"]) != 0
    err = capsys.readouterr().err
    assert "prompt.variant=loud" in err
    assert main(["sweep", *BASE.split(), "--zip", *GRID[:2], "--grid", "prompt.variant=plain"]) != 0
    assert "--zip" in capsys.readouterr().err


def test_zip_pairs_values(world: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_engine(monkeypatch)
    flags = [*BASE.split(), "--cache-root", "cache", *GRID, "--zip", "--sweep-dir", "sw"]
    assert main(["sweep", *flags]) == 0
    doc = json.loads((world / "sw" / "sweep.json").read_text())
    assert [s["values"] for s in doc["settings"]] == [
        {"frames.nframes": 2, "prompt.variant": "plain"},
        {"frames.nframes": 4, "prompt.variant": "thinking"},
    ]


def test_resume_finishes_each_run_without_duplicates_and_refuses_another_grid(
    world: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    started = _fake_engine(monkeypatch)
    flags = [*BASE.split(), "--cache-root", "cache", *GRID, "--sweep-dir", "sw"]
    assert main(["sweep", *flags, "--limit", "1"]) == 0  # the sweep stopped after 1 sample
    doc = json.loads((world / "sw" / "sweep.json").read_text())
    # a partial store: as if stopped mid-way (the base's limit is recorded; lift it here)
    base = doc["base"]
    base["limit"] = None
    (world / "sw" / "sweep.json").write_text(json.dumps(doc))
    for s in doc["settings"]:
        assert len(_records(world / "sw" / s["run"])) == 1
    assert main(["sweep", "--resume", "sw", "--no-progress"]) == 0
    assert len(started) == 2
    for s in doc["settings"]:
        lines = (world / "sw" / s["run"] / "SynthVideo.jsonl").read_text().splitlines()
        ids = [json.loads(x)["id"] for x in lines]
        assert len(ids) == len(set(ids)) > 1
    assert main(["sweep", "--resume", "sw", "--no-progress"]) == 0
    assert len(started) == 2  # every run complete: nothing to run, no engine
    assert main(["sweep", "--resume", "sw", "--grid", "frames.nframes=8"]) != 0
    assert "different --grid" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        '{"kind": "evalkit-sweep", "axes": {}, "settings": [], "pinned": {}, "benchmarks": []}',
        '{"kind": "evalkit-sweep", "axes": {}, "zip": false, "settings": [], "pinned": {},'
        ' "benchmarks": [], "base": {"model": 3}}',
    ],
    ids=["not-json", "no-base", "bad-base"],
)
def test_resuming_a_damaged_sweep_manifest_is_one_line_naming_it(
    tmp_path: Path, text: str, capfd: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "sw").mkdir()
    (tmp_path / "sw" / "sweep.json").write_text(text)
    assert main(["sweep", "--resume", str(tmp_path / "sw"), "--no-progress"]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sweep.json" in err[0], err


def _partial_sweep(world: Path, flags: list[str]) -> dict[str, Any]:
    """A sweep stopped after one sample of each setting (its limit lifted in sweep.json, as
    in the resume test): resuming it would start the engine."""
    assert main(["sweep", *flags, "--limit", "1"]) == 0
    doc: dict[str, Any] = json.loads((world / "sw" / "sweep.json").read_text())
    doc["base"]["limit"] = None
    (world / "sw" / "sweep.json").write_text(json.dumps(doc))
    return doc


def test_a_sweep_whose_directory_is_locked_is_refused_before_any_engine_or_write(
    world: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from evalkit.runlock import RunLock

    started = _fake_engine(monkeypatch)
    flags = [*BASE.split(), "--cache-root", "cache", *GRID, "--sweep-dir", "sw"]
    doc = _partial_sweep(world, flags)
    assert len(started) == 1
    capfd.readouterr()
    manifest = world / "sw" / "sweep.json"
    before = manifest.stat()
    stores = {
        s["run"]: (world / "sw" / s["run"] / "SynthVideo.jsonl").read_bytes()
        for s in doc["settings"]
    }
    with RunLock(world / "sw"):  # another `evalkit sweep` of this directory is running
        assert main(["sweep", "--resume", "sw", "--no-progress"]) == 2
        err = capfd.readouterr().err.strip().splitlines()
        # one line naming the holder (this process: the lock's message then takes it for
        # a process it started, as it is here)
        assert len(err) == 1 and f"sw is locked: its writer, pid {os.getpid()}" in err[0], err
        # a new sweep into a locked directory that holds no sweep yet
        with RunLock(world / "sw2"):
            assert main(["sweep", *flags[:-1], "sw2"]) == 2
            assert f"sw2 is locked: its writer, pid {os.getpid()}" in capfd.readouterr().err
            assert not (world / "sw2" / "sweep.json").exists()
    assert len(started) == 1  # no engine started by either
    after = manifest.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    for run, data in stores.items():
        assert (world / "sw" / run / "SynthVideo.jsonl").read_bytes() == data
    assert main(["sweep", "--resume", "sw", "--no-progress"]) == 0  # the lock released
    assert len(started) == 2


def test_a_sweep_of_a_data_file_shows_its_score_by_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from tests._engine_env import write_index_video_set

    monkeypatch.chdir(tmp_path)
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps({"model_type": "qwen2_5_vl"}))
    write_index_video_set(tmp_path, 2, 2, lambda v: 16, "adhoc")
    started = _fake_engine(monkeypatch)
    flags = ["--model", "ckpt", "--data", "set.jsonl", "--video-root", "videos"]
    flags += ["--no-progress", "--cache-workers", "1", "--cache-root", "cache"]
    assert main(["sweep", *flags, *GRID, "--sweep-dir", "sw"]) == 0
    assert len(started) == 1
    out = capfd.readouterr().out
    # the score-by-setting table of the file's rows, as for --bench: every setting with
    # its headline (the scripted engine answers "A": half the rows right), an interval,
    # and its delta against the first setting
    assert "set: score by setting" in out, out
    rows = [line for line in out.splitlines() if re.match(r"\s*│?\s*s0[0-3]", line)]
    table = [r for r in rows if "50.00" in r]
    assert len(table) == 4, out
    assert "moves the score" in out
    doc = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    assert doc["benchmarks"] == ["set"]


def test_the_settings_share_one_judge_engine(world: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a local judge is an engine of its own: one per setting made a vLLM judge per setting
    _fake_engine(monkeypatch)
    judges: list[str] = []

    def build(name: str, model: str, options: Any) -> ScriptedEngine:
        judges.append(model)
        return ScriptedEngine(prefill_s=0, decode_s=0)

    monkeypatch.setattr("evalkit.run.components.build", build)
    flags = [*BASE.split(), "--cache-root", "cache", *GRID, "--sweep-dir", "sw"]
    judge = ["--judge-model", "judge", "--judge-opt", "probe=false"]  # scripted: no server
    assert main(["sweep", *flags, *judge]) == 0
    assert judges == ["judge"]
    for run in (world / "sw").glob("*/config.json"):  # every setting's run has the judge
        assert json.loads(run.read_text())["result_config"]["judge"]["model"] == "judge"


def test_a_sweep_whose_engine_failed_samples_exits_1_naming_the_setting(
    world: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # every request fails in the engine: each setting's run failed (as `evalkit run` exits)
    class Failing(ScriptedEngine):
        async def generate(self, request: Any) -> Any:
            raise RuntimeError("scripted server crash")

    monkeypatch.setattr("evalkit.run.execute.make_engine", lambda cfg: Failing())
    flags = [*BASE.split(), "--cache-root", "cache", "--grid", "frames.nframes=2,4"]
    assert main(["sweep", *flags, "--sweep-dir", "sw"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("every sample failed" in line for line in err)
    assert err[0].startswith("evalkit sweep: setting s00 (nframes-2): ")
    assert "scripted server crash" in err[0]
