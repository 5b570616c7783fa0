"""A run decodes its pending samples' videos into the frame cache while its engine starts
(evalkit.run.warmup), stops feeding the decoders once the engine is up, never lets a failing
video fail the run, and leaves ``--mode sync`` (the vanilla baseline) alone.

The engine here is a fake whose start waits until the cache holds an entry (or a timeout):
it sees what the run did during its start."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from evalkit.cache import FrameCache
from evalkit.cli.main import main
from evalkit.errors import VideoError
from evalkit.run.warmup import CacheWarmup
from evalkit.sample import VideoRef
from evalkit.video.types import FrameSpec
from tests._synth_world import synth_world
from tests.scripted_engine import ScriptedEngine

START_WAIT_S = 30.0  # how long the fake engine's start waits for the warm-up's first entry


def _wait_for(cond: Callable[[], Any], timeout_s: float) -> Any:
    end = time.monotonic() + timeout_s
    while not (value := cond()) and time.monotonic() < end:
        time.sleep(0.05)
    return value


def _entries(root: Path) -> list[Path]:
    return sorted(root.rglob("*.safetensors")) if root.is_dir() else []


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return synth_world(tmp_path, monkeypatch, 3)


def _slow_start(monkeypatch: pytest.MonkeyPatch, cache: Path, wait_s: float) -> dict[str, Any]:
    """A fake engine whose start lasts until ``cache`` holds an entry (at most ``wait_s``);
    returns what it saw then."""
    seen: dict[str, Any] = {}

    def make_engine(cfg: Any) -> ScriptedEngine:
        seen["entries"] = _wait_for(lambda: _entries(cache), wait_s) or []
        return ScriptedEngine(prefill_s=0, decode_s=0)

    monkeypatch.setattr("evalkit.run.execute.make_engine", make_engine)
    return seen


def _run(cache: str, *flags: str) -> int:
    argv = "run --model ckpt --bench SynthVideo --data-root synth --no-progress"
    return main([*argv.split(), "--cache-root", cache, "--cache-workers", "1", *flags])


def _records(world: Path) -> dict[str, dict[str, Any]]:
    (run,) = (world / "runs").iterdir()
    lines = (run / "SynthVideo.jsonl").read_text().splitlines()
    return {r["id"]: r for r in map(json.loads, lines)}


def test_the_first_pending_samples_are_cached_while_the_engine_starts(
    world: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalkit.run.config import RunConfig
    from evalkit.run.execute import execute

    seen = _slow_start(monkeypatch, world / "cache", START_WAIT_S)
    cfg = RunConfig(
        model="ckpt", bench=["SynthVideo"], data_root="synth", cache_root="cache", cache_workers=1
    )
    stats = execute(cfg).stats["SynthVideo"]
    assert seen["entries"], "no cache entry was written while the engine started"
    assert (stats.completed, stats.failed) == (3, 0)
    assert stats.cache_hits >= len(seen["entries"])  # the pipeline found what was warmed


def test_a_corrupt_video_fails_only_its_sample_with_the_usual_error(
    world: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    videos = sorted((world / "synth").rglob("*.mp4"))
    bad = videos[0]
    bad.write_bytes(b"not a video at all" * 100)
    # the control: the same run without any warm-up says what a run always said
    monkeypatch.setattr("evalkit.run.warmup.warms_up", lambda cfg: False)
    _slow_start(monkeypatch, world / "control-cache", 0.0)
    assert _run("control-cache", "--run-id", "control") == 0
    control = _records_of(world / "runs" / "control")
    monkeypatch.undo()
    monkeypatch.chdir(world)

    seen = _slow_start(monkeypatch, world / "cache", START_WAIT_S)
    assert _run("cache", "--run-id", "warm") == 0
    # with one worker the corrupt video (the first pending) was tried first, then the next
    assert seen["entries"], "the warm-up stopped at the corrupt video"
    records = _records_of(world / "runs" / "warm")
    failed = {sid: r for sid, r in records.items() if r["status"] != "ok"}
    assert len(failed) == 1 and len(records) == 3
    (sid,) = failed
    assert str(bad.name) in failed[sid]["error"] and f"sample {sid}" in failed[sid]["error"]
    assert failed[sid]["error"] == control[sid]["error"]


def _records_of(run: Path) -> dict[str, dict[str, Any]]:
    lines = (run / "SynthVideo.jsonl").read_text().splitlines()
    return {r["id"]: r for r in map(json.loads, lines)}


def test_mode_sync_decodes_nothing_while_the_engine_starts(
    world: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _slow_start(monkeypatch, world / "cache", 3.0)
    assert _run("cache", "--mode", "sync") == 0
    assert seen["entries"] == []
    assert [r["status"] for r in _records(world).values()] == ["ok"] * 3


def _failing_decoder(
    started: list[str], gate: threading.Event
) -> Callable[[VideoRef, FrameSpec], Any]:
    def decode(ref: VideoRef, spec: FrameSpec) -> Any:
        started.append(ref.path)
        gate.wait(30)
        raise VideoError(ref.path, "test decoder")

    return decode


def test_the_warmup_keeps_workers_decodes_in_flight_in_order_and_starts_none_after_stop(
    tmp_path: Path,
) -> None:
    started: list[str] = []
    gate = threading.Event()
    cache = FrameCache(tmp_path / "cache", decode=_failing_decoder(started, gate))
    refs = []
    for i in range(6):
        (tmp_path / f"v{i}.mp4").write_bytes(bytes([i]) * 64)
        refs.append(VideoRef(path=str(tmp_path / f"v{i}.mp4")))
    jobs = [(r, FrameSpec()) for r in refs]
    with ThreadPoolExecutor(6) as pool:  # room for more than the warm-up may use
        warmup = CacheWarmup(cache, jobs, pool, workers=2).start()
        assert _wait_for(lambda: len(started) == 2, 10)
        time.sleep(0.3)  # a chance to over-submit, if it would
        assert warmup.submitted == 2
        warmup.stop()  # the engine is up
        gate.set()  # the running decodes finish
        assert _wait_for(lambda: len(warmup.failed) == 2, 10)
        time.sleep(0.3)  # their slots are free: a chance to submit more, if it would
        assert warmup.submitted == 2
    assert sorted(started) == [refs[0].path, refs[1].path]  # the first two jobs, no others
    assert set(warmup.failed) == {refs[0].path, refs[1].path}
