"""Tiny random Qwen-Omni checkpoints, thinker only (no talker, no token2wav:
``enable_audio_output`` off): a Qwen-VL-style vision tower, a small Whisper-style audio
tower (never fed: evalkit sends video without its audio), the language model and the
family's specials. Qwen2.5-Omni: Qwen2.5-VL's tower (patch 14), a Qwen2 language model;
Qwen3-Omni: Qwen3-VL's tower (patch 16, deepstack), a Qwen3 MoE language model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.tiny_checkpoint.common import (
    CHATML_SPECIALS,
    chatml_template,
    chatml_tokenizer,
    qwen2_text,
    save_checkpoint,
)

_ROLES = ("audio", "audio_bos", "audio_eos", "image", "video", "vision_bos", "vision_eos")


@dataclass(frozen=True)
class _Omni:
    """What differs between the Omni generations' tiny thinkers."""

    config: str
    model: str
    processor: str
    names: tuple[str, ...]
    """The special tokens of ``_ROLES``, in that order (the tokenizer's named attributes,
    which the processor reads: ``Qwen*OmniProcessor.__init__``)."""
    patch: int
    system: str | None
    """The chat template's default system turn."""

    @property
    def named(self) -> dict[str, str]:
        """``image_token`` etc. -> the token (``extra_special_tokens`` of the tokenizer)."""
        return {f"{role}_token": tok for role, tok in zip(_ROLES, self.names, strict=True)}

    @property
    def template(self) -> str:
        """The chat template: ChatML, each image/video between the vision bos/eos tokens."""
        image, video, bos, eos = self.names[3:]
        return chatml_template(f"{bos}{image}{eos}", f"{bos}{video}{eos}", system=self.system)


OMNI = {
    "qwen2_5_omni": _Omni(
        "Qwen2_5OmniConfig",
        "Qwen2_5OmniForConditionalGeneration",
        "Qwen2_5OmniProcessor",
        (
            "<|AUDIO|>",
            "<|audio_bos|>",
            "<|audio_eos|>",
            "<|IMAGE|>",
            "<|VIDEO|>",
            "<|vision_bos|>",
            "<|vision_eos|>",
        ),
        patch=14,
        system="You are a helpful assistant.",
    ),
    # Qwen3-Omni's specials are Qwen3-VL's vision ones plus audio ones (vLLM 0.32
    # qwen3_omni_moe_thinker.py get_placeholder_str); its README's evaluation settings
    # set no system prompt, so the template writes none by default
    "qwen3_omni_moe": _Omni(
        "Qwen3OmniMoeConfig",
        "Qwen3OmniMoeForConditionalGeneration",
        "Qwen3OmniMoeProcessor",
        (
            "<|audio_pad|>",
            "<|audio_start|>",
            "<|audio_end|>",
            "<|image_pad|>",
            "<|video_pad|>",
            "<|vision_start|>",
            "<|vision_end|>",
        ),
        patch=16,
        system=None,
    ),
}
MAX_PIXELS = 64 * 28 * 28
"""Per-image budget; vLLM profiles the encoder with it, so it is small on CPU."""
QWEN3_VIDEO_SIZE = {"shortest_edge": 128 * 32 * 32, "longest_edge": 768 * 32 * 32}
"""Qwen3OmniMoeProcessor's video budgets (its ``videos_kwargs`` defaults, over the video
processor's own): every video frame is resized under them, so the tiny checkpoint's image
processor says them too, or vLLM sizes its encoder cache for smaller videos than it gets."""


def build(out: Path, family: str, seed: int, reference_frames: bool = False) -> Path:
    """Write a tiny random Qwen-Omni (thinker) checkpoint of ``family`` to ``out``."""
    import transformers as tf

    omni = OMNI[family]
    tok = chatml_tokenizer([*CHATML_SPECIALS, *omni.names], omni.template, omni.named)
    ids = dict(zip(_ROLES, (tok.convert_tokens_to_ids(t) for t in omni.names), strict=True))
    key = "index" if family == "qwen2_5_omni" else "id"  # Qwen3-Omni renamed the three
    thinker: dict[str, Any] = {
        "text_config": _text(family, qwen2_text(tok)),
        "vision_config": _vision(family),
        "audio_config": _audio(family),
        **{f"{m}_token_{key}": ids[m] for m in ("audio", "image", "video")},
        **{f"{m}_start_token_id": ids[f"{m}_bos"] for m in ("audio", "vision")},
        **{f"{m}_end_token_id": ids[f"{m}_eos"] for m in ("audio", "vision")},
        "user_token_id": tok.encode("user")[0],
        "initializer_range": 0.05,
    }
    config = getattr(tf, omni.config)(thinker_config=thinker, enable_audio_output=False)
    config.architectures = [omni.model]
    processor = getattr(tf, omni.processor)(
        **_visual_processors(omni.patch, QWEN3_VIDEO_SIZE if family == "qwen3_omni_moe" else None),
        feature_extractor=tf.WhisperFeatureExtractor(feature_size=128),
        tokenizer=tok,
        chat_template=omni.template,
    )
    model = getattr(tf, omni.model)
    stop = ["<|im_end|>", "<|endoftext|>"]
    return save_checkpoint(out, model, config, processor, tok, seed=seed, family=family, stop=stop)


def _text(family: str, qwen2: dict[str, Any]) -> dict[str, Any]:
    """The thinker's language model from common's Qwen2 one: untied lm_head, said in the
    text config too, which vLLM reads (its default ties it: other tokens than transformers'
    thinker); Qwen3-Omni's is a Qwen3 MoE: every layer sparse, 2 of 4 experts per token."""
    text = {k: v for k, v in qwen2.items() if k != "model_type"}
    rope = {"rope_type": "default", "rope_theta": 1_000_000.0, "mrope_section": [4, 6, 6]}
    if family == "qwen3_omni_moe":
        rope |= {"mrope_interleaved": True, "interleaved": True}
        text |= {
            "moe_intermediate_size": 64,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "decoder_sparse_step": 1,
        }
    text["rope_parameters"] = rope
    return text


def _vision(family: str) -> dict[str, Any]:
    common = {
        "depth": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_heads": 2,
        "patch_size": OMNI[family].patch,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "out_hidden_size": 128,
        "initializer_range": 0.05,
    }
    if family == "qwen2_5_omni":
        return {**common, "window_size": 112, "fullatt_block_indexes": [1]}
    # vLLM 0.32 sizes the position table by image_size // patch_size per side (transformers
    # 5.19 by num_position_embeddings, 32 x 32 here) and reads apply_vit_abs_pos_embed: the
    # released checkpoints' config.json carries both (768 // 16 for 2304 positions)
    return {
        **common,
        "deepstack_visual_indexes": [0],
        "num_position_embeddings": 1024,
        "image_size": 32 * OMNI[family].patch,
        "apply_vit_abs_pos_embed": True,
    }


def _audio(family: str) -> dict[str, Any]:
    audio = {
        "num_mel_bins": 128,
        "encoder_layers": 1,
        "encoder_attention_heads": 2,
        "encoder_ffn_dim": 128,
        "d_model": 64,
        "output_dim": 128,
        "n_window": 100 if family == "qwen2_5_omni" else 50,
        "initializer_range": 0.05,
    }
    if family == "qwen3_omni_moe":
        audio["downsample_hidden_size"] = 32
    return audio


def _visual_processors(patch: int, size: dict[str, int] | None) -> dict[str, Any]:
    """Image and video processors on the ``patch`` grid, under ``size`` (else small
    budgets), one mean/std for both (vLLM normalises video with the image processor's)."""
    import transformers as tf

    factor = patch * 2
    common = {
        "size": size or {"shortest_edge": 4 * factor * factor, "longest_edge": MAX_PIXELS},
        "patch_size": patch,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
    }
    return {
        "image_processor": tf.Qwen2VLImageProcessor(**common),
        "video_processor": tf.Qwen2VLVideoProcessor(**common, max_frames=64),
    }
