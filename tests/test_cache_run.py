"""The frame cache inside `evalkit run` (runner, IO stage, miss workers, real decoding of
tiny clips): damaged entries are rebuilt, content identity and the codec reach the cache,
and `evalkit cache` commands speak a benchmark's pinned spec."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evalkit.cache import FrameCache
from evalkit.cache.entry import read_info
from evalkit.cache.fileformat import open_mapped
from evalkit.cli.main import main
from evalkit.engines.base import Completion, Request, Timings
from evalkit.run.config import RunConfig
from evalkit.run.execute import execute
from evalkit.run.plan import result_config
from evalkit.rundir import RunDir
from tests.fixtures.bench import official
from tests.test_cache_integrity import data_middle, flip

BENCH = "Video-MME"


class FrameEngine:
    """Answers "A" and keeps the frames each request was shown."""

    def __init__(self) -> None:
        self.frames: dict[str, np.ndarray] = {}

    async def generate(self, request: Request) -> Completion:
        (video,) = request.videos
        self.frames[request.id] = np.array(video.array)
        return Completion(request_id=request.id, texts=["A"], timings=Timings())

    async def close(self) -> None:
        return None


def grey_video(path: Path, level: int) -> None:
    """A 4-frame 32x32 clip of one grey level (960 bytes whatever the level)."""
    import av

    with av.open(str(path), mode="w") as out:
        stream = out.add_stream("mpeg4", rate=4)
        stream.width = stream.height = 32
        stream.pix_fmt = "yuv420p"
        for _ in range(4):
            frame = np.full((32, 32, 3), level, dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    official.videomme(tmp_path / BENCH)
    return tmp_path


def run(data: Path, run_id: str, **cfg: Any) -> tuple[FrameEngine, list[dict[str, Any]]]:
    config = RunConfig(
        model="frame-engine",
        bench=[BENCH],
        data_root=str(data),
        cache_root=str(data / "cache"),
        cache_workers=1,
        runs_dir=str(data / "runs"),
        run_id=run_id,
        frames={"resize": "pil"},  # no torch import in the miss workers: a faster test
        **cfg,
    )
    engine = FrameEngine()
    result = execute(config, engine=engine)
    with RunDir(result.path).store(BENCH) as store:
        return engine, store.records()


def test_a_bit_flipped_entry_is_rebuilt_in_a_run_and_the_record_is_ok(
    data: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first, _ = run(data, "one")
    entries = list(FrameCache(data / "cache").entries())
    assert len(entries) == 3
    for path in entries:
        flip(path, data_middle(path))  # mtime put back: only the bytes tell
    with caplog.at_level(logging.WARNING, logger="evalkit.cache"):
        second, records = run(data, "two")
    assert [r.status for r in records] == ["ok"] * 6
    for sid, frames in first.frames.items():
        assert np.array_equal(second.frames[sid], frames), sid
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert all(str(path) in warned for path in entries)


def test_content_identity_serves_a_same_size_rewrite_with_its_mtime_put_back(data: Path) -> None:
    video = data / BENCH / "data" / "vidA.mp4"
    grey_video(video, 100)
    first, _ = run(data, "one", cache_identity="content")
    st = video.stat()
    grey_video(video, 200)
    assert video.stat().st_size == st.st_size
    os.utime(video, ns=(st.st_atime_ns, st.st_mtime_ns))
    second, _ = run(data, "two", cache_identity="content")
    for sid in ("001-1", "001-2"):
        assert abs(int(first.frames[sid].mean()) - 100) < 8
        assert abs(int(second.frames[sid].mean()) - 200) < 8


def test_an_entry_built_with_identity_content_is_found_by_a_content_run(data: Path) -> None:
    args = ["cache", "build", "--bench", BENCH, "--data-root", str(data), "--resize", "pil"]
    args += ["--root", str(data / "cache"), "--identity", "content", "--workers", "0"]
    assert main([*args, "--no-progress"]) == 0
    _, records = run(data, "one", cache_identity="content", require_cache=True)
    assert [r.status for r in records] == ["ok"] * 6


def test_cache_ls_bench_shows_hit_for_what_a_run_cached(data: Path, capsys) -> None:
    run(data, "one")
    args = ["cache", "ls", "--bench", BENCH, "--data-root", str(data), "--resize", "pil"]
    assert main([*args, "--root", str(data / "cache"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["videos"] == {"hit": 3, "miss": 0}
    assert main([*args[:-2], "--root", str(data / "cache")]) == 0  # pinned resize: a miss
    assert "0 hit, 3 miss" in capsys.readouterr().out


def test_the_jpeg_codec_reaches_the_cache_and_the_fingerprint(data: Path) -> None:
    run(data, "one", cache_codec="jpeg", cache_jpeg_quality=80)
    codecs = [read_info(open_mapped(p)).codec for p in FrameCache(data / "cache").entries()]
    assert codecs == ["jpeg"] * 3
    recorded = json.loads((data / "runs" / "one" / "config.json").read_text())
    assert recorded["result_config"]["frame_cache"] == {
        "identity": "stat",
        "codec": "jpeg",
        "jpeg_quality": 80,
    }


def test_default_cache_settings_leave_earlier_fingerprints_alone() -> None:
    cfg = RunConfig(model="m")
    assert "frame_cache" not in result_config(cfg, []).dump()
    assert (
        "frame_cache"
        in result_config(cfg.model_copy(update={"cache_identity": "content"}), []).dump()
    )


def test_run_flags_set_the_cache_identity_and_codec() -> None:
    import argparse

    from evalkit.cli.run import add_arguments, config_from_args

    p = argparse.ArgumentParser()
    add_arguments(p)
    argv = ["--model", "m", "--cache-identity", "content", "--cache-codec", "jpeg"]
    cfg = config_from_args(p.parse_args([*argv, "--cache-jpeg-quality", "75"]))
    assert (cfg.cache_identity, cfg.cache_codec, cfg.cache_jpeg_quality) == ("content", "jpeg", 75)
    assert config_from_args(p.parse_args(["--model", "m"])).cache_identity == "stat"
