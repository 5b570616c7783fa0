"""One video, several FrameSpecs, one decode: FrameCache.ensure_specs and build_cache(specs).

The entries are the very files single-spec builds write (same keys, same bytes), so a
later single-spec ``get`` is a hit; a broken video fails every spec with the reason a
single build gives.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evalkit.cache import FrameCache, build_cache
from evalkit.cache import frame_cache as frame_cache_module
from evalkit.errors import VideoError
from evalkit.sample import VideoRef
from evalkit.testing.broken_videos import write_text_file, write_truncated
from evalkit.testing.index_video import write_index_video
from evalkit.video import decode as decode_module
from evalkit.video.types import Frames, FrameSpec

P28 = 28 * 28
SPECS = [
    FrameSpec(nframes=n, max_pixels=p, min_pixels=8 * P28)
    for n in (4, 8)
    for p in (24 * P28, 60 * P28)
]


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("videos")
    return [
        write_index_video(d / "a.mp4", 60, 30.0, 250, 146),
        write_index_video(d / "b.mkv", 40, 20.0, 176, 144),
    ]


@pytest.fixture
def header_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every decode starts with one read_header: the paths it was called with."""
    calls: list[Path] = []
    real = decode_module.read_header

    def counting(path: Path) -> decode_module.Header:
        calls.append(path)
        return real(path)

    monkeypatch.setattr(decode_module, "read_header", counting)
    return calls


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.safetensors"))}


def _no_decoding(ref: VideoRef, spec: FrameSpec) -> Frames:
    raise AssertionError(f"decoded {ref.path} although its entry should be cached")


def test_entries_built_together_are_the_files_single_builds_write(
    tmp_path: Path, videos: list[Path]
) -> None:
    together, alone = FrameCache(tmp_path / "together"), FrameCache(tmp_path / "alone")
    together.ensure_specs(videos[0], SPECS)
    for spec in SPECS:
        alone.get(videos[0], spec)
    assert len(_files(together.root)) == len(SPECS)
    assert _files(together.root) == _files(alone.root)


def test_a_later_single_spec_get_is_a_hit(tmp_path: Path, videos: list[Path]) -> None:
    FrameCache(tmp_path / "c").ensure_specs(videos[0], SPECS)
    later = FrameCache(tmp_path / "c", decode=_no_decoding)
    for spec in SPECS:
        assert later.get(videos[0], spec, require=True).meta.indices
        assert later.ensure(videos[0], spec)[0] == "hit"


def test_one_decode_builds_every_spec(
    tmp_path: Path, videos: list[Path], header_reads: list[Path]
) -> None:
    done = FrameCache(tmp_path / "c").ensure_specs(videos[1], SPECS)
    assert [status for status, _ in done] == ["built"] * len(SPECS)
    assert len(header_reads) == 1


def test_only_the_missing_specs_are_decoded(
    tmp_path: Path, videos: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = FrameCache(tmp_path / "c")
    for spec in SPECS[:2]:
        cache.get(videos[0], spec)
    asked: list[list[FrameSpec]] = []
    real = frame_cache_module._load_videos

    def recording(ref: VideoRef, specs: list[FrameSpec]) -> list[Frames]:
        asked.append(list(specs))
        return real(ref, specs)

    monkeypatch.setattr(frame_cache_module, "_load_videos", recording)
    done = cache.ensure_specs(videos[0], SPECS)
    assert [status for status, _ in done] == ["hit", "hit", "built", "built"]
    assert asked == [SPECS[2:]]


def test_a_spec_given_twice_is_built_once(tmp_path: Path, videos: list[Path]) -> None:
    done = FrameCache(tmp_path / "c").ensure_specs(videos[0], [SPECS[0], SPECS[0]])
    assert [status for status, _ in done] == ["built", "hit"]


@pytest.mark.parametrize("broken", ["truncated", "text", "missing"])
def test_a_broken_video_fails_every_spec_with_the_single_build_reason(
    tmp_path: Path, videos: list[Path], broken: str
) -> None:
    path = tmp_path / "bad.mp4"
    if broken == "truncated":
        write_truncated(videos[0], path)
    elif broken == "text":
        write_text_file(path)
    single = build_cache(FrameCache(tmp_path / "one"), [path], SPECS[0], workers=0, progress=False)
    cache = FrameCache(tmp_path / "many")
    multi = build_cache(cache, [path], SPECS, workers=0, progress=False)
    assert single.failed and multi.failed == single.failed
    assert not multi.built and not list(cache.entries())
    with pytest.raises(VideoError) as raised:
        cache.ensure_specs(path, SPECS)
    assert raised.value.reason == single.failed[str(path)]


def test_build_cache_with_several_specs_counts_an_entry_per_spec(
    tmp_path: Path, videos: list[Path], header_reads: list[Path]
) -> None:
    cache = FrameCache(tmp_path / "c")
    first = build_cache(cache, videos, SPECS, workers=0, progress=False)
    again = build_cache(cache, videos, SPECS, workers=0, progress=False)
    assert len(first.built) == len(again.hit) == len(videos) * len(SPECS)
    assert first.bytes_built == again.bytes_total > 0
    assert len(header_reads) == len(videos)  # one decode per video, none the second time


def test_worker_processes_build_several_specs_too(tmp_path: Path, videos: list[Path]) -> None:
    cache = FrameCache(tmp_path / "c")
    report = build_cache(cache, videos[:1], SPECS, workers=1, progress=False)
    assert report.ok and len(report.built) == len(SPECS)
    assert _files(cache.root).keys() == {
        str(cache.path_for(videos[0], s).relative_to(cache.root)) for s in SPECS
    }
