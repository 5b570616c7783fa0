"""Frame parity per model family: the pixel values its vision tower receives through evalkit
against the family's own reference path, on parity videos (odd size, portrait, long,
short, variable frame rate).

- evalkit: the frame cache under the run's FrameSpec for the family (its reference, as on
  a benchmark that pins a rate) -> a Request -> ``vllm_prompt`` -> vLLM's multimodal
  processor for the family, in process (no engine); for a family vLLM 0.32 cannot serve
  (ERNIE-4.5-VL in transformers 5's format) the HF engine's processor call instead;
- reference: the frames the authors' sampling picks (decord, as their code reads video)
  through the family's transformers video processor with its own resize (GLM-4.1V, Gemma
  4 and MiniCPM-V 4.6: their processors sample the frames themselves from the whole clip
  and its metadata; ERNIE-4.5-VL: its processor samples at the reference's 2 fps, the
  frames Baidu's rule picks on these videos (the two differ by a frame at some source
  rates: test_model_family_layer), and draws each frame's timestamp).

Both are compared before normalisation (``do_rescale`` and ``do_normalize`` off on both
sides: vLLM defers normalisation for some families), as pixel values on the 0-255 scale.
A cell is the max abs difference, or why the two cannot be compared (frame count, size).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evalkit.cache import FrameCache
from evalkit.engines.base import Request
from evalkit.engines.family import ModelFamily, detect_family
from evalkit.sample import VideoRef
from evalkit.video.types import FrameSpec

# name -> (width, height, fps, frames, variable frame rate)
PARITY_VIDEOS: dict[str, tuple[int, int, float, int, bool]] = {
    "odd 167x93": (167, 93, 25.0, 75, False),
    "portrait 96x170": (96, 170, 30.0, 120, False),
    "long 60 s": (160, 120, 30.0, 1800, False),
    "short 5 frames": (160, 120, 10.0, 5, False),
    "vfr": (160, 120, 30.0, 90, True),
    "large 1280x720": (1280, 720, 30.0, 60, False),
}


def write_parity_videos(folder: Path) -> dict[str, Path]:
    """The parity videos, written once into ``folder``."""
    from evalkit.testing.index_video import write_index_video

    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, (w, h, fps, n, vfr) in PARITY_VIDEOS.items():
        path = folder / (name.split()[0] + ".mp4")
        if not path.is_file():
            # variable rate: gaps of 1, 2 and 3 frame periods in turn
            gaps = [0.0] + [(1 + i % 3) / fps for i in range(n - 1)]
            stamps = np.cumsum(gaps).tolist() if vfr else None
            # 4:4:4 chroma: H.264 in 4:2:0 takes even sides only
            fmt = "yuv444p" if w % 2 or h % 2 else "yuv420p"
            write_index_video(
                path, n, fps=fps, width=w, height=h, vfr_timestamps=stamps, pix_fmt=fmt
            )
        out[name] = path
    return out


@dataclass
class Cell:
    """One family x video comparison."""

    diff: float | None
    """Max abs difference of pixel values (0-255), None when not comparable."""
    note: str = ""
    """Frames and size compared, or why they could not be."""
    mean: float | None = None
    """Mean abs difference (0-255), None when not comparable."""

    def __str__(self) -> str:
        if self.diff is None:
            return f"n/a ({self.note})"
        return f"{self.diff:g}" if not self.diff else f"{self.diff:g} (mean {self.mean:.2f})"


def _segments(total: int, n: int) -> list[int]:
    # InternVL's get_index with no bound: segment middles over [0, total - 1]
    seg = float(total - 1) / n
    return [int(seg / 2 + np.round(seg * i)) for i in range(n)]


PROCESSOR_SAMPLES = frozenset({"glm4v", "gemma4"})
"""Families whose authors' frame sampling is their transformers processor's own (GLM-4.1V:
2 fps; Gemma 4: transformers' default, 32 frames): their reference path lets it sample,
whatever evalkit's FrameReference says (so a wrong reference shows as a difference)."""


def reference_indices(family: ModelFamily, total: int) -> list[int] | None:
    """The frames the family's authors' code picks (None: its processor picks them)."""
    ref = family.family.reference
    if ref.nframes is None or family.family.name in PROCESSOR_SAMPLES:
        return None
    if ref.sampling == "segments":
        return _segments(total, ref.nframes)
    return np.linspace(0, total - 1, ref.nframes, dtype=int).tolist()


def _pixels(out: Mapping[str, object]) -> np.ndarray:
    """``pixel_values_videos`` of a processor's output (vLLM's wraps it in a field element)
    as float, leading axes of one dropped. MiniCPM-V 4.6's: transformers packs the frames'
    patches along the last axis (1, C, patch, sum of widths), vLLM keeps a frame per row
    (``video_pixel_values``: T, C, patch, width): the rows laid end to end, as there."""
    import torch

    values = out["pixel_values_videos" if "pixel_values_videos" in out else "video_pixel_values"]
    data = getattr(values, "data", values) if not isinstance(values, torch.Tensor) else values
    assert isinstance(data, torch.Tensor)
    if "video_pixel_values" in out:  # vLLM's MiniCPM-V 4.6 (frames of one size: no padding)
        data = torch.cat(list(data), dim=-1)
    array = data.float().numpy()
    while array.ndim > 2 and array.shape[0] == 1:
        array = array[0]
    return array


def _unnormalised(family: ModelFamily) -> dict[str, Any]:
    """Processor kwargs for pixel values on the 0-255 scale: rescaling and normalisation
    off, or (MiniCPM-V 4.6, whose video processor cuts uint8 frames into patches with
    ``unfold``, which takes no integer tensors) a rescale by 1.0, which makes them floats."""
    if family.family.name == "minicpmv4_6":
        return {"do_rescale": True, "rescale_factor": 1.0, "do_normalize": False}
    return {"do_rescale": False, "do_normalize": False}


def evalkit_pixels(model_dir: Path, video: Path, cache: FrameCache) -> np.ndarray:
    """What evalkit's engine hands the vision tower for ``video``: vLLM's processor, or the
    HF engine's (the checkpoint's transformers processor) for a family vLLM cannot serve."""
    family = detect_family(model_dir)
    spec, _ = family.frame_spec(FrameSpec())  # a benchmark pinning a rate: the reference
    frames = cache.get(VideoRef(path=str(video)), spec)
    request = Request(id=video.stem, text="<video> What happens?", videos=[frames])
    if family.family.vllm_refusal:
        return _hf_engine_pixels(model_dir, family, request)
    return _vllm_pixels(model_dir, family, request)


def _hf_engine_pixels(model_dir: Path, family: ModelFamily, request: Request) -> np.ndarray:
    from transformers import AutoProcessor

    from evalkit.engines.prompting import processor_inputs

    processor = AutoProcessor.from_pretrained(model_dir)
    off = {"do_rescale": False, "do_normalize": False}
    return _pixels(processor_inputs(processor, family, request, **off))


def _vllm_pixels(model_dir: Path, family: ModelFamily, request: Request) -> np.ndarray:
    from transformers import AutoTokenizer
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY

    from evalkit.engines.prompting import render_prompt
    from evalkit.engines.vllm_engine import vllm_prompt

    prompt = render_prompt(AutoTokenizer.from_pretrained(model_dir), request, family)
    inputs = vllm_prompt(request, prompt, family)
    config = ModelConfig(model=str(model_dir), dtype="float32", max_model_len=4096)
    processor = MULTIMODAL_REGISTRY.create_processor(config)
    items = processor.data_parser.parse_mm_data(inputs["multi_modal_data"])
    kwargs = {**inputs["mm_processor_kwargs"], **_unnormalised(family)}
    result = processor(inputs["prompt"], items, hf_processor_mm_kwargs=kwargs)
    return _pixels(result["mm_kwargs"]["video"][0])


def reference_pixels(model_dir: Path, video: Path) -> np.ndarray:
    """What the family's transformers processor makes of the frames its authors pick."""
    import av  # noqa: F401  (PyAV's FFmpeg before decord's: its VP9 encoder fails otherwise)
    import decord
    from transformers import AutoProcessor
    from transformers.video_utils import VideoMetadata

    family = detect_family(model_dir)
    reader = decord.VideoReader(str(video))
    total, fps = len(reader), float(reader.get_avg_fps())
    processor = AutoProcessor.from_pretrained(model_dir).video_processor
    picks = reference_indices(family, total)
    kwargs: dict[str, Any] = {**_unnormalised(family), "return_tensors": "pt"}
    if picks is None:  # the processor samples (GLM-4.1V 2 fps, Gemma 4 32 frames,
        # MiniCPM-V 4.6 1 fps)
        picks = list(range(total))
        meta = VideoMetadata(total_num_frames=total, fps=fps, duration=total / fps)
        kwargs.update(video_metadata=[meta], do_sample_frames=True)
        if family.family.reference.sampling == "leading":  # ERNIE's: its rate, passed
            kwargs["fps"] = family.family.reference.fps
    else:
        kwargs["do_sample_frames"] = False
    frames = reader.get_batch(picks).asnumpy()
    return _pixels(processor(videos=[frames], **kwargs))


def compare(model_dir: Path, video: Path, cache: FrameCache) -> Cell:
    """Max abs difference of the two paths' pixel values for ``video``; a reference path
    that refuses the video (transformers' default sampling: fewer frames than it samples)
    is a cell saying so."""
    ours = evalkit_pixels(model_dir, video, cache)
    try:
        ref = reference_pixels(model_dir, video)
    except ValueError as exc:
        return Cell(None, f"reference refuses: {str(exc).splitlines()[0][:120]}")
    if ours.shape != ref.shape:
        return Cell(None, f"evalkit {tuple(ours.shape)} vs reference {tuple(ref.shape)}")
    diff = np.abs(ours - ref)
    return Cell(float(diff.max()), f"{tuple(ours.shape)}", float(diff.mean()))


def table(
    models: dict[str, Path], videos: dict[str, Path], cache: FrameCache
) -> dict[str, dict[str, Cell]]:
    """family -> video -> :class:`Cell`."""
    return {
        family: {name: compare(model, path, cache) for name, path in videos.items()}
        for family, model in models.items()
    }


PARITY_FAMILIES = (
    "llava_onevision",
    "llava_next_video",
    "internvl",
    "glm4v",
    "gemma4",
    "minicpmv4_6",
    "ernie4_5_vl_moe",
)
"""The families with a tiny checkpoint whose reference path is transformers' processor."""


def main(argv: list[str] | None = None) -> int:
    """``python -m evalkit.testing.frame_parity DIR``: build what it needs in DIR, print the
    family x video table (markdown), then its JSON on the last line."""
    import json
    import sys

    from evalkit.tiny_checkpoint import build_tiny_model

    root = Path((argv if argv is not None else sys.argv[1:])[0])
    videos = write_parity_videos(root / "videos")
    models = {}
    for family in PARITY_FAMILIES:
        models[family] = root / family
        if not models[family].is_dir():
            build_tiny_model(models[family], family, reference_frames=True)
    cells = table(models, videos, FrameCache(root / "cache"))
    print("| family | " + " | ".join(videos) + " |")
    print("|---" * (len(videos) + 1) + "|")
    for family, row in cells.items():
        print(f"| {family} | " + " | ".join(str(c) for c in row.values()) + " |")
    doc = {
        f: {v: {"diff": c.diff, "mean": c.mean, "note": c.note} for v, c in row.items()}
        for f, row in cells.items()
    }
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
