"""Temporal sampling rules (qwen-vl-utils' smart_nframes + linspace), stated as examples."""

from __future__ import annotations

import itertools

import pytest

from evalkit.video.sampling import frame_range, sample_indices, torch_linspace_round
from evalkit.video.types import FrameSpec


def test_fps_mode_takes_fps_frames_per_second_spread_over_the_clip() -> None:
    idx = sample_indices(300, 30.0, FrameSpec(fps=2.0))  # 10 s -> 20 frames
    assert len(idx) == 20
    assert idx[0] == 0 and idx[-1] == 299
    steps = {b - a for a, b in itertools.pairwise(idx)}
    assert steps <= {15, 16}


def test_a_short_clip_gets_at_least_min_frames() -> None:
    assert len(sample_indices(30, 30.0, FrameSpec(fps=2.0, min_frames=4))) == 4


def test_a_long_clip_is_capped_at_max_frames() -> None:
    assert len(sample_indices(18000, 30.0, FrameSpec(fps=2.0, max_frames=64))) == 64


def test_min_and_max_frames_round_to_the_temporal_patch() -> None:
    # min 5 rounds up to 6; max 33 rounds down to 32
    assert len(sample_indices(60, 30.0, FrameSpec(fps=1.0, min_frames=5))) == 6
    assert len(sample_indices(9000, 30.0, FrameSpec(fps=2.0, max_frames=33))) == 32


def test_the_count_never_exceeds_the_frames_in_the_clip() -> None:
    idx = sample_indices(7, 1.0, FrameSpec(fps=4.0))
    assert idx == [0, 1, 2, 4, 5, 6]  # 7 frames -> 6; round(0, 1.2, 2.4, 3.6, 4.8, 6)


@pytest.mark.parametrize(("nframes", "expected"), [(8, 8), (7, 8), (9, 8), (11, 12), (1, 2)])
def test_fixed_nframes_rounds_to_the_nearest_temporal_patch(nframes: int, expected: int) -> None:
    # Python's round is half-to-even, as in qwen-vl-utils: 9/2 = 4.5 -> 4 patches
    assert len(sample_indices(1000, 25.0, FrameSpec(nframes=nframes))) == expected


def test_fixed_nframes_ignores_fps_and_the_duration() -> None:
    short = sample_indices(100, 30.0, FrameSpec(nframes=16, fps=0.1))
    long = sample_indices(100000, 30.0, FrameSpec(nframes=16, fps=10.0))
    assert len(short) == len(long) == 16


def test_fixed_nframes_beyond_the_clip_repeats_frames() -> None:
    idx = sample_indices(5, 30.0, FrameSpec(nframes=8))
    assert len(idx) == 8 and set(idx) == {0, 1, 2, 3, 4} and idx == sorted(idx)


def test_a_one_frame_clip_repeats_its_frame_to_a_temporal_patch() -> None:
    assert sample_indices(1, 30.0, FrameSpec()) == [0, 0]
    assert sample_indices(1, 30.0, FrameSpec(temporal_patch=4)) == [0, 0, 0, 0]


def test_window_indices_stay_inside_the_window() -> None:
    spec = FrameSpec(fps=2.0, start=4.0, end=6.0)
    idx = sample_indices(300, 30.0, spec)
    assert idx[0] == 120 and idx[-1] == 180  # ceil(4*30), floor(6*30)
    assert len(idx) == 4  # 61 frames ~ 2.03 s at 2 fps -> 4 (min_frames)


def test_window_edges_round_inwards() -> None:
    # 1.01 s * 30 = 30.3 -> first frame 31; 1.99 s * 30 = 59.7 -> last frame 59
    assert frame_range(300, 30.0, 1.01, 1.99) == (31, 59)


def test_a_window_past_the_end_is_cut_at_the_end() -> None:
    assert frame_range(300, 30.0, 8.0, 50.0) == (240, 299)
    assert frame_range(300, 30.0, None, 50.0) == (0, 299)


def test_a_window_with_one_frame_repeats_it() -> None:
    assert sample_indices(300, 30.0, FrameSpec(start=2.0, end=2.01)) == [60, 60]


def test_a_window_without_frames_is_an_error() -> None:
    with pytest.raises(ValueError, match="holds no frame"):
        sample_indices(300, 30.0, FrameSpec(start=20.0, end=30.0))
    with pytest.raises(ValueError, match="holds no frame"):
        frame_range(300, 30.0, 2.01, 2.02)


def test_an_empty_clip_is_an_error() -> None:
    with pytest.raises(ValueError, match="no frames"):
        sample_indices(0, 30.0, FrameSpec())


def test_linspace_rounds_half_to_even_from_both_ends() -> None:
    assert torch_linspace_round(0, 9, 3) == [0, 4, 9]  # 4.5 -> 4
    assert torch_linspace_round(0, 3, 3) == [0, 2, 3]  # 1.5 -> 2
    assert torch_linspace_round(5, 5, 4) == [5, 5, 5, 5]
    assert torch_linspace_round(7, 7, 1) == [7]
