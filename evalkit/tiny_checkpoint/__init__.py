"""Tiny random checkpoints, built offline in seconds (tests, demo, CPU CI): one recipe per
model family whose classes transformers ships (``evalkit model tiny --family F``).

Every checkpoint is a real Hugging Face model directory that transformers and vLLM load;
its weights are random and deterministic from ``seed`` (same seed, same bytes), its
answers meaningless but reproducible, which is what engine and pipeline tests need.
"""

from __future__ import annotations

from pathlib import Path

from evalkit.errors import EvalkitError
from evalkit.tiny_checkpoint.common import corpus
from evalkit.tiny_checkpoint.qwen import (
    CHAT_TEMPLATE,
    FAMILY_BUILDS,
    SPECIAL_TOKENS,
    TinySpec,
    build_config,
    build_processor,
    build_tokenizer,
)

# family -> the module whose ``build(out, family, seed)`` writes its checkpoint
_RECIPES = {
    **dict.fromkeys(FAMILY_BUILDS, "evalkit.tiny_checkpoint.qwen"),
    "llava_onevision": "evalkit.tiny_checkpoint.llava_onevision",
    "llava_next_video": "evalkit.tiny_checkpoint.llava_next_video",
    "internvl": "evalkit.tiny_checkpoint.internvl",
    "glm4v": "evalkit.tiny_checkpoint.glm4v",
    "qwen2_5_omni": "evalkit.tiny_checkpoint.qwen_omni",
    "gemma4": "evalkit.tiny_checkpoint.gemma4",
    "minicpmv4_6": "evalkit.tiny_checkpoint.minicpmv",
    "ernie4_5_vl_moe": "evalkit.tiny_checkpoint.ernie4_5_vl",
    "qwen3_omni_moe": "evalkit.tiny_checkpoint.qwen_omni",
}
FAMILIES = tuple(_RECIPES)
"""Every family ``build_tiny_model`` builds (the Qwen ones first)."""
QWEN_FAMILIES = tuple(FAMILY_BUILDS)
"""The Qwen families among them (the ones the trainer trains)."""


def build_tiny_model(
    out: str | Path, family: str = "qwen2_5_vl", seed: int = 0, *, reference_frames: bool = False
) -> Path:
    """Write a tiny random ``family`` checkpoint to ``out``; same seed -> same bytes.

    ``reference_frames``: its processor sized as the family's reference (384 x 384 frames
    for LLaVA-OneVision, GLM-4.1V's pixel budgets) instead of CPU-small, the towers still
    tiny: for frame-parity checks, which run the processors only."""
    import importlib

    if family not in _RECIPES:
        raise EvalkitError(f"unknown tiny model family {family!r}; choose one of {FAMILIES}")
    recipe = importlib.import_module(_RECIPES[family])
    built: Path = recipe.build(Path(out), family, seed, reference_frames)
    return built


__all__ = [
    "CHAT_TEMPLATE",
    "FAMILIES",
    "FAMILY_BUILDS",
    "QWEN_FAMILIES",
    "SPECIAL_TOKENS",
    "TinySpec",
    "build_config",
    "build_processor",
    "build_tiny_model",
    "build_tokenizer",
    "corpus",
]
