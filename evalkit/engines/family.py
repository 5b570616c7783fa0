"""Which Qwen-VL family a checkpoint belongs to, read from its config.json (no torch).

The family fixes the resize factor (patch x spatial merge: 28 for Qwen2/2.5-VL, 32 for
Qwen3-VL and Qwen3.5) and the placeholder tokens the chat template puts where an image or
a video goes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.errors import EvalkitError

VISION_START = "<|vision_start|>"
VISION_END = "<|vision_end|>"


@dataclass(frozen=True)
class ModelFamily:
    """What the engines need to know about a Qwen-VL family."""

    name: str
    patch_size: int
    merge_size: int = 2
    temporal_patch: int = 2
    image_pad: str = "<|image_pad|>"
    video_pad: str = "<|video_pad|>"

    @property
    def factor(self) -> int:
        """Frame H and W must be multiples of this when frames arrive pre-resized."""
        return self.patch_size * self.merge_size


# model_type in config.json -> default patch size (overridden by vision_config when present).
_PATCH_BY_TYPE = {
    "qwen2_vl": 14,
    "qwen2_5_vl": 14,
    "qwen3_vl": 16,
    "qwen3_vl_moe": 16,
    "qwen3_5": 16,
    "qwen3_5_moe": 16,
}
KNOWN_FAMILIES = tuple(_PATCH_BY_TYPE)


def family_from_config(config: dict[str, Any], source: str = "config") -> ModelFamily:
    """The family of a checkpoint given its parsed config.json."""
    model_type = config.get("model_type")
    if model_type not in _PATCH_BY_TYPE:
        raise EvalkitError(
            f"{source}: model_type {model_type!r} is not a supported video model family "
            f"(supported: {', '.join(KNOWN_FAMILIES)})"
        )
    vision = config.get("vision_config") or {}
    return ModelFamily(
        name=model_type,
        patch_size=int(vision.get("patch_size", _PATCH_BY_TYPE[model_type])),
        merge_size=int(vision.get("spatial_merge_size", 2)),
        temporal_patch=int(vision.get("temporal_patch_size", 2)),
    )


def detect_family(model_dir: str | Path) -> ModelFamily:
    """Read ``model_dir/config.json`` and return the model family."""
    path = Path(model_dir) / "config.json"
    if not path.is_file():
        raise EvalkitError(f"{path}: no config.json; is {model_dir} a model checkpoint directory?")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise EvalkitError(f"{path}: not valid JSON ({exc})") from None
    return family_from_config(config, source=str(path))
