"""A tiny random LLaVA-OneVision checkpoint: SigLIP tower, Qwen2 language model, frames of
56 x 56 (the real model's 384 x 384, scaled down), pooled 2 x 2 per frame."""

from __future__ import annotations

from pathlib import Path

from evalkit.tiny_checkpoint.common import (
    CHATML_SPECIALS,
    TINY_FRAME,
    chatml_template,
    chatml_tokenizer,
    qwen2_text,
    save_checkpoint,
)

SPECIAL_TOKENS = [*CHATML_SPECIALS, "<image>", "<video>"]
CHAT_TEMPLATE = chatml_template("<image>\n", "<video>\n")


def build(out: Path, family: str, seed: int, reference_frames: bool = False) -> Path:
    """Write a tiny random LLaVA-OneVision checkpoint to ``out``."""
    import transformers as tf

    tok = chatml_tokenizer(SPECIAL_TOKENS, CHAT_TEMPLATE)
    side = 384 if reference_frames else TINY_FRAME  # the real model's, for parity checks
    vision = {
        "model_type": "siglip_vision_model",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "image_size": side,
        "patch_size": 14,
    }
    pinpoints = [[side, side], [side, 2 * side], [2 * side, side], [2 * side, 2 * side]]
    config = tf.LlavaOnevisionConfig(
        text_config=qwen2_text(tok),
        vision_config=vision,
        image_token_index=tok.convert_tokens_to_ids("<image>"),
        video_token_index=tok.convert_tokens_to_ids("<video>"),
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
        image_grid_pinpoints=pinpoints,
        tie_word_embeddings=False,
    )
    config.architectures = ["LlavaOnevisionForConditionalGeneration"]
    size = {"height": side, "width": side}
    image = tf.LlavaOnevisionImageProcessor(
        size=size, crop_size=size, image_grid_pinpoints=pinpoints
    )
    video = tf.LlavaOnevisionVideoProcessor(size=size)
    processor = tf.LlavaOnevisionProcessor(
        image_processor=image,
        tokenizer=tok,
        video_processor=video,
        chat_template=CHAT_TEMPLATE,
        num_image_tokens=(side // 14) ** 2,
        vision_feature_select_strategy="full",
    )
    model = tf.LlavaOnevisionForConditionalGeneration
    return save_checkpoint(
        out, model, config, processor, tok, seed=seed, family=family, stop=["<|im_end|>"]
    )
