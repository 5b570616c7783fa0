"""The frame cache end to end on generated videos, with the real decoder (evalkit.video).

Frames carry their own index in their pixels, so a test reads back exactly which source
frames an entry serves.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from evalkit.cache import FrameCache, build_cache
from evalkit.cli.main import main
from evalkit.sample import VideoRef
from evalkit.testing.broken_videos import write_text_file, write_truncated, write_zero_bytes
from evalkit.testing.index_video import read_indices, write_index_video
from evalkit.video.types import FrameSpec

SPEC = FrameSpec(fps=2.0, max_frames=16, min_pixels=28 * 28 * 4, max_pixels=28 * 28 * 16)


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("videos")
    return {
        "mp4": write_index_video(d / "a.mp4", 150, 30.0, 320, 240),
        "avi": write_index_video(d / "b.avi", 96, 24.0, 256, 144),
        "short": write_index_video(d / "c.mp4", 40, 20.0, 160, 120),
    }


def _served_indices(cache: FrameCache, video: Path | VideoRef, spec: FrameSpec) -> list[int]:
    frames = cache.get(video, spec, require=True)
    seen = read_indices(np.asarray(frames.array))
    assert seen == list(frames.meta.indices), "entry serves other frames than its metadata says"
    return seen


def test_served_frames_are_the_ones_the_spec_asks_for(tmp_path: Path, videos) -> None:
    from evalkit.video import load_video

    cache = FrameCache(tmp_path / "c")
    for video in videos.values():
        direct = load_video(VideoRef(path=str(video)), SPEC)
        built = cache.get(video, SPEC)
        assert np.array_equal(built.array, direct.array)
        assert _served_indices(cache, video, SPEC) == list(direct.meta.indices)
        assert built.array.shape[1:] == (direct.meta.height, direct.meta.width, 3)


def test_another_spec_serves_its_own_frames(tmp_path: Path, videos) -> None:
    cache = FrameCache(tmp_path / "c")
    video = videos["mp4"]
    cache.get(video, SPEC)
    denser = SPEC.model_copy(update={"fps": 4.0})
    fixed = SPEC.model_copy(update={"nframes": 6})
    for spec in (denser, fixed):
        assert cache.lookup(video, spec) is None
        cache.get(video, spec)
    a, b, c = (_served_indices(cache, video, s) for s in (SPEC, denser, fixed))
    assert len(b) > len(a) and len(c) == 6


def test_a_window_serves_frames_from_that_window_only(tmp_path: Path, videos) -> None:
    cache = FrameCache(tmp_path / "c")
    ref = VideoRef(path=str(videos["mp4"]), start=2.0, end=4.0)
    cache.get(ref, SPEC)
    seen = _served_indices(cache, ref, SPEC)
    assert seen and all(55 <= i <= 125 for i in seen)  # 30 fps: seconds 2..4, with slack


def test_a_rewritten_video_is_decoded_again(tmp_path: Path, videos) -> None:
    video = tmp_path / "v.mp4"
    write_index_video(video, 60, 30.0, 160, 120)
    cache = FrameCache(tmp_path / "c")
    cache.get(video, SPEC)
    first = _served_indices(cache, video, SPEC)
    write_index_video(video, 120, 30.0, 160, 120)  # same name, twice as long
    os.utime(video, ns=(0, video.stat().st_mtime_ns + 10**6))
    assert cache.lookup(video, SPEC) is None
    cache.get(video, SPEC)
    assert max(_served_indices(cache, video, SPEC)) > max(first)


def test_jpeg_entries_serve_the_same_source_frames(tmp_path: Path, videos) -> None:
    raw = FrameCache(tmp_path / "c")
    jpeg = FrameCache(tmp_path / "c", codec="jpeg", jpeg_quality=85)
    for cache in (raw, jpeg):
        cache.get(videos["mp4"], SPEC)
    assert _served_indices(jpeg, videos["mp4"], SPEC) == _served_indices(raw, videos["mp4"], SPEC)
    assert (
        jpeg.path_for(videos["mp4"], SPEC).stat().st_size
        < raw.path_for(videos["mp4"], SPEC).stat().st_size
    )


def _broken(tmp_path: Path, videos) -> dict[str, Path]:
    return {
        "missing": tmp_path / "missing.mp4",
        "zero": write_zero_bytes(tmp_path / "zero.mp4"),
        "text": write_text_file(tmp_path / "page.mp4"),
        "truncated": write_truncated(videos["mp4"], tmp_path / "cut.mp4", keep=0.3),
    }


def test_broken_inputs_fail_alone_and_the_rest_is_built(tmp_path: Path, videos) -> None:
    broken = _broken(tmp_path, videos)
    cache = FrameCache(tmp_path / "c")
    report = build_cache(
        cache, [*broken.values(), *videos.values()], SPEC, workers=2, progress=False
    )
    assert sorted(report.built) == sorted(str(v) for v in videos.values())
    assert set(report.failed) == {str(p) for p in broken.values()}
    for path in broken.values():
        assert report.failed[str(path)].strip(), f"no reason given for {path}"
        assert cache.lookup(path, SPEC) is None if path.exists() else True
    for video in videos.values():
        _served_indices(cache, video, SPEC)


def test_cli_build_then_verify_ls_prune_on_real_videos(tmp_path: Path, videos, capsys) -> None:
    root = str(tmp_path / "c")
    flags = ["--fps", "2", "--max-frames", "16", "--min-pixels", str(28 * 28 * 4)]
    flags += ["--max-pixels", str(28 * 28 * 16), "--root", root, "--no-progress"]
    bad = write_text_file(tmp_path / "page.mp4")
    args = ["cache", "build", *map(str, videos.values()), str(bad), "--workers", "2", "--json"]
    assert main(args + flags) == 1
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["built"] == 3 and list(out["failed"]) == [str(bad)]
    assert main(["cache", "verify", "--root", root]) == 0
    assert main(["cache", "ls", "--root", root, "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["entries"] == 3
    assert main(["cache", "prune", "--root", root, "--all"]) == 0
    assert not list(FrameCache(root).entries())
