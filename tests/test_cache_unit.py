"""Frame cache behaviour with a deterministic stand-in decoder (no real video decoding).

The stand-in turns a file's bytes into frames (pixel value = frame index + first byte), so
a test can tell which file content, and which spec, a served entry came from. It logs one
line per decode next to the file, so decodes can be counted across processes.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import struct
import time
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open

from evalkit.cache import FrameCache
from evalkit.cache.key import SourceIdentity, cache_key, source_identity
from evalkit.errors import CacheError, VideoError
from evalkit.sample import VideoRef
from evalkit.video.types import Frames, FrameSpec, VideoMeta

SPEC = FrameSpec(nframes=4, max_pixels=56 * 56, min_pixels=28 * 28)


def fake_decode(ref: VideoRef, spec: FrameSpec) -> Frames:
    """Frames derived from the file's bytes and the spec; b'BAD' files fail, b'SLOW' sleep."""
    data = Path(ref.path).read_bytes()
    with open(ref.path + ".decodes", "a") as log:
        log.write(f"{os.getpid()}\n")
    if data.startswith(b"BAD"):
        raise VideoError(ref.path, "not a video (stand-in decoder)")
    if data.startswith(b"CRASH") and multiprocessing.parent_process() is not None:
        os._exit(3)  # a decoder that takes its process down with it
    if data.startswith(b"SLOW"):
        time.sleep(1.0)
    if data.startswith(b"GROW"):  # the file changes while it is being decoded
        with open(ref.path, "ab") as f:
            f.write(b"+")
    n = spec.nframes or 4
    side = spec.factor * (2 if spec.max_pixels >= (2 * spec.factor) ** 2 else 1)
    base = data[0] if data else 0
    frames = np.empty((n, side, side, 3), dtype=np.uint8)
    for i in range(n):
        frames[i] = (base + i) % 256
    return Frames(frames, square_meta(n, side))


def square_meta(n: int, side: int) -> VideoMeta:
    """Metadata of ``n`` square frames taken from a 100-frame, 30 fps source."""
    return VideoMeta(
        source_fps=30.0,
        total_frames=100,
        duration_s=100 / 30,
        indices=list(range(n)),
        timestamps=[i / 30 for i in range(n)],
        height=side,
        width=side,
        source_height=side,
        source_width=side,
        decoder="fake",
    )


def decodes(video: Path) -> int:
    log = Path(str(video) + ".decodes")
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.fixture
def cache(tmp_path: Path) -> FrameCache:
    return FrameCache(tmp_path / "cache", decode=fake_decode)


@pytest.fixture
def video(tmp_path: Path) -> Path:
    p = tmp_path / "a.mp4"
    p.write_bytes(b"\x10" + b"x" * 100)
    return p


def test_a_miss_is_decoded_once_then_served_from_the_file(cache: FrameCache, video: Path) -> None:
    first = cache.get(str(video), SPEC)
    second = cache.get(VideoRef(path=str(video)), SPEC)
    assert decodes(video) == 1
    assert np.array_equal(first.array, second.array)
    assert second.array[2, 0, 0, 0] == 0x10 + 2
    assert second.meta == first.meta
    assert cache.path_for(video, SPEC).is_file()


def test_loads_are_read_only_views_on_the_mapped_file(cache: FrameCache, video: Path) -> None:
    cache.get(video, SPEC)
    frames = cache.get(video, SPEC)
    assert not frames.array.flags.owndata and not frames.array.flags.writeable
    assert frames.array.base is not None


def test_entries_are_plain_safetensors_files(cache: FrameCache, video: Path) -> None:
    frames = cache.get(video, SPEC)
    with safe_open(str(cache.path_for(video, SPEC)), framework="numpy") as f:
        assert np.array_equal(f.get_tensor("frames"), frames.array)
        md = f.metadata()
    assert json.loads(md["evalkit.meta"])["indices"] == frames.meta.indices
    assert json.loads(md["evalkit.spec"]) == SPEC.model_dump(mode="json")


CHANGED = {
    "fps": 1.0,
    "nframes": 6,
    "min_frames": 2,
    "max_frames": 9,
    "min_pixels": 29 * 28,
    "max_pixels": 57 * 56,
    "total_pixels": 10**6,
    "factor": 32,
    "temporal_patch": 1,
    "start": 0.5,
    "end": 2.5,
    "resize": "pil",
    "size": (56, 84),
    "sampling": "segments",
    "keep_size": True,
}


def test_every_framespec_field_is_covered_by_this_test() -> None:
    assert set(CHANGED) == set(FrameSpec.model_fields)


def test_keys_of_specs_without_a_family_contract_are_those_made_before_it() -> None:
    # computed by the code before FrameSpec had size/sampling: a Qwen run's cache stays warm
    src = SourceIdentity("/data/v.mp4", 1234, 5678)
    ref = VideoRef(path="/data/v.mp4")
    fixed = FrameSpec(fps=None, nframes=32, factor=32, max_pixels=200704)
    assert cache_key(src, ref, FrameSpec()) == (
        "0cd314d2c88b6190ed8e26feb771fedb12393bc2948e7bc81ee101ad9d70461f"
    )
    assert cache_key(src, ref, fixed) == (
        "3799b3a6ce9659674c3c9e7514f3f54983e3d33965f8282292f437a52bc0d461"
    )
    assert cache_key(src, ref, FrameSpec(size=(384, 384))) != cache_key(src, ref, FrameSpec())
    kept = cache_key(src, ref, FrameSpec(keep_size=True))
    assert kept != cache_key(src, ref, FrameSpec()) and "keep_size" not in FrameSpec().model_dump()


@pytest.mark.parametrize("field", sorted(CHANGED))
def test_changing_any_spec_field_is_a_different_entry(
    cache: FrameCache, video: Path, field: str
) -> None:
    other = SPEC.model_copy(update={field: CHANGED[field]})
    cache.get(video, SPEC)
    assert cache.path_for(video, other) != cache.path_for(video, SPEC)
    assert cache.lookup(video, other) is None


def test_the_ref_window_is_part_of_the_key(cache: FrameCache, video: Path) -> None:
    cache.get(video, SPEC)
    windowed = VideoRef(path=str(video), start=1.0, end=2.0)
    assert cache.lookup(windowed, SPEC) is None
    assert cache.path_for(windowed, SPEC) != cache.path_for(video, SPEC)


def test_a_ref_window_and_the_same_spec_window_share_one_entry(
    cache: FrameCache, video: Path
) -> None:
    # The decoder lets a ref's window replace the spec's, so these all decode alike.
    windowed = VideoRef(path=str(video), start=1.0, end=2.0)
    same = {
        cache.path_for(windowed, SPEC),
        cache.path_for(windowed, SPEC.window(1.0, 2.0)),
        cache.path_for(windowed, SPEC.window(0.0, 9.0)),
        cache.path_for(video, SPEC.window(1.0, 2.0)),
    }
    assert len(same) == 1


def test_rewriting_the_source_is_never_served_stale(cache: FrameCache, video: Path) -> None:
    cache.get(video, SPEC)
    st = video.stat()
    video.write_bytes(b"\x20" + b"x" * 100)  # same size, new content
    os.utime(video, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert cache.lookup(video, SPEC) is None
    assert cache.get(video, SPEC).array[0, 0, 0, 0] == 0x20
    assert decodes(video) == 2


def test_touching_the_source_alone_invalidates_a_stat_key(cache: FrameCache, video: Path) -> None:
    cache.get(video, SPEC)
    os.utime(video, ns=(0, video.stat().st_mtime_ns + 1))
    assert cache.lookup(video, SPEC) is None


def test_a_size_change_invalidates_the_entry(cache: FrameCache, video: Path) -> None:
    cache.get(video, SPEC)
    st = video.stat()
    with open(video, "ab") as f:
        f.write(b"more")
    os.utime(video, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime, other size
    assert cache.lookup(video, SPEC) is None


def test_content_identity_survives_a_touch_but_not_an_edit(tmp_path: Path, video: Path) -> None:
    cache = FrameCache(tmp_path / "c", decode=fake_decode, identity="content")
    cache.get(video, SPEC)
    os.utime(video, ns=(0, video.stat().st_mtime_ns + 5_000_000))
    assert cache.lookup(video, SPEC) is not None
    copy = tmp_path / "copy.mp4"
    copy.write_bytes(video.read_bytes())
    assert cache.path_for(copy, SPEC) == cache.path_for(video, SPEC)
    video.write_bytes(b"\x30" + b"x" * 100)
    assert cache.lookup(video, SPEC) is None


def test_content_identity_sees_a_same_size_rewrite_with_its_mtime_put_back(
    tmp_path: Path, video: Path
) -> None:
    cache = FrameCache(tmp_path / "c", decode=fake_decode, identity="content")
    assert cache.get(video, SPEC).array[0, 0, 0, 0] == 0x10
    st = video.stat()
    video.write_bytes(b"\x20" + b"x" * 100)  # same size, same inode, in this process
    os.utime(video, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert cache.get(video, SPEC).array[0, 0, 0, 0] == 0x20


def test_require_raises_naming_the_video_and_lookup_returns_none(
    cache: FrameCache, video: Path
) -> None:
    assert cache.lookup(video, SPEC) is None
    with pytest.raises(CacheError, match=str(video)):
        cache.get(video, SPEC, require=True)
    assert decodes(video) == 0


def test_a_missing_source_is_a_video_error_naming_it(cache: FrameCache, tmp_path: Path) -> None:
    with pytest.raises(VideoError, match=r"nope\.mp4: no such file"):
        cache.get(tmp_path / "nope.mp4", SPEC)


def test_codec_is_part_of_the_key(tmp_path: Path, video: Path) -> None:
    raw = FrameCache(tmp_path / "c", decode=fake_decode)
    jpeg = FrameCache(tmp_path / "c", decode=fake_decode, codec="jpeg", jpeg_quality=95)
    jpeg80 = FrameCache(tmp_path / "c", decode=fake_decode, codec="jpeg", jpeg_quality=80)
    paths = {c.path_for(video, SPEC) for c in (raw, jpeg, jpeg80)}
    assert len(paths) == 3


def test_jpeg_entries_read_back_close_to_the_decoded_frames(tmp_path: Path, video: Path) -> None:
    cache = FrameCache(tmp_path / "c", decode=fake_decode, codec="jpeg", jpeg_quality=95)
    built = cache.get(video, SPEC)
    again = cache.get(video, SPEC)
    expected = fake_decode(VideoRef(path=str(video)), SPEC).array
    assert again.array.shape == expected.shape
    assert np.abs(again.array.astype(int) - expected.astype(int)).max() <= 2
    assert np.array_equal(built.array, again.array)


# -- damaged files -----------------------------------------------------------------------


def _header(path: Path) -> tuple[dict, bytes]:
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + n]), data[8 + n :]


def _rewrite(path: Path, header: dict, body: bytes) -> None:
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + body)


def _truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[:-100])


def _garbage_header(p: Path) -> None:
    p.write_bytes(b"\x40\x00\x00\x00\x00\x00\x00\x00" + b"{not json" * 20)


def _wrong_shape_in_metadata(p: Path) -> None:
    header, body = _header(p)
    t, h, w, c = json.loads(header["__metadata__"]["evalkit.shape"])
    header["__metadata__"]["evalkit.shape"] = json.dumps([t, w // 2, h * 2, c])
    _rewrite(p, header, body)


def _wrong_tensor_shape(p: Path) -> None:
    header, body = _header(p)
    t, h, w, c = header["frames"]["shape"]
    header["frames"]["shape"] = [t * 2, h // 2, w, c]  # same byte count, wrong layout
    _rewrite(p, header, body)


def _zero_bytes(p: Path) -> None:
    p.write_bytes(b"")


def _other_keys_file(p: Path) -> None:
    header, body = _header(p)
    header["__metadata__"]["evalkit.key"] = "0" * 64
    _rewrite(p, header, body)


def _old_format(p: Path) -> None:
    header, body = _header(p)
    header["__metadata__"]["evalkit.format"] = "0"
    _rewrite(p, header, body)


DAMAGE = [
    _truncate,
    _garbage_header,
    _wrong_shape_in_metadata,
    _wrong_tensor_shape,
    _zero_bytes,
    _other_keys_file,
    _old_format,
]


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda f: f.__name__.strip("_"))
def test_a_damaged_entry_is_a_miss_and_is_rebuilt(cache: FrameCache, video: Path, damage) -> None:
    good = np.array(cache.get(video, SPEC).array)
    path = cache.path_for(video, SPEC)
    damage(path)
    with pytest.raises(CacheError, match="damaged"):
        cache.get(video, SPEC, require=True)
    assert cache.lookup(video, SPEC) is None
    assert not path.exists()  # removed, never served
    damage_again = cache.get(video, SPEC)
    assert np.array_equal(damage_again.array, good)
    assert decodes(video) == 2


def test_damage_inside_the_data_is_caught_by_verify(cache: FrameCache, video: Path) -> None:
    from evalkit.cache import verify

    cache.get(video, SPEC)
    path = cache.path_for(video, SPEC)
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))
    report = verify(cache)
    assert list(report.damaged) == [str(path)]
    assert "checksum" in report.damaged[str(path)]
    verify(cache, remove=True)
    assert not path.exists()


def test_the_source_identity_records_the_resolved_path(video: Path) -> None:
    ident = source_identity(str(video.parent / "." / video.name))
    assert ident.path == str(video.resolve())
    assert ident.size == video.stat().st_size


def test_put_stores_frames_decoded_elsewhere(cache: FrameCache, video: Path) -> None:
    frames = fake_decode(VideoRef(path=str(video)), SPEC)
    path = cache.put(video, SPEC, frames)
    assert path == cache.path_for(video, SPEC)
    assert np.array_equal(cache.get(video, SPEC, require=True).array, frames.array)
    assert decodes(video) == 1  # only the call above


def test_threads_asking_for_one_key_decode_it_once(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    video = tmp_path / "slow.mp4"
    video.write_bytes(b"SLOW" + b"x" * 10)
    cache = FrameCache(tmp_path / "c", decode=fake_decode)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: cache.get(video, SPEC), range(4)))
    assert decodes(video) == 1
    assert all(np.array_equal(r.array, results[0].array) for r in results)


def test_no_single_flipped_header_byte_is_ever_served(cache: FrameCache, video: Path) -> None:
    from evalkit.cache.entry import read_entry
    from evalkit.cache.fileformat import DamagedFile

    good = cache.get(video, SPEC)
    expected, meta = np.array(good.array), good.meta
    path = cache.path_for(video, SPEC)
    key = path.name.split(".")[0]
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    served = 0
    for pos in range(8 + n):
        bad = bytearray(data)
        bad[pos] ^= 0x01
        path.write_bytes(bytes(bad))
        try:
            frames, _ = read_entry(path, key)
        except DamagedFile:
            continue
        served += 1  # only a harmless flip (JSON whitespace in the padding) may get through
        assert np.array_equal(frames.array, expected) and frames.meta == meta, pos
    assert served <= 8  # at most the padding bytes


def test_the_default_root_follows_evalkit_cache(monkeypatch, tmp_path: Path) -> None:
    from evalkit.cache import default_root

    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "here"))
    assert FrameCache().root == tmp_path / "here"
    monkeypatch.delenv("EVALKIT_CACHE")
    assert default_root() == Path.home() / ".cache" / "evalkit" / "frames"


def test_bad_cache_options_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(CacheError, match="codec 'png'"):
        FrameCache(tmp_path, codec="png")  # type: ignore[arg-type]
    with pytest.raises(CacheError, match="identity 'inode'"):
        FrameCache(tmp_path, identity="inode")  # type: ignore[arg-type]
    with pytest.raises(CacheError, match="jpeg_quality"):
        FrameCache(tmp_path, codec="jpeg", jpeg_quality=0)


def test_a_source_that_changes_during_decoding_is_not_cached(cache: FrameCache, tmp_path) -> None:
    video = tmp_path / "growing.mp4"
    video.write_bytes(b"GROW" + b"x" * 10)
    with pytest.raises(VideoError, match="changed while it was being decoded"):
        cache.get(video, SPEC)
    assert not list(cache.entries())
