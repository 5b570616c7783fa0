"""Qwen-style resize rules and image loading, stated as examples."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from evalkit.errors import VideoError
from evalkit.testing.index_video import index_frame, read_index
from evalkit.video import FrameSpec, ImageSpec, load_image, resize_frames, smart_resize, video_size
from evalkit.video.resize import video_max_pixels


def test_sizes_round_to_the_factor_within_bounds() -> None:
    assert smart_resize(360, 640, 28, 0, 10**9) == (364, 644)
    assert smart_resize(360, 640, 32, 0, 10**9) == (352, 640)


def test_a_large_frame_shrinks_under_max_pixels_keeping_its_aspect() -> None:
    h, w = smart_resize(1080, 1920, 28, 0, 768 * 28 * 28)
    assert h * w <= 768 * 28 * 28 and h % 28 == w % 28 == 0
    assert abs(w / h - 1920 / 1080) < 0.1


def test_a_small_frame_grows_over_min_pixels() -> None:
    h, w = smart_resize(30, 40, 28, 128 * 28 * 28, 768 * 28 * 28)
    assert h * w >= 128 * 28 * 28 and h % 28 == w % 28 == 0


def test_an_extreme_aspect_ratio_is_an_error() -> None:
    with pytest.raises(ValueError, match="aspect ratio"):
        smart_resize(10, 2010, 28, 0, 10**9)


def test_the_total_budget_shrinks_frames_of_long_videos() -> None:
    spec = FrameSpec(total_pixels=20480 * 28 * 28)
    assert video_max_pixels(spec, 16) == spec.max_pixels
    assert video_max_pixels(spec, 128) == 20480 * 28 * 28 / 128 * 2
    # never below 1.05 x min_pixels, however many frames
    assert video_max_pixels(spec, 100000) == int(spec.min_pixels * 1.05)


def test_a_frame_is_never_above_768_patches_whatever_max_pixels_says() -> None:
    spec = FrameSpec(max_pixels=4096 * 28 * 28)
    h, w = video_size(2160, 3840, spec, 4)
    assert h * w <= 768 * 28 * 28


def test_kept_size_frames_stay_the_clips_own_below_max_pixels() -> None:
    # no grid, no min_pixels floor, no token cap (768 patches of 28 would cap this one)
    spec = FrameSpec(keep_size=True, max_pixels=2 * 10**6, min_pixels=128 * 28 * 28)
    assert video_size(93, 167, spec, 32) == (93, 167)
    assert video_size(720, 1280, spec, 32) == (720, 1280)
    assert video_size(720, 1280, FrameSpec(max_pixels=2 * 10**6), 32) != (720, 1280)


def test_kept_size_frames_above_max_pixels_shrink_into_it_keeping_their_aspect() -> None:
    spec = FrameSpec(keep_size=True, max_pixels=336 * 336 * 4)
    assert video_size(720, 1280, spec, 32) == (504, 896)  # scale 0.7 exactly, not 503x895
    h, w = video_size(1081, 1919, spec, 32)
    assert h * w <= spec.max_pixels and (h + 1) * (w + 1) > spec.max_pixels
    assert abs(w / h - 1919 / 1081) < 0.01


def test_keep_size_and_a_fixed_size_exclude_each_other() -> None:
    with pytest.raises(ValueError, match="keep_size and size"):
        FrameSpec(keep_size=True, size=(384, 384))


def test_resize_frames_gives_the_requested_shape_and_keeps_content() -> None:
    frames = np.stack([index_frame(i, 160, 120) for i in (3, 9)])
    out = resize_frames(frames, 84, 112)
    assert out.shape == (2, 84, 112, 3) and out.dtype == np.uint8
    assert [read_index(f) for f in out] == [3, 9]
    assert np.array_equal(resize_frames(frames, 120, 160), frames)  # same size: untouched


def test_load_image_resizes_to_the_spec(tmp_path: Path) -> None:
    path = tmp_path / "a.png"
    Image.fromarray(index_frame(21, 320, 240)).save(path)
    img = load_image(path, ImageSpec(min_pixels=28 * 28, max_pixels=100 * 28 * 28))
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
    assert img.shape[0] * img.shape[1] <= 100 * 28 * 28 and img.shape[0] % 28 == 0
    assert read_index(img) == 21


def test_transparent_pixels_become_white(tmp_path: Path) -> None:
    path = tmp_path / "clear.png"
    Image.new("RGBA", (56, 56), (0, 0, 0, 0)).save(path)
    assert load_image(path, ImageSpec()).min() == 255


def test_a_missing_image_is_a_video_error(tmp_path: Path) -> None:
    with pytest.raises(VideoError, match="not found") as err:
        load_image(tmp_path / "none.png")
    assert err.value.path.endswith("none.png")


def test_a_text_file_is_not_an_image(tmp_path: Path) -> None:
    path = tmp_path / "x.jpg"
    path.write_text("hello")
    with pytest.raises(VideoError, match="not a readable image"):
        load_image(path)


def test_the_reference_resize_is_the_default_and_pil_is_a_named_option() -> None:
    assert FrameSpec().resize == "torchvision"
    frames = np.random.default_rng(0).integers(0, 256, (2, 120, 160, 3), dtype=np.uint8)
    exact = resize_frames(frames, 84, 112)
    fast = resize_frames(frames, 84, 112, "pil")
    assert exact.shape == fast.shape == (2, 84, 112, 3)
    assert not np.array_equal(exact, fast)  # two different filters
    assert np.abs(exact.astype(int) - fast).mean() < 4.0
    with pytest.raises(ValueError, match="unknown resize method"):
        resize_frames(frames, 84, 112, "lanczos")
