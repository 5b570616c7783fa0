"""The synthetic index frames: read back exactly, and a misread is an error, never a wrong index."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from evalkit.testing.index_video import MAX_INDEX, index_frame, read_index


@pytest.mark.parametrize("index", [0, 1, 2, 255, 256, 4095, 123456, MAX_INDEX])
def test_an_index_frame_reads_back_its_index(index: int) -> None:
    assert read_index(index_frame(index, 160, 120)) == index


@pytest.mark.parametrize("size", [(112, 112), (56, 84), (448, 336), (64, 200)])
def test_the_index_survives_resizing_to_other_shapes(size: tuple[int, int]) -> None:
    for index in (0, 77, 9999):
        img = Image.fromarray(index_frame(index, 160, 120)).resize(size, Image.Resampling.BICUBIC)
        assert read_index(np.asarray(img)) == index


def test_noise_on_the_frame_does_not_change_the_index() -> None:
    frame = index_frame(4242, 160, 120).astype(np.int16)
    noisy = frame + np.random.default_rng(0).normal(0, 25, frame.shape).round().astype(np.int16)
    assert read_index(np.clip(noisy, 0, 255).astype(np.uint8)) == 4242


def test_bgr_frames_are_rejected() -> None:
    with pytest.raises(ValueError, match="colour markers"):
        read_index(index_frame(5, 160, 120)[..., ::-1])


@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_frame_in_the_wrong_orientation_is_rejected(k: int) -> None:
    turned = np.ascontiguousarray(np.rot90(index_frame(5, 160, 120), k=k))
    resized = np.asarray(Image.fromarray(turned).resize((160, 120)))
    with pytest.raises(ValueError):
        read_index(resized)


def test_a_flipped_bit_fails_the_checksum() -> None:
    frame = index_frame(1000, 180, 150)
    # cell 1 (row 0, column 1) holds the most significant index bit
    frame[:30, 30:60] = 255 - frame[:30, 30:60]
    with pytest.raises(ValueError, match="checksum"):
        read_index(frame)


def test_a_plain_frame_is_not_read_as_an_index() -> None:
    with pytest.raises(ValueError):
        read_index(np.full((120, 160, 3), 128, np.uint8))
