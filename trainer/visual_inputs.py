"""What the actor feeds its model besides token ids: the processor's visual tensors per
prompt (:class:`Encoded`), the placeholder/feature check, and the per-token modality ids.

Shared by the padded path (:mod:`.actor`) and the padding-free one (:mod:`.packing`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from evalkit.engines.base import Request
from evalkit.engines.family import ModelFamily
from evalkit.errors import EvalkitError

VISUAL_KEYS = {
    "video": ("pixel_values_videos", "video_grid_thw"),
    "image": ("pixel_values", "image_grid_thw"),
}


_PER_TOKEN = ("input_ids", "attention_mask", "mm_token_type_ids")


class PlaceholderMismatch(EvalkitError):
    """The prompt's visual placeholder tokens do not match the visual features."""


@dataclass
class Encoded:
    """One prompt as model inputs: its token ids and the visual tensors that go with them."""

    sample_id: str
    prompt_ids: list[int]
    visual: dict[str, Tensor]
    """pixel_values[_videos], *_grid_thw, second_per_grid_ts (absent keys: no such media)."""


def processor_inputs(processor: Any, family: ModelFamily, request: Request) -> Any:
    """Processor output for ``request`` (the same inputs evalkit's HF engine builds)."""
    from evalkit.engines.prompting import processor_inputs as build

    return build(processor, family, request)


def check_placeholders(
    input_ids: Tensor, visual: dict[str, Tensor], token_ids: dict[str, int], merge: int, who: str
) -> None:
    """Strict check: ``<|video_pad|>``/``<|image_pad|>`` counts equal the feature rows.

    The model scatters visual features into the placeholder positions; a mismatch (a prompt
    cut inside its video, frames of another size than the prompt was built for) would
    otherwise fail deep inside the forward or, worse, shift features onto the wrong tokens.
    """
    for kind, (_, grid_key) in VISUAL_KEYS.items():
        grid = visual.get(grid_key)
        rows = int((grid.prod(-1) // merge**2).sum()) if grid is not None else 0
        tokens = int((input_ids == token_ids[kind]).sum())
        if tokens != rows:
            raise PlaceholderMismatch(
                f"{who}: {tokens} {kind} placeholder tokens but {rows} {kind} feature rows "
                f"(grid {None if grid is None else grid.tolist()}); the prompt and its "
                f"{kind} inputs do not belong together (truncated prompt? resized frames?)"
            )


def mm_token_types(input_ids: Tensor, token_ids: dict[str, int]) -> Tensor:
    """Per-token modality as the processor marks it (text 0, image 1, video 2)."""
    kinds = torch.zeros_like(input_ids, dtype=torch.int)
    kinds[input_ids == token_ids["image"]] = 1
    kinds[input_ids == token_ids["video"]] = 2
    return kinds


def _concat(parts: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    keys = sorted({k for p in parts for k in p})
    return {k: torch.cat([p[k] for p in parts if k in p]) for k in keys}
