"""load_video end to end: the frames returned are the frames the spec asks for.

Every synthetic frame encodes its own index, so each test reads back which source frames
came out (after lossy coding and resizing) and compares them with the sampling rule.
"""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from evalkit.errors import VideoError
from evalkit.sample import VideoRef
from evalkit.testing.broken_videos import write_text_file, write_truncated, write_zero_bytes
from evalkit.testing.index_video import read_indices, write_index_video
from evalkit.video import FrameSpec, load_video, sample_indices, video_size

SMALL = FrameSpec(fps=2.0, min_pixels=64 * 64, max_pixels=112 * 112, factor=28)
VFR_TIMES = [0.0, 0.02, 0.1, 0.3, 0.31, 0.32] + [0.5 + 0.07 * i for i in range(30)]

# name -> (file name, frames, fps, writer options)
CLIPS: dict[str, tuple[str, int, float, dict]] = {
    "mp4_h264": ("h264.mp4", 90, 30.0, {}),
    "mkv_hevc": ("hevc.mkv", 75, 25.0, {}),
    "avi_mpeg4": ("mpeg4.avi", 60, 30.0, {}),
    "webm_vp9": ("vp9.webm", 40, 20.0, {}),
    "vfr_mp4": ("vfr.mp4", len(VFR_TIMES), 30.0, {"vfr_timestamps": VFR_TIMES}),
    "rot90_mp4": ("rot90.mp4", 30, 30.0, {"rotation": 90}),
    "rot180_mp4": ("rot180.mp4", 30, 30.0, {"rotation": 180}),
    "rot270_mkv": ("rot270.mkv", 30, 30.0, {"rotation": 270}),
    "one_frame": ("one.mp4", 1, 30.0, {}),
}


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("clips")
    return {
        name: write_index_video(root / fname, n, fps, 160, 120, **opts)
        for name, (fname, n, fps, opts) in CLIPS.items()
    }


def _check_frames(path: Path, spec: FrameSpec) -> None:
    frames = load_video(path, spec)
    meta = frames.meta
    assert read_indices(frames.array) == meta.indices
    assert meta.indices == sample_indices(meta.total_frames, meta.source_fps, spec)
    h, w = video_size(120, 160, spec, len(meta.indices))
    assert frames.array.shape == (len(meta.indices), h, w, 3)
    assert (meta.height, meta.width, meta.source_height, meta.source_width) == (h, w, 120, 160)


@pytest.mark.parametrize("name", ["mp4_h264", "mkv_hevc", "avi_mpeg4", "webm_vp9"])
def test_each_container_yields_the_frames_the_spec_picks(clips: dict[str, Path], name: str) -> None:
    _, n, fps, _ = CLIPS[name]
    frames = load_video(clips[name], SMALL)
    assert (frames.meta.total_frames, frames.meta.source_fps) == (n, fps)
    assert frames.meta.decoder == "decord" and frames.meta.fallback_reason is None
    _check_frames(clips[name], SMALL)


@pytest.mark.parametrize(
    "spec",
    [
        FrameSpec(fps=1.0, min_frames=2, max_frames=8, min_pixels=56 * 56, max_pixels=84 * 84),
        FrameSpec(fps=8.0, max_frames=10, min_pixels=56 * 56, max_pixels=84 * 84),
        FrameSpec(nframes=6, min_pixels=64 * 64, max_pixels=128 * 128, factor=32),
        FrameSpec(nframes=200, min_pixels=56 * 56, max_pixels=56 * 56),  # > frames: repeats
        FrameSpec(nframes=40, min_pixels=56 * 56, max_pixels=56 * 56),  # > one decode chunk
        FrameSpec(fps=2.0, min_pixels=56 * 56, max_pixels=224 * 224, total_pixels=56 * 56 * 8),
    ],
    ids=["fps1", "capped", "nframes_f32", "nframes_repeat", "two_chunks", "total_budget"],
)
def test_specs_choose_indices_and_sizes(clips: dict[str, Path], spec: FrameSpec) -> None:
    _check_frames(clips["mp4_h264"], spec)


def test_kept_size_frames_are_the_decoded_source_pixels(tmp_path: Path) -> None:
    # a processor-grid family's input: an odd-sized clip comes out as decord decodes it
    import decord

    path = write_index_video(tmp_path / "odd.mp4", 30, 25.0, 167, 93, pix_fmt="yuv444p")
    spec = FrameSpec(fps=None, nframes=5, temporal_patch=1, sampling="linspace", keep_size=True)
    frames = load_video(path, spec)
    source = decord.VideoReader(str(path)).get_batch(frames.meta.indices).asnumpy()
    assert frames.array.shape == (5, 93, 167, 3) and np.array_equal(frames.array, source)
    assert (frames.meta.height, frames.meta.width) == (93, 167)


def test_variable_frame_rate_reports_real_timestamps(clips: dict[str, Path]) -> None:
    frames = load_video(
        clips["vfr_mp4"], FrameSpec(fps=4.0, min_pixels=64 * 64, max_pixels=112 * 112)
    )
    meta = frames.meta
    assert meta.total_frames == len(VFR_TIMES)
    # The average rate maps seconds to frames (as qwen-vl-utils does)...
    assert meta.source_fps == pytest.approx(len(VFR_TIMES) / meta.duration_s)
    assert read_indices(frames.array) == meta.indices
    # ...but each sampled frame carries its own presentation time.
    assert meta.timestamps == pytest.approx([VFR_TIMES[i] for i in meta.indices], abs=2e-3)


@pytest.mark.parametrize("name", ["rot90_mp4", "rot180_mp4", "rot270_mkv"])
def test_rotated_videos_come_out_upright(clips: dict[str, Path], name: str) -> None:
    frames = load_video(clips[name], SMALL)
    meta = frames.meta
    assert read_indices(frames.array) == meta.indices  # fails unless upright
    assert (meta.source_width, meta.source_height) == (160, 120)  # displayed size
    assert meta.extra["rotation"] == CLIPS[name][3]["rotation"]
    assert meta.decoder == "pyav" and "rotation" in (meta.fallback_reason or "")


def test_a_one_frame_video_repeats_its_frame(clips: dict[str, Path]) -> None:
    frames = load_video(clips["one_frame"], SMALL)
    assert frames.meta.indices == [0, 0]
    assert read_indices(frames.array) == [0, 0]


def test_a_ref_window_restricts_the_frames(clips: dict[str, Path]) -> None:
    ref = VideoRef(path=str(clips["mp4_h264"]), start=1.0, end=2.5)
    frames = load_video(ref, SMALL)
    got = read_indices(frames.array)
    assert got == frames.meta.indices
    assert got[0] == 30 and got[-1] == 75 and all(30 <= i <= 75 for i in got)
    assert frames.meta.timestamps[0] == pytest.approx(1.0, abs=1e-3)


def test_the_ref_window_replaces_the_spec_window(clips: dict[str, Path]) -> None:
    spec = SMALL.window(0.0, 0.5)
    frames = load_video(VideoRef(path=str(clips["mp4_h264"]), start=2.0), spec)
    assert min(frames.meta.indices) == 60 and max(frames.meta.indices) == 89


def test_a_window_past_the_end_is_a_video_error(clips: dict[str, Path]) -> None:
    ref = VideoRef(path=str(clips["mp4_h264"]), start=10.0, end=12.0)
    with pytest.raises(VideoError, match="holds no frame"):
        load_video(ref, SMALL)


def test_string_and_path_refs_work(clips: dict[str, Path]) -> None:
    a = load_video(str(clips["mp4_h264"]), SMALL)
    b = load_video(clips["mp4_h264"], SMALL)
    assert a.meta == b.meta and np.array_equal(a.array, b.array)


def test_pyav_agrees_with_decord(clips: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    by_decord = load_video(clips["mkv_hevc"], SMALL).meta
    _break_decord(monkeypatch)
    frames = load_video(clips["mkv_hevc"], SMALL)
    by_pyav = frames.meta
    assert by_pyav.decoder == "pyav"
    for field in ("total_frames", "source_fps", "indices", "height", "width"):
        assert getattr(by_pyav, field) == getattr(by_decord, field), field
    assert by_pyav.timestamps == pytest.approx(by_decord.timestamps, abs=1e-3)
    assert read_indices(frames.array) == by_pyav.indices


def _break_decord(monkeypatch: pytest.MonkeyPatch) -> None:
    import decord

    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("injected: cannot seek")

    monkeypatch.setattr(decord, "VideoReader", fail)


def test_an_injected_decord_failure_falls_back_to_pyav(
    clips: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _break_decord(monkeypatch)
    frames = load_video(clips["mp4_h264"], SMALL)
    assert frames.meta.decoder == "pyav"
    assert "injected: cannot seek" in (frames.meta.fallback_reason or "")
    assert read_indices(frames.array) == frames.meta.indices


def test_a_codec_decord_cannot_open_falls_back_to_pyav(tmp_path: Path) -> None:
    if "libsvtav1" not in av.codecs_available:
        pytest.skip("PyAV has no AV1 encoder here")
    # decord 0.6.0's bundled ffmpeg has no AV1 decoder: it fails to find the stream.
    path = write_index_video(tmp_path / "av1.mkv", 12, 24.0, 160, 120, codec="libsvtav1")
    frames = load_video(path, SMALL)
    assert frames.meta.decoder == "pyav"
    assert frames.meta.fallback_reason and frames.meta.fallback_reason.startswith("decord failed")
    assert read_indices(frames.array) == frames.meta.indices == [0, 4, 7, 11]


# --- broken inputs: each is a VideoError that names the file and says what is wrong


def _faststart_truncated(d: Path) -> Path:
    src = write_index_video(
        d / "full.mp4", 90, 30.0, 160, 120, container_options={"movflags": "+faststart"}
    )
    return write_truncated(src, d / "cut.mp4", 0.5)


def _mkv_truncated(d: Path) -> Path:
    return write_truncated(write_index_video(d / "full.mkv", 60, 30.0, 160, 120), d / "cut.mkv")


def _mp4_without_index(d: Path) -> Path:
    # an mp4 keeps its index (moov) at the end unless faststart: a cut file loses it
    return write_truncated(write_index_video(d / "full.mp4", 60, 30.0), d / "cut.mp4", 0.7)


BROKEN = {
    "missing": (lambda d: d / "absent.mp4", "not found"),
    "directory": (lambda d: d, "not a regular file"),
    "zero_bytes": (lambda d: write_zero_bytes(d / "empty.mp4"), "empty"),
    "text_as_mp4": (lambda d: write_text_file(d / "page.mp4"), "not a readable video"),
    "truncated_faststart_mp4": (_faststart_truncated, "truncated"),
    "truncated_mkv": (_mkv_truncated, "truncated"),
    "mp4_cut_before_its_index": (_mp4_without_index, "not a readable video"),
    # an mp4 without samples has no track at all; an mkv ends right after its header
    "zero_frames_mp4": (lambda d: write_index_video(d / "none.mp4", 0), "no video stream"),
    "zero_frames_mkv": (lambda d: write_index_video(d / "none.mkv", 0), "0 frames"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_inputs_raise_a_video_error_naming_the_file(tmp_path: Path, case: str) -> None:
    make, reason = BROKEN[case]
    path = make(tmp_path)
    with pytest.raises(VideoError, match=reason) as err:
        load_video(path, SMALL)
    assert err.value.path == str(path)
    assert str(path) in str(err.value)


def test_a_file_without_a_video_stream_is_a_video_error(tmp_path: Path) -> None:
    path = tmp_path / "audio.wav"
    with av.open(str(path), "w") as c:
        s = c.add_stream("pcm_s16le", rate=8000)
        frame = av.AudioFrame.from_ndarray(
            np.zeros((1, 800), np.int16), format="s16", layout="mono"
        )
        frame.sample_rate = 8000
        c.mux(s.encode(frame))
        c.mux(s.encode(None))
    with pytest.raises(VideoError, match="no video stream"):
        load_video(path, SMALL)


@pytest.mark.parametrize("suffix", [".mp4", ".mkv", ".webm"])
def test_pyav_seeks_to_keyframes_for_sparse_samples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    path = write_index_video(tmp_path / f"gop10{suffix}", 300, 30.0, 96, 72, options={"g": "10"})
    _break_decord(monkeypatch)
    frames = load_video(path, FrameSpec(nframes=4, min_pixels=56 * 56, max_pixels=56 * 56))
    assert read_indices(frames.array) == frames.meta.indices == [0, 100, 199, 299]
    # one GOP of 10 frames per sample at most (+ the first), not the 300 of the clip
    assert frames.meta.extra["pyav_decoded_frames"] <= 4 * 10 + 1


def test_an_extreme_aspect_ratio_is_a_video_error_not_a_fallback(tmp_path: Path) -> None:
    path = write_index_video(tmp_path / "strip.mp4", 4, 30.0, 1620, 8)
    with pytest.raises(VideoError, match="aspect ratio") as err:
        load_video(path, SMALL)
    assert err.value.path == str(path)
