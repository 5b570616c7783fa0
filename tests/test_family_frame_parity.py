"""Frame parity per family (heavy: five processors, six parity videos): the pixel values
each family's vision tower receives through evalkit (frame cache -> request -> vLLM's
processor) equal those of its own reference path (its authors' frame picks through its
transformers processor), to the level, on odd-size, portrait, long, short, variable-rate
and large videos; where they cannot be equal (GLM-4.1V's large frames, LLaVA-NeXT-Video's
second resize, ERNIE-4.5-VL's timestamps drawn on frames of another size) the difference is
pinned as measured."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("vllm")
pytest.importorskip("decord")

from evalkit.cache import FrameCache
from evalkit.testing import frame_parity as fp
from evalkit.tiny_checkpoint import build_tiny_model

pytestmark = pytest.mark.heavy


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[str, Path], dict[str, Path], FrameCache]:
    root = tmp_path_factory.mktemp("parity")
    models = {f: build_tiny_model(root / f, f, reference_frames=True) for f in fp.PARITY_FAMILIES}
    return models, fp.write_parity_videos(root / "videos"), FrameCache(root / "cache")


@pytest.mark.parametrize("family", fp.PARITY_FAMILIES)
def test_the_vision_tower_sees_the_reference_pixels(
    world: tuple[dict[str, Path], dict[str, Path], FrameCache], family: str
) -> None:
    models, videos, cache = world
    row = {name: fp.compare(models[family], path, cache) for name, path in videos.items()}
    if family == "glm4v":
        # evalkit caps every factor-grid frame at qwen-vl-utils' 768 tokens (602112 px);
        # GLM-4.1V's processor keeps a 1280x720 frame whole (its budget is per video)
        large = row.pop("large 1280x720")
        assert large.diff is None and "(5760, 1176) vs reference (9568, 1176)" in large.note
    if family == "llava_next_video":
        # its processor resizes by the shortest edge and centre crops; the cache (the
        # "processor" grid) first rounds frames to the 14-pixel patch under qwen-vl-utils'
        # floor and cap: the same frames, resampled twice. Measured: mean 0.5-1.7 levels,
        # max 183-252 at the index pattern's sharp edges (every frame one later: mean 20-30)
        assert all(c.mean is not None and c.mean < 2.5 for c in row.values()), row
        assert all(c.note == "(32, 3, 336, 336)" for c in row.values()), row
        return
    if family == "ernie4_5_vl_moe":
        _check_ernie(row)
        return
    assert {name: cell.diff for name, cell in row.items()} == dict.fromkeys(row, 0.0)


def _check_ernie(row: dict[str, fp.Cell]) -> None:
    # the same frames (its processor's own 2 fps pick; the control below: 0 undrawn), but its
    # processor draws each frame's timestamp with a font 10% of the frame's shorter side,
    # on the frame it is given: the cache hands it frames on the 14-pixel patch raised to
    # the 299 x 28 x 28 pixel floor (93x167 -> 364x658), the reference the decoded source
    # frame, so the text differs in size (max 255 in the corner). Measured: mean 4.7-6.4
    # levels. The 1280x720 clip: evalkit's per-frame cap (qwen-vl-utils' 768 tokens, on the
    # 14-pixel patch, floored at 1.05 x min_pixels) gives 364x658 frames (1248 patches
    # each); ERNIE's processor keeps it at 1288x728 (4784 patches) under 1196 x 28 x 28
    large = row.pop("large 1280x720")
    assert large.diff is None and "(19968, 588) vs reference (76544, 588)" in large.note
    assert all(c.mean is not None and c.mean < 8 for c in row.values()), row


def test_control_ernie_frames_are_its_processors_once_no_timestamp_is_drawn(
    world: tuple[dict[str, Path], dict[str, Path], FrameCache], monkeypatch: pytest.MonkeyPatch
) -> None:
    import transformers

    processor = transformers.Ernie4_5_VLMoeVideoProcessor
    prepare = processor._prepare_input_videos

    def undrawn(self: object, *args: object, **kwargs: object) -> object:
        kwargs["draw_on_frames"] = False
        return prepare(self, *args, **kwargs)

    monkeypatch.setattr(processor, "_prepare_input_videos", undrawn)
    models, videos, cache = world
    cell = fp.compare(models["ernie4_5_vl_moe"], videos["long 60 s"], cache)
    assert cell.diff == 0 and cell.note == "(144000, 588)", cell


def test_control_qwen_vl_utils_resize_is_not_the_reference_of_these_families(
    world: tuple[dict[str, Path], dict[str, Path], FrameCache],
) -> None:
    import decord
    from transformers import AutoProcessor

    from evalkit.video.resize import resize_frames

    models, videos, _ = world
    frames = decord.VideoReader(str(videos["odd 167x93"])).get_batch([0, 10, 20]).asnumpy()
    processor = AutoProcessor.from_pretrained(models["llava_onevision"]).video_processor
    out = processor(videos=[frames], do_rescale=False, do_normalize=False, return_tensors="pt")
    reference = out["pixel_values_videos"][0].numpy().transpose(0, 2, 3, 1)
    ours = {
        m: resize_frames(frames, 384, 384, m).astype(np.float32)
        for m in ("torchvision", "transformers")
    }
    assert np.abs(ours["transformers"] - reference).max() == 0
    assert np.abs(ours["torchvision"] - reference).max() > 0  # v1's uint8 kernel rounds otherwise
