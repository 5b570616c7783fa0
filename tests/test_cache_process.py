"""The frame cache across processes: killed writers, racing builders, parallel builds."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from evalkit.cache import FrameCache, build_cache, listing, prune
from evalkit.cache.fileformat import TEMP_MARK
from evalkit.sample import VideoRef
from tests.test_cache_unit import SPEC, decodes, fake_decode

CTX = multiprocessing.get_context("spawn")


def _writer_that_stalls(root: str, video: str, marker: str) -> None:
    """Child: build one entry but stop for good after the first chunk of data is written."""
    from evalkit.cache import fileformat

    def stall(written: int) -> None:
        Path(marker).write_text(str(written))
        time.sleep(600)

    fileformat._CHUNK = 4096
    fileformat._after_chunk = stall
    FrameCache(root, decode=fake_decode).get(video, SPEC)


def _get_and_save(root: str, video: str, out: str) -> None:
    frames = FrameCache(root, decode=fake_decode).get(video, SPEC)
    np.save(out, np.asarray(frames.array))


def _wait_for(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_a_writer_killed_mid_write_leaves_nothing_that_is_served(tmp_path: Path) -> None:
    video = tmp_path / "v.mp4"
    video.write_bytes(b"\x07" + b"x" * 50)
    root = tmp_path / "cache"
    marker = tmp_path / "stalled"
    child = CTX.Process(target=_writer_that_stalls, args=(str(root), str(video), str(marker)))
    child.start()
    _wait_for(marker)
    assert child.pid is not None
    os.kill(child.pid, signal.SIGKILL)
    child.join()

    cache = FrameCache(root, decode=fake_decode)
    entry = cache.path_for(video, SPEC)
    temps = list(entry.parent.glob(f"*{TEMP_MARK}*"))
    assert len(temps) == 1 and temps[0].stat().st_size > 0  # the half-written file
    assert not entry.exists()
    assert cache.lookup(video, SPEC) is None
    assert listing(cache)["temp_files"] == 1

    report = prune(cache)  # the dead writer's lock is free again: its temp goes
    assert list(report.removed.values()) == ["unfinished write"]
    assert not list(entry.parent.glob(f"*{TEMP_MARK}*"))
    assert cache.get(video, SPEC).array[1, 0, 0, 0] == 0x08


def test_two_builders_racing_on_one_key_decode_once_and_agree(tmp_path: Path) -> None:
    video = tmp_path / "v.mp4"
    video.write_bytes(b"SLOW" + b"x" * 50)  # the stand-in decoder sleeps 1 s: they overlap
    root = tmp_path / "cache"
    outs = [tmp_path / f"out{i}.npy" for i in range(2)]
    procs = [CTX.Process(target=_get_and_save, args=(str(root), str(video), str(o))) for o in outs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    a, b = (np.load(o) for o in outs)
    assert np.array_equal(a, b)
    assert decodes(video) == 1  # the second builder waited on the key lock and read the file
    cache = FrameCache(root, decode=fake_decode)
    assert len(list(cache.entries())) == 1
    assert not list(cache.root.glob(f"*/*{TEMP_MARK}*"))
    assert np.array_equal(cache.get(video, SPEC, require=True).array, a)


def _videos(tmp_path: Path) -> tuple[list[Path], dict[str, Path]]:
    good = []
    for i in range(4):
        p = tmp_path / f"good{i}.mp4"
        p.write_bytes(bytes([i]) + b"x" * (10 + i))
        good.append(p)
    bad = {"missing": tmp_path / "missing.mp4", "broken": tmp_path / "broken.mp4"}
    bad["broken"].write_bytes(b"BAD video")
    return good, bad


@pytest.mark.parametrize("workers", [0, 2])
def test_a_build_fails_only_the_broken_videos(tmp_path: Path, workers: int) -> None:
    good, bad = _videos(tmp_path)
    cache = FrameCache(tmp_path / "cache", decode=fake_decode)
    refs = [*good[:2], bad["missing"], bad["broken"], *good[2:]]
    report = build_cache(cache, refs, SPEC, workers=workers, progress=False)
    assert sorted(report.built) == sorted(str(p) for p in good)
    assert set(report.failed) == {str(bad["missing"]), str(bad["broken"])}
    assert "no such file" in report.failed[str(bad["missing"])]
    assert "not a video" in report.failed[str(bad["broken"])]
    assert report.bytes_built == sum(cache.path_for(p, SPEC).stat().st_size for p in good)
    for i, p in enumerate(good):
        assert cache.get(p, SPEC, require=True).array[3, 0, 0, 0] == i + 3

    again = build_cache(cache, refs, SPEC, workers=workers, progress=False)
    assert sorted(again.hit) == sorted(report.built) and not again.built
    assert all(decodes(p) == 1 for p in good)


def test_a_worker_crash_fails_only_its_own_video(tmp_path: Path) -> None:
    good, _ = _videos(tmp_path)
    crasher = tmp_path / "crash.mp4"
    crasher.write_bytes(b"CRASH" + b"x" * 100)  # largest file: scheduled first
    cache = FrameCache(tmp_path / "cache", decode=fake_decode)
    report = build_cache(cache, [crasher, *good], SPEC, workers=2, progress=False)
    assert list(report.failed) == [str(crasher)]
    assert "crashed" in report.failed[str(crasher)]
    assert sorted(report.built + report.hit) == sorted(str(p) for p in good)


def test_windows_of_one_video_are_separate_build_items(tmp_path: Path) -> None:
    good, _ = _videos(tmp_path)
    cache = FrameCache(tmp_path / "cache", decode=fake_decode)
    refs = [VideoRef(path=str(good[0]), start=0.0, end=1.0), VideoRef(path=str(good[0]))]
    report = build_cache(cache, [*refs, refs[0]], SPEC, workers=0, progress=False)
    assert len(report.built) == 2 and not report.failed
    assert len(list(cache.entries())) == 2


def test_a_decoder_workers_cannot_receive_is_refused_up_front(tmp_path: Path) -> None:
    from evalkit.errors import CacheError

    good, _ = _videos(tmp_path)
    cache = FrameCache(tmp_path / "cache", decode=lambda ref, spec: fake_decode(ref, spec))
    with pytest.raises(CacheError, match="module-level function or workers=0"):
        build_cache(cache, good, SPEC, workers=2, progress=False)
    assert build_cache(cache, good, SPEC, workers=0, progress=False).ok


def _decoder_threads_here(_: int = 0) -> int:
    from evalkit.video import decode

    return decode._threads


def test_decoding_workers_split_the_cores_between_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """N workers on C cores decode with C // N threads each (never 0 = one per core, which
    would start C threads in every worker), so a parallel build does not oversubscribe."""
    from evalkit.cache import build

    monkeypatch.setattr(build, "usable_cpus", lambda: 8)
    assert [build.decoder_threads(w) for w in (1, 2, 3, 8, 16)] == [8, 4, 2, 1, 1]
    with build.decoding_pool(2, threads=3) as pool:
        assert set(pool.map(_decoder_threads_here, range(4))) == {3}
    with build.decoding_pool(1) as pool:  # default: the (patched) cores for one worker
        assert pool.submit(_decoder_threads_here).result() == build.decoder_threads(1)
    from evalkit.video.decode import set_decoder_threads

    with pytest.raises(ValueError, match="threads"):
        set_decoder_threads(-1)


def _niceness(_: int = 0) -> int:
    return os.nice(0)


def test_decoding_beside_an_engine_start_leaves_it_a_core_at_a_lower_priority(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's warm-up and a sweep's decode run beside the engine's start: at most the
    cores less one, their niceness raised by BESIDE_ENGINE_NICE. A plain cache build and a
    run's miss pool (during generation the engine waits for it) keep the caller's."""
    from evalkit.cache import build
    from evalkit.run.components import miss_pool
    from evalkit.run.warmup import warming

    here = os.nice(0)
    lower = min(19, here + build.BESIDE_ENGINE_NICE)
    with build.decoding_pool(1) as pool:
        assert pool.submit(_niceness).result() == here
    with miss_pool(1) as pool:
        assert pool.submit(_niceness).result() == here
    with warming(FrameCache(tmp_path / "c"), [], 1) as warmup:
        assert warmup.pool.submit(_niceness).result() == lower

    nice = build.BESIDE_ENGINE_NICE
    cases = [(2, 2, (1, 1)), (1, 2, (1, 1)), (8, 4, (4, 1)), (8, 16, (7, 1)), (16, 3, (3, 5))]
    for cores, workers, expected in cases:
        monkeypatch.setattr(build, "usable_cpus", lambda cores=cores: cores)
        assert build.beside_engine(workers) == build.Processes(*expected, nice)

    seen: list[tuple[int, int | None, int]] = []
    real = build.decoding_pool

    def spy(workers: int, threads: int | None = None, nice: int = 0) -> object:
        seen.append((workers, threads, nice))
        return real(workers, threads, nice)

    import evalkit.sweep as sw
    from evalkit.run.config import RunConfig

    monkeypatch.setattr(build, "usable_cpus", lambda: 2)
    monkeypatch.setattr(build, "decoding_pool", spy)
    with warming(FrameCache(tmp_path / "c"), [], 2):
        pass
    path = tmp_path / "v.mp4"
    path.write_bytes(b"not a video")  # fails its build: the pool is what is looked at
    cfg = RunConfig(model="m", cache_root=str(tmp_path / "cache"), cache_workers=2)
    sw.decode_once([([VideoRef(path=str(path))], [SPEC])], cfg)
    assert seen and set(seen) == {(1, 1, nice)}  # the warm-up's and the sweep's


def _preloaded(_: int = 0) -> tuple[bool, int]:
    import sys

    torch = sys.modules.get("torch")
    return torch is not None, torch.get_num_threads() if torch is not None else 0


def test_decoding_workers_fork_with_the_decoder_and_torch_imported_once() -> None:
    """Every pool's workers fork from one server that imported the decoder and torch: a
    pool after the first starts without importing them again (a spawned worker imported
    torch on its first resize, seconds of a core each), and each still gets its threads."""
    from evalkit.cache import build

    for threads in (1, 2):
        with build.decoding_pool(1, threads=threads) as pool:
            assert pool.submit(_preloaded).result() == (True, threads)
