"""evalkit.engines.reference_rope: the reference Qwen2-VL / Qwen2.5-VL M-RoPE positions,
traced by hand from the reference ``get_rope_index`` (Qwen's release in transformers 4.x;
vLLM 0.32's ``get_mrope_input_positions`` follows it): text counts on from the previous
part's largest position + 1; a video block's temporal index is
``floor(i * second_per_grid_t * tps)``."""

from __future__ import annotations

import pickle
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from evalkit.engines.reference_rope import reference_rope_index, use_reference_rope

pytestmark = pytest.mark.timeout(60)


def _model(model_type: str = "qwen2_5_vl", tps: int | None = 2) -> Any:
    vision = SimpleNamespace(spatial_merge_size=2)
    if tps is not None:
        vision.tokens_per_second = tps
    return SimpleNamespace(config=SimpleNamespace(model_type=model_type, vision_config=vision))


def _positions(model: Any, kinds: list[list[int]], **kw: Any) -> tuple[list[Any], list[Any]]:
    types = torch.tensor(kinds)
    pos, delta = reference_rope_index(model, torch.zeros_like(types), types, **kw)
    return pos.tolist(), delta[:, 0].tolist()


# 3 text, a (2, 4, 4) video (2 x 2 x 2 merged tokens), 2 text
VIDEO = [0, 0, 0] + [2] * 8 + [0, 0]


def test_text_after_a_video_follows_its_largest_temporal_position() -> None:
    # second_per_grid_t 2.5 x tps 2: temporal indices 0, 5; the block starts at 3, so its
    # tokens reach 8 in t and the text resumes at 9 (transformers 5.19: 3 + 4 // 2 = 5)
    pos, delta = _positions(
        _model(),
        [VIDEO],
        video_grid_thw=torch.tensor([[2, 4, 4]]),
        second_per_grid_ts=torch.tensor([2.5]),
    )
    assert pos[0][0] == [0, 1, 2, 3, 3, 3, 3, 8, 8, 8, 8, 9, 10]
    assert pos[1][0] == [0, 1, 2, 3, 3, 4, 4, 3, 3, 4, 4, 9, 10]
    assert pos[2][0] == [0, 1, 2, 3, 4, 3, 4, 3, 4, 3, 4, 9, 10]
    assert delta == [11 - 13]


def test_left_padding_is_skipped_and_rows_take_their_own_grids() -> None:
    rows = [[0, 0, *VIDEO[:-2]], VIDEO]  # row 0: 2 pads, no text after the video
    mask = torch.tensor([[0, 0] + [1] * 11, [1] * 13])
    pos, delta = _positions(
        _model(),
        rows,
        attention_mask=mask,
        video_grid_thw=torch.tensor([[2, 4, 4], [2, 4, 4]]),
        second_per_grid_ts=torch.tensor([1.0, 2.5]),
    )
    # row 0: spg 1 -> temporal indices 0, 2 from the block start 3; its pads stay 0
    assert pos[0][0] == [0, 0, 0, 1, 2, 3, 3, 3, 3, 5, 5, 5, 5]
    assert pos[1][0] == [0, 0, 0, 1, 2, 3, 3, 4, 4, 3, 3, 4, 4]
    assert pos[0][1] == [0, 1, 2, 3, 3, 3, 3, 8, 8, 8, 8, 9, 10]
    assert delta == [6 - 11, 11 - 13]


def test_qwen2_vl_counts_temporal_patches_and_images_stay_at_one_time() -> None:
    # Qwen2-VL (no tokens_per_second): temporal index = patch index; an image (1, 2, 2)
    # has t 0: its one merged token sits at its start
    kinds = [[0, 1, 0, 2, 2, 2, 0]]
    pos, delta = _positions(
        _model("qwen2_vl", tps=None),
        kinds,
        image_grid_thw=torch.tensor([[1, 2, 2]]),
        video_grid_thw=torch.tensor([[3, 2, 2]]),
    )
    assert pos[0][0] == [0, 1, 2, 3, 4, 5, 6]
    assert pos[1][0] == [0, 1, 2, 3, 3, 3, 6]
    assert delta == [0]


def test_temporal_index_is_floored_in_float32_as_the_reference_does() -> None:
    # 6 of 20 frames at 4 fps: spg = 2 / 1.2, stored float32 (1.6666666); the reference
    # multiplies int64 indices by that float32 tensor: 3 * 1.6666666 rounds to 5.0 in
    # float32, x 2 = 10 (float64, as vLLM 0.32 computes it: 9.9999998 -> 9)
    kinds = [[2] * 4 + [0]]
    pos, _ = _positions(
        _model(),
        kinds,
        video_grid_thw=torch.tensor([[4, 2, 2]]),
        second_per_grid_ts=torch.tensor([2 / 1.2]),
    )
    assert pos[0][0] == [0, 3, 6, 10, 11]


def test_bound_only_on_qwen2_and_qwen2_5_vl() -> None:
    for model_type, bound in [("qwen2_5_vl", True), ("qwen2_vl", True), ("qwen3_vl", False)]:
        inner = _model(model_type)
        inner.get_rope_index = None
        assert use_reference_rope(SimpleNamespace(model=inner)) is bound
        assert (inner.get_rope_index is not None) is bound
        if bound:  # models get pickled (Ray) and deep-copied (the KL reference)
            again = pickle.loads(pickle.dumps(inner)).get_rope_index
            kinds = torch.tensor([VIDEO])
            grid = {"video_grid_thw": torch.tensor([[2, 4, 4]])}
            got = again(torch.zeros_like(kinds), kinds, **grid)[0]
            assert torch.equal(got, inner.get_rope_index(torch.zeros_like(kinds), kinds, **grid)[0])
