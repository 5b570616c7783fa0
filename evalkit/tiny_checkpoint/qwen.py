"""A tiny random Qwen-VL checkpoint, built offline in seconds (tests, demo, CPU CI).

The checkpoint is a real Hugging Face model directory (config.json, safetensors weights,
tokenizer, chat template, image + video processor configs) that both transformers and
vLLM load. Its weights are random and deterministic from ``seed``; its answers are
meaningless but reproducible, which is what engine and pipeline tests need.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.tiny_checkpoint.common import chatml_template, chatml_tokenizer, save_checkpoint

# Qwen's special tokens, in Qwen's order, so that ids are stable and look familiar.
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

# A Qwen2-VL-style template written for this project: a default system turn, each user
# content item in order, and one <|vision_start|><|X_pad|><|vision_end|> per image/video
# (the processor expands the pad token to the right number of visual tokens).
CHAT_TEMPLATE = chatml_template(
    "<|vision_start|><|image_pad|><|vision_end|>",
    "<|vision_start|><|video_pad|><|vision_end|>",
    loose=True,
)


@dataclass(frozen=True)
class TinySpec:
    """Sizes of the tiny model (see CPU_STACK.md for the ones known to work on CPU)."""

    family: str
    vocab_target: int = 2048
    text_hidden: int = 128
    text_layers: int = 2
    text_heads: int = 4
    text_kv_heads: int = 2
    head_dim: int = 32
    vision_depth: int = 2
    vision_hidden: int = 64
    vision_heads: int = 2
    max_pixels: int = 64 * 28 * 28
    """Processor budget; vLLM profiles the encoder with it, so keep it small on CPU."""

    @property
    def patch_size(self) -> int:
        """Vision patch side: 14 for Qwen2/2.5-VL, 16 for Qwen3-VL and Qwen3.5."""
        return FAMILY_BUILDS[self.family].patch_size


@dataclass(frozen=True)
class _FamilyBuild:
    """What differs between the families' tiny checkpoints (transformers class names)."""

    config: str
    model: str
    processor: str
    video_processor: str
    patch_size: int
    text: dict[str, Any]
    """Text-config fields beyond the shared sizes."""
    vision: dict[str, Any]
    """Vision-config fields beyond the shared sizes."""
    rope: dict[str, Any]
    """rope_parameters beyond the shared ones."""


_QWEN2_VISION = {"embed_dim": 64, "num_heads": 2, "mlp_ratio": 2}
QWEN3_5_TEXT = {
    "layer_types": ["linear_attention", "full_attention"],
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,  # vLLM's CPU delta-rule kernel takes 128 only
    "linear_value_head_dim": 128,
    "linear_num_key_heads": 1,
    "linear_num_value_heads": 2,
    "partial_rotary_factor": 0.25,
}
"""A tiny Qwen3.5 language model's own keys: one gated delta-net layer, one full one
(Qwen3.5's checkpoints, and MiniCPM-V 4.6's language model)."""
FAMILY_BUILDS: dict[str, _FamilyBuild] = {
    # Qwen2-VL: the vision tower's own width is embed_dim; hidden_size is its output width.
    "qwen2_vl": _FamilyBuild(
        "Qwen2VLConfig",
        "Qwen2VLForConditionalGeneration",
        "Qwen2VLProcessor",
        "Qwen2VLVideoProcessor",
        14,
        text={},
        vision=_QWEN2_VISION,
        rope={"mrope_section": [4, 6, 6]},
    ),
    "qwen2_5_vl": _FamilyBuild(
        "Qwen2_5_VLConfig",
        "Qwen2_5_VLForConditionalGeneration",
        "Qwen2_5_VLProcessor",
        "Qwen2VLVideoProcessor",
        14,
        text={},
        vision={"window_size": 112, "fullatt_block_indexes": [1], "tokens_per_second": 2},
        rope={"mrope_section": [4, 6, 6]},
    ),
    "qwen3_vl": _FamilyBuild(
        "Qwen3VLConfig",
        "Qwen3VLForConditionalGeneration",
        "Qwen3VLProcessor",
        "Qwen3VLVideoProcessor",
        16,
        text={},
        vision={"deepstack_visual_indexes": [0], "num_position_embeddings": 1024},
        rope={"mrope_section": [4, 6, 6], "mrope_interleaved": True},
    ),
    # Qwen3.5: gated delta-net (linear attention) layers interleaved with full attention
    # (vLLM runs those on CPU in bfloat16 only),
    # rotary on a quarter of each head (8 of 32 dims: mrope_section sums to 4); it uses
    # Qwen3-VL's processor (timestamps written into the prompt) and vision tower shape.
    "qwen3_5": _FamilyBuild(
        "Qwen3_5Config",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3VLProcessor",
        "Qwen3VLVideoProcessor",
        16,
        text=QWEN3_5_TEXT,
        vision={"num_position_embeddings": 1024},
        rope={"mrope_section": [2, 1, 1], "mrope_interleaved": True},
    ),
}


def build_tokenizer() -> Any:
    """Train the byte-level BPE with Qwen's specials and wrap it as a tokenizer."""
    return chatml_tokenizer(SPECIAL_TOKENS, CHAT_TEMPLATE)


def build_config(spec: TinySpec, tokenizer: Any) -> Any:
    """The transformers config of the tiny model for ``spec.family``."""
    import transformers as tf

    fam = FAMILY_BUILDS[spec.family]
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    vocab = (len(tokenizer) + 63) // 64 * 64  # padded, as real checkpoints are
    text: dict[str, Any] = {
        "vocab_size": vocab,
        "hidden_size": spec.text_hidden,
        "intermediate_size": spec.text_hidden * 2,
        "num_hidden_layers": spec.text_layers,
        "num_attention_heads": spec.text_heads,
        "num_key_value_heads": spec.text_kv_heads,
        "head_dim": spec.head_dim,
        "max_position_embeddings": 4096,  # vLLM max_model_len default: keeps CPU profiling small
        "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000.0, **fam.rope},
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "initializer_range": 0.05,
        **fam.text,
    }
    vision: dict[str, Any] = {
        "depth": spec.vision_depth,
        "hidden_size": spec.vision_hidden,
        "intermediate_size": spec.vision_hidden * 2,
        "num_heads": spec.vision_heads,
        "patch_size": spec.patch_size,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "out_hidden_size": spec.text_hidden,
        "initializer_range": 0.05,
        **fam.vision,
    }
    if spec.family == "qwen2_vl":  # its vision config names the widths differently
        vision["hidden_size"] = spec.text_hidden
        del vision["out_hidden_size"], vision["intermediate_size"]
    common = {
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "tie_word_embeddings": False,
        "initializer_range": 0.05,
    }
    cfg: Any = getattr(tf, fam.config)(text_config=text, vision_config=vision, **common)
    cfg.architectures = [fam.model]
    return cfg


def build_processor(spec: TinySpec, tokenizer: Any) -> Any:
    """Image + video processors (same mean/std: vLLM normalises video with the image's)."""
    import transformers as tf

    fam = FAMILY_BUILDS[spec.family]
    mean, std = [0.5, 0.5, 0.5], [0.5, 0.5, 0.5]
    factor = spec.patch_size * 2
    size = {"shortest_edge": 4 * factor * factor, "longest_edge": spec.max_pixels}
    common = {
        "size": size,
        "patch_size": spec.patch_size,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": mean,
        "image_std": std,
    }
    image = tf.Qwen2VLImageProcessor(**common)
    video = getattr(tf, fam.video_processor)(**common, max_frames=64)
    return getattr(tf, fam.processor)(
        image_processor=image,
        tokenizer=tokenizer,
        video_processor=video,
        chat_template=CHAT_TEMPLATE,
    )


def build(out: Path, family: str, seed: int, reference_frames: bool = False) -> Path:
    """Write a tiny random Qwen-family checkpoint to ``out`` (its processor's budgets are
    the benchmark specs' own: ``reference_frames`` changes nothing)."""
    import transformers as tf

    spec = TinySpec(family=family)
    tokenizer = build_tokenizer()
    config = build_config(spec, tokenizer)
    model_cls = getattr(tf, FAMILY_BUILDS[family].model)
    processor = build_processor(spec, tokenizer)
    stop = ["<|im_end|>", "<|endoftext|>"]
    return save_checkpoint(
        out, model_cls, config, processor, tokenizer, seed=seed, family=family, stop=stop
    )
