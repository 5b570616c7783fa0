"""Oracle parity with qwen-vl-utils 0.0.14: same frame indices, same output (H, W).

qwen-vl-utils is a dev-only dependency (it imports torch and torchvision; on the CPU
stack torchvision imports through evalkit._cpu_compat's hook). Its pure functions are
called directly over grids; ``fetch_video`` is run with a stand-in reader and resize to
read its per-frame pixel budget, and end to end on synthetic clips with decord.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalkit.testing.index_video import read_indices, write_index_video
from evalkit.video import FrameSpec, ImageSpec, load_image, load_video, sample_indices, video_size

vp = pytest.importorskip("qwen_vl_utils.vision_process")
torch = pytest.importorskip("torch")


def _ele(spec: FrameSpec) -> dict[str, Any]:
    ele: dict[str, Any] = {"min_pixels": spec.min_pixels, "max_pixels": spec.max_pixels}
    if spec.nframes is not None:
        ele["nframes"] = spec.nframes
    else:
        ele.update(fps=spec.fps, min_frames=spec.min_frames, max_frames=spec.max_frames)
    if spec.total_pixels is not None:
        ele["total_pixels"] = spec.total_pixels
    if spec.start is not None:
        ele["video_start"] = spec.start
    if spec.end is not None:
        ele["video_end"] = spec.end
    return ele


def _qwen_indices(total: int, fps: float, spec: FrameSpec) -> list[int] | None:
    """What qwen-vl-utils' decord reader picks; None where it raises."""
    ele = _ele(spec)
    try:
        first, last, n_window = vp.calculate_video_frame_range(ele, total, fps)
        n = vp.smart_nframes(ele, total_frames=n_window, video_fps=fps)
    except ValueError:
        return None
    idx: list[int] = torch.linspace(first, last, n).round().long().tolist()
    return idx


SAMPLING_SPECS = [
    *(
        FrameSpec(fps=f, min_frames=lo, max_frames=hi)
        for f, (lo, hi) in itertools.product(
            [0.5, 1.0, 2.0, 4.0], [(4, 768), (4, 32), (16, 64), (5, 33)]
        )
    ),
    *(FrameSpec(nframes=n) for n in (2, 8, 15, 16, 31, 64)),
]
WINDOWS = [(None, None), (1.5, None), (None, 20.0), (3.3, 40.7), (0.0, 0.9)]


def test_frame_indices_match_qwen_vl_utils() -> None:
    compared = 0
    for duration, src_fps, spec, (start, end) in itertools.product(
        [0.4, 1.0, 2.5, 7.0, 61.3, 600.0, 3600.5],
        [7.5, 23.976, 25.0, 29.97, 30.0, 60.0],
        SAMPLING_SPECS,
        WINDOWS,
    ):
        total = max(1, round(duration * src_fps))
        windowed = spec.window(start, end) if (start, end) != (None, None) else spec
        expected = _qwen_indices(total, src_fps, windowed)
        if expected is None:
            continue  # qwen-vl-utils raises; evalkit's own rule is tested elsewhere
        assert sample_indices(total, src_fps, windowed) == expected, (total, src_fps, windowed)
        compared += 1
    assert compared > 3500  # of 4620: qwen-vl-utils raises on the rest (too short, no frames)


def _qwen_video_size(h: int, w: int, n: int, spec: FrameSpec, monkeypatch: Any) -> tuple[int, int]:
    """fetch_video's output (H, W) for n frames of h x w, without decoding or resizing."""

    def reader(ele: dict[str, Any]) -> tuple[Any, dict[str, Any], float]:
        video = torch.zeros(1, 3, h, w, dtype=torch.uint8).expand(n, -1, -1, -1)
        return video, {}, 2.0

    def resize(video: Any, size: list[int], **_: Any) -> Any:
        return torch.zeros(1, 3, *size).expand(video.shape[0], -1, -1, -1)

    monkeypatch.setattr(vp, "get_video_reader_backend", lambda: "stand-in")
    monkeypatch.setitem(vp.VIDEO_READER_BACKENDS, "stand-in", reader)
    monkeypatch.setattr(vp.transforms.functional, "resize", resize)
    out = vp.fetch_video({"video": "x.mp4", **_ele(spec)}, image_patch_size=spec.factor // 2)
    return int(out.shape[2]), int(out.shape[3])


BUDGETS = [
    dict(min_pixels=128 * 28 * 28, max_pixels=768 * 28 * 28),
    dict(min_pixels=4 * 28 * 28, max_pixels=16384 * 28 * 28),  # above qwen's per-frame cap
    dict(min_pixels=128 * 28 * 28, max_pixels=768 * 28 * 28, total_pixels=20480 * 28 * 28),
    dict(min_pixels=16 * 28 * 28, max_pixels=256 * 28 * 28, total_pixels=1_000_000),
    dict(min_pixels=128 * 32 * 32, max_pixels=768 * 32 * 32, factor=32),
    dict(min_pixels=64 * 1024, max_pixels=2048 * 1024, total_pixels=24576 * 1024, factor=32),
]
SIZES = [(120, 160), (360, 640), (720, 1280), (1080, 1920), (1920, 1080), (480, 854), (100, 2000)]


def test_output_sizes_match_qwen_vl_utils(monkeypatch: pytest.MonkeyPatch) -> None:
    compared = 0
    for budget, (h, w), n in itertools.product(BUDGETS, SIZES, [2, 4, 16, 64, 256, 768]):
        spec = FrameSpec(**budget)
        assert video_size(h, w, spec, n) == _qwen_video_size(h, w, n, spec, monkeypatch), (
            h,
            w,
            n,
            spec,
        )
        compared += 1
    assert compared == len(BUDGETS) * len(SIZES) * 6


def test_the_pixel_budget_actually_binds_in_the_grid() -> None:
    # guard against a grid where total_pixels never changes anything
    spec = FrameSpec(**BUDGETS[2])
    assert video_size(1080, 1920, spec, 768) < video_size(1080, 1920, spec, 16)


def test_aspect_ratio_limit_matches_qwen_vl_utils() -> None:
    with pytest.raises(ValueError):
        vp.smart_resize(10, 2500, 28)
    with pytest.raises(ValueError, match="aspect ratio"):
        video_size(10, 2500, FrameSpec(), 4)


@pytest.fixture(scope="module")
def parity_clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("parity")
    vfr = [0.0, 0.05, 0.3, 0.35, 0.4] + [0.6 + 0.04 * i for i in range(45)]
    return {
        "mp4": write_index_video(d / "a.mp4", 150, 30.0, 160, 120),
        "mkv": write_index_video(d / "b.mkv", 100, 25.0, 128, 96),
        "vfr": write_index_video(d / "c.mp4", len(vfr), 30.0, 160, 120, vfr_timestamps=vfr),
    }


LOW = dict(min_pixels=28 * 28 * 8, max_pixels=28 * 28 * 40)
END_TO_END = [
    ("mp4", FrameSpec(fps=2.0)),
    ("mp4", FrameSpec(fps=4.0, min_pixels=32 * 32 * 16, max_pixels=32 * 32 * 64, factor=32)),
    ("mp4", FrameSpec(nframes=12, **LOW)),
    ("mp4", FrameSpec(fps=3.0, start=1.1, end=3.9, **LOW)),
    ("mkv", FrameSpec(fps=1.0, total_pixels=28 * 28 * 300)),
    ("vfr", FrameSpec(fps=2.0, **LOW)),
]


@pytest.mark.parametrize(("clip", "spec"), END_TO_END)
def test_fetch_video_end_to_end_matches(
    parity_clips: dict[str, Path], clip: str, spec: FrameSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vp, "get_video_reader_backend", lambda: "decord")
    ele = {"video": str(parity_clips[clip]), **_ele(spec)}
    video, meta = vp.fetch_video(ele, image_patch_size=spec.factor // 2, return_video_metadata=True)
    ours = load_video(parity_clips[clip], spec)
    assert ours.meta.indices == list(meta["frames_indices"])
    assert ours.meta.source_fps == pytest.approx(meta["fps"])
    # the processors derive the sampling rate from the window's frame count
    assert ours.meta.to_vllm()["total_num_frames"] == meta["total_num_frames"]
    # fetch_video hands back float values that are whole numbers (it resized uint8)
    assert torch.equal(video, video.round())
    theirs = video.to(torch.uint8).permute(0, 2, 3, 1).numpy()
    assert ours.array.shape == theirs.shape
    assert read_indices(theirs) == read_indices(ours.array) == ours.meta.indices
    # the default resize is the reference one: every pixel identical
    assert spec.resize == "torchvision"
    assert np.array_equal(ours.array, theirs)
    # the fast PIL option: same sizes and indices, close values, not identical
    fast = load_video(parity_clips[clip], spec.model_copy(update={"resize": "pil"}))
    assert fast.meta.indices == ours.meta.indices
    diff = np.abs(fast.array.astype(np.int16) - theirs.astype(np.int16))
    assert diff.mean() < 4.0


@pytest.mark.parametrize(
    ("size", "mode", "spec"),
    [
        ((640, 480), "RGB", ImageSpec()),
        ((50, 40), "RGBA", ImageSpec()),
        ((3000, 2000), "RGB", ImageSpec(max_pixels=1024 * 28 * 28)),
        ((333, 777), "L", ImageSpec(min_pixels=256 * 32 * 32, max_pixels=512 * 32 * 32, factor=32)),
    ],
)
def test_image_sizes_match_fetch_image(
    tmp_path: Path, size: tuple[int, int], mode: str, spec: ImageSpec
) -> None:
    from PIL import Image

    path = tmp_path / "img.png"
    Image.new(mode, size).save(path)
    ele = {"image": str(path), "min_pixels": spec.min_pixels, "max_pixels": spec.max_pixels}
    theirs = vp.fetch_image(ele, image_patch_size=spec.factor // 2)
    ours = load_image(path, spec)
    assert ours.shape == (theirs.height, theirs.width, 3)


# --- the same parity over random settings (hypothesis), beyond the hand-picked grids


@st.composite
def _sampling_case(draw: st.DrawFn) -> tuple[int, float, FrameSpec]:
    src_fps = draw(st.floats(1.0, 120.0))
    total = draw(st.integers(1, 200_000))
    duration = total / src_fps
    start = draw(st.none() | st.floats(0.0, duration * 1.1))
    end = draw(st.none() | st.floats(0.0, duration * 1.1))
    if start is not None and end is not None and end <= start:
        start, end = end, start + 1.0
    if draw(st.booleans()):
        spec = FrameSpec(nframes=draw(st.integers(1, 1024)), start=start, end=end)
    else:
        lo = draw(st.integers(1, 64))
        spec = FrameSpec(
            fps=draw(st.floats(0.05, 16.0)),
            min_frames=lo,
            max_frames=draw(st.integers(lo, 1024)),
            start=start,
            end=end,
        )
    return total, src_fps, spec


@settings(max_examples=400, deadline=None)
@given(_sampling_case())
def test_random_settings_pick_the_same_indices(case: tuple[int, float, FrameSpec]) -> None:
    total, src_fps, spec = case
    expected = _qwen_indices(total, src_fps, spec)
    if expected is not None:
        assert sample_indices(total, src_fps, spec) == expected


@st.composite
def _size_case(draw: st.DrawFn) -> tuple[int, int, int, FrameSpec]:
    factor = draw(st.sampled_from([28, 32]))
    h = draw(st.integers(16, 4096))
    w = draw(st.integers(max(16, h // 150), min(4096, h * 150)))
    lo = draw(st.integers(4, 1024)) * factor * factor
    hi = lo + draw(st.integers(0, 16384)) * factor * factor
    total = draw(st.none() | st.integers(1, 200_000).map(lambda t: t * factor * factor))
    n = draw(st.integers(1, 384)) * 2
    spec = FrameSpec(min_pixels=lo, max_pixels=hi, total_pixels=total, factor=factor)
    return h, w, n, spec


@settings(max_examples=300, deadline=None)
@given(_size_case())
def test_random_settings_give_the_same_sizes(case: tuple[int, int, int, FrameSpec]) -> None:
    h, w, n, spec = case
    with pytest.MonkeyPatch.context() as mp:
        assert video_size(h, w, spec, n) == _qwen_video_size(h, w, n, spec, mp)
