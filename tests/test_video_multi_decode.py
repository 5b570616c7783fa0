"""load_videos: several FrameSpecs of one clip from one decode, each bit-identical to alone.

The contract of issue 27 item 3: the union of the frames all specs sample is decoded once
at source resolution and each spec's frames are resized from those source frames, so
frames and VideoMeta equal what ``load_video`` gives for that spec alone, for the
reference resize and for ``pil``. The control test shows the comparison can fail: the
shortcut of resizing one spec's output to another spec's size is not bit-identical.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evalkit.errors import VideoError
from evalkit.sample import VideoRef
from evalkit.testing.index_video import read_indices, write_index_video
from evalkit.video import FrameSpec, load_video, load_videos, resize_frames

P28 = 28 * 28


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Index videos at sizes that are no multiple of 28, in two codecs, one rotated (PyAV),
    one with a variable frame rate."""
    d = tmp_path_factory.mktemp("multi")
    return {
        "mp4": write_index_video(d / "odd.mp4", 75, fps=25.0, width=338, height=190),
        "mkv": write_index_video(d / "odd.mkv", 48, fps=24.0, width=250, height=146),
        "rotated": write_index_video(
            d / "rot.mp4", 40, fps=20.0, width=206, height=118, rotation=90
        ),
        "vfr": write_index_video(  # timestamps are the frames' own, not index / fps
            d / "vfr.mp4",
            50,
            width=226,
            height=130,
            vfr_timestamps=[0.03 * i + 0.001 * i * i for i in range(50)],
        ),
    }


def _grid(resize: str, **common: Any) -> list[FrameSpec]:
    """2 frame counts x 2 pixel budgets, as a sweep asks for."""
    return [
        FrameSpec(nframes=n, max_pixels=p, min_pixels=16 * P28, resize=resize, **common)  # type: ignore[arg-type]
        for n in (8, 14)
        for p in (40 * P28, 96 * P28)
    ]


def _swept(resize: str) -> list[FrameSpec]:
    """The FrameSpecs ``evalkit sweep`` builds: SynthVideo's pinned spec under frame-count,
    pixel-budget and frame-cap overrides (RunConfig.frames, as each setting's run has it)."""
    from evalkit.bench.registry import get_benchmark
    from evalkit.run.config import FrameOverrides

    pinned = get_benchmark("SynthVideo").frames
    grid = [
        FrameOverrides(nframes=n, max_pixels=p, resize=resize)  # type: ignore[arg-type]
        for n in (4, 8)
        for p in (16 * P28, 48 * P28)
    ]
    grid.append(FrameOverrides(fps=3.0, max_frames=6, resize=resize))  # type: ignore[arg-type]
    return [o.apply(pinned) for o in grid]


SPEC_SETS = {
    "sweep_settings_torchvision": _swept("torchvision"),
    "sweep_settings_pil": _swept("pil"),
    "nframes_x_max_pixels_torchvision": _grid("torchvision"),
    "nframes_x_max_pixels_pil": _grid("pil"),
    "fps_and_total_pixels_torchvision": [
        FrameSpec(fps=2.0, min_frames=4, max_frames=12, total_pixels=12 * 64 * P28),
        FrameSpec(fps=5.0, min_frames=4, max_frames=12, min_pixels=8 * P28),
        FrameSpec(nframes=6, total_pixels=6 * 32 * P28, min_pixels=8 * P28),
    ],
    "fps_and_total_pixels_pil": [
        FrameSpec(
            fps=3.0, max_frames=10, total_pixels=10 * 48 * P28, min_pixels=8 * P28, resize="pil"
        ),
        FrameSpec(fps=1.0, min_frames=2, max_pixels=64 * P28, min_pixels=8 * P28, resize="pil"),
    ],
    "repeats_factor32_and_a_window": [
        FrameSpec(nframes=100, max_pixels=32 * P28, min_pixels=8 * P28),  # more than the clip
        FrameSpec(nframes=4, factor=32, max_pixels=80 * 32 * 32, min_pixels=8 * P28),
        FrameSpec(fps=4.0, start=0.5, end=1.5, max_pixels=48 * P28, min_pixels=8 * P28),
    ],
}


def _meta(meta: Any) -> dict[str, Any]:
    d = dict(meta.to_dict())
    # PyAV counts the frames the (shared) decode decoded: a fact of the decode, not of the
    # frames; load_videos documents that it differs there and nowhere else.
    d["extra"] = {k: v for k, v in d["extra"].items() if k != "pyav_decoded_frames"}
    return d


@pytest.mark.parametrize("clip", ["mp4", "mkv", "rotated", "vfr"])
@pytest.mark.parametrize("name", list(SPEC_SETS))
def test_each_spec_of_one_decode_is_bit_identical_to_decoding_it_alone(
    clips: dict[str, Path], clip: str, name: str, one_torch_thread: None
) -> None:
    specs = SPEC_SETS[name]
    together = load_videos(clips[clip], specs)
    assert len(together) == len(specs)
    for spec, got in zip(specs, together, strict=True):
        alone = load_video(clips[clip], spec)
        assert got.array.shape == alone.array.shape, spec
        assert np.array_equal(got.array, alone.array), spec
        assert _meta(got.meta) == _meta(alone.meta), spec


def test_the_pyav_decode_count_is_the_only_meta_that_differs(
    clips: dict[str, Path], one_torch_thread: None
) -> None:
    specs = SPEC_SETS["nframes_x_max_pixels_pil"]
    together = load_videos(clips["rotated"], specs)
    alone = [load_video(clips["rotated"], s) for s in specs]
    assert {f.meta.decoder for f in together} == {"pyav"}
    assert all(_meta(t.meta) == _meta(a.meta) for t, a in zip(together, alone, strict=True))
    assert "pyav_decoded_frames" in together[0].meta.extra


def test_resizing_from_another_specs_frames_is_not_bit_identical(
    clips: dict[str, Path], one_torch_thread: None
) -> None:
    """Control: the shortcut the shared decode must not take does differ, so the test above
    can fail (an implementation that resized each spec from the largest one's output)."""
    big, small = (
        FrameSpec(nframes=8, max_pixels=96 * P28, min_pixels=16 * P28),
        FrameSpec(nframes=8, max_pixels=40 * P28, min_pixels=16 * P28),
    )
    large = load_video(clips["mp4"], big)
    alone = load_video(clips["mp4"], small)
    h, w = alone.meta.height, alone.meta.width
    shortcut = resize_frames(large.array, h, w, "torchvision")
    assert shortcut.shape == alone.array.shape
    assert not np.array_equal(shortcut, alone.array)


def test_the_union_of_the_specs_frames_is_read_once(
    clips: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import decord

    reads: list[int] = []

    class Counting(decord.VideoReader):  # type: ignore[misc]
        def get_batch(self, indices: list[int]) -> Any:
            reads.extend(indices)
            return super().get_batch(indices)

    monkeypatch.setattr(decord, "VideoReader", Counting)
    specs = SPEC_SETS["nframes_x_max_pixels_pil"]
    together = load_videos(clips["mp4"], specs)
    union = sorted({i for f in together for i in f.meta.indices})
    assert reads == union
    assert [read_indices(f.array) for f in together] == [f.meta.indices for f in together]


def test_a_ref_window_applies_to_every_spec(clips: dict[str, Path]) -> None:
    ref = VideoRef(path=str(clips["mp4"]), start=1.0, end=2.0)
    specs = SPEC_SETS["nframes_x_max_pixels_pil"][:2]
    for spec, got in zip(specs, load_videos(ref, specs), strict=True):
        assert got.meta.indices == load_video(ref, spec).meta.indices
        assert min(got.meta.indices) >= 25 and max(got.meta.indices) <= 50


def test_a_broken_file_fails_every_spec_with_the_single_decode_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"\x00" * 4096)
    specs = SPEC_SETS["nframes_x_max_pixels_pil"]
    with pytest.raises(VideoError) as alone:
        load_video(bad, specs[0])
    with pytest.raises(VideoError) as together:
        load_videos(bad, specs)
    assert str(together.value) == str(alone.value)
