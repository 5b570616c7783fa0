"""Damaged frame data is never served: per-chunk checksums checked on first touch, stamps.

A byte flipped inside an entry's tensor data used to be served as a hit (only ``cache
verify`` read the data checksum); these tests flip bytes the way a stray write or a bad
copy would and expect a miss, a warning naming the file, and a rebuild.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pytest

from evalkit.cache import FORMAT_VERSION, FrameCache, integrity, verify
from evalkit.cache.integrity import stamp_path
from evalkit.sample import VideoRef
from evalkit.video.types import Frames
from tests.test_cache_unit import SPEC, decodes, fake_decode, square_meta


@pytest.fixture
def video(tmp_path: Path) -> Path:
    p = tmp_path / "a.mp4"
    p.write_bytes(b"\x10" + b"x" * 100)
    return p


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stamps may be written at once (normally only for files unchanged for 2 s)."""
    monkeypatch.setattr(integrity, "_SETTLED_NS", 0)


def flip(path: Path, offset: int, keep_mtime: bool = True) -> None:
    """XOR one byte at ``offset`` in place, optionally putting the mtime back."""
    st = path.stat()
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x01]))
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def data_start(path: Path) -> int:
    """The file offset of the entry's data section."""
    return 8 + int.from_bytes(path.read_bytes()[:8], "little")


def data_middle(path: Path) -> int:
    """The file offset of the middle byte of the entry's data section."""
    start = data_start(path)
    return start + (path.stat().st_size - start) // 2


def big_frames(n: int = 8, side: int = 256) -> Frames:
    """Frames large enough to span several checksum chunks (1.5 MB)."""
    rng = np.random.default_rng(0)
    array = rng.integers(0, 256, (n, side, side, 3), dtype=np.uint8)
    return Frames(array, square_meta(n, side))


def test_a_bit_flip_in_the_middle_of_the_frames_is_a_miss_rebuilt_with_a_warning(
    tmp_path: Path, video: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = FrameCache(tmp_path / "c", decode=fake_decode)
    good = np.array(cache.get(video, SPEC).array)
    path = cache.path_for(video, SPEC)
    flip(path, data_middle(path))
    fresh = FrameCache(tmp_path / "c", decode=fake_decode)  # another process, say
    with caplog.at_level(logging.WARNING, logger="evalkit.cache"):
        served = fresh.get(video, SPEC)
    assert np.array_equal(served.array, good)
    assert decodes(video) == 2  # rebuilt, not served
    assert any(str(path) in r.getMessage() and "checksum" in r.getMessage() for r in caplog.records)


def test_lookup_of_a_flipped_entry_is_none_and_removes_it(tmp_path: Path, video: Path) -> None:
    FrameCache(tmp_path / "c", decode=fake_decode).get(video, SPEC)
    cache = FrameCache(tmp_path / "c", decode=fake_decode)
    path = cache.path_for(video, SPEC)
    flip(path, path.stat().st_size - 3)
    assert cache.lookup(video, SPEC) is None
    assert not path.exists()


def test_the_damage_message_names_the_chunk_and_frames(tmp_path: Path, video: Path) -> None:
    cache = FrameCache(tmp_path / "c", decode=fake_decode)
    path = cache.put(video, SPEC, big_frames())  # 8 frames of 196608 bytes, 2 chunks
    flip(path, data_start(path) + 1_100_000)  # frame 5, second chunk
    report = verify(FrameCache(tmp_path / "c"))
    why = report.damaged[str(path)]
    assert "tensor 'frames' bytes 1048576..1572864 (frames 5-7)" in why


def test_a_jpeg_entry_with_a_flipped_byte_is_rebuilt(tmp_path: Path, video: Path) -> None:
    def jpeg() -> FrameCache:
        return FrameCache(tmp_path / "c", decode=fake_decode, codec="jpeg")

    good = np.array(jpeg().get(video, SPEC).array)
    path = jpeg().path_for(video, SPEC)
    flip(path, data_middle(path))
    assert np.array_equal(jpeg().get(video, SPEC).array, good)
    assert decodes(video) == 2


def test_one_process_checks_an_entry_once(tmp_path: Path, video: Path) -> None:
    FrameCache(tmp_path / "c", decode=fake_decode).get(video, SPEC)
    cache = FrameCache(tmp_path / "c", decode=fake_decode)
    for _ in range(3):
        cache.get(video, SPEC)
    assert cache.verifier is not None and cache.verifier.full_checks == 1


def test_a_stamp_spares_later_processes_the_full_pass(
    tmp_path: Path, video: Path, settled: None
) -> None:
    FrameCache(tmp_path / "c", decode=fake_decode).get(video, SPEC)
    first = FrameCache(tmp_path / "c", decode=fake_decode)
    first.get(video, SPEC)
    assert stamp_path(first.path_for(video, SPEC)).exists()
    later = FrameCache(tmp_path / "c", decode=fake_decode)
    later.get(video, SPEC)
    assert later.verifier is not None and later.verifier.full_checks == 0


def test_a_stamp_never_vouches_for_bytes_written_after_it(
    tmp_path: Path, video: Path, settled: None
) -> None:
    FrameCache(tmp_path / "c", decode=fake_decode).get(video, SPEC)
    FrameCache(tmp_path / "c", decode=fake_decode).get(video, SPEC)  # stamps it
    path = FrameCache(tmp_path / "c").path_for(video, SPEC)
    assert stamp_path(path).exists()
    flip(path, data_middle(path), keep_mtime=True)  # mtime restored; ctime moves anyway
    cache = FrameCache(tmp_path / "c", decode=fake_decode)
    assert cache.lookup(video, SPEC) is None
    assert not path.exists() and not stamp_path(path).exists()


def test_a_fresh_file_is_not_stamped_until_it_settles(tmp_path: Path, video: Path) -> None:
    cache = FrameCache(tmp_path / "c", decode=fake_decode)
    cache.get(video, SPEC)
    assert not stamp_path(cache.path_for(video, SPEC)).exists()


def test_verify_false_serves_without_checking(tmp_path: Path, video: Path) -> None:
    cache = FrameCache(tmp_path / "c", decode=fake_decode, verify=False)
    cache.get(video, SPEC)
    assert cache.verifier is None


def test_verify_stamps_the_entries_it_read_in_full(
    tmp_path: Path, video: Path, settled: None
) -> None:
    cache = FrameCache(tmp_path / "c", decode=fake_decode)
    cache.get(video, SPEC)
    assert verify(cache).good == 1
    assert stamp_path(cache.path_for(video, SPEC)).exists()


def test_prune_removes_stamps_of_removed_entries(
    tmp_path: Path, video: Path, settled: None
) -> None:
    from evalkit.cache import prune

    cache = FrameCache(tmp_path / "c", decode=fake_decode)
    cache.get(video, SPEC)
    verify(cache)
    prune(cache, everything=True)
    assert not list((tmp_path / "c").rglob("*" + integrity.STAMP_SUFFIX))


def test_the_format_version_moved_with_the_layout() -> None:
    # Entries of format 1 carry no chunk checksums: their keys differ, they are rebuilt.
    assert FORMAT_VERSION == 2


def test_a_windowed_ref_is_checked_like_any_entry(tmp_path: Path, video: Path) -> None:
    ref = VideoRef(path=str(video), start=0.0, end=1.0)
    FrameCache(tmp_path / "c", decode=fake_decode).get(ref, SPEC)
    path = FrameCache(tmp_path / "c").path_for(ref, SPEC)
    flip(path, data_middle(path))
    assert FrameCache(tmp_path / "c", decode=fake_decode).lookup(ref, SPEC) is None
