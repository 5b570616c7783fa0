"""A tiny random InternVL checkpoint in the transformers format (InternViT tower, pixel
shuffle 0.5, Qwen2 language model), one 56 x 56 tile per frame."""

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

# the processor reads these as tokenizer attributes (InternVLProcessor.__init__)
NAMED = {
    "start_image_token": "<img>",
    "end_image_token": "</img>",
    "context_image_token": "<IMG_CONTEXT>",
    "video_token": "<video>",
}
SPECIAL_TOKENS = [*CHATML_SPECIALS, *NAMED.values()]
CHAT_TEMPLATE = chatml_template("<IMG_CONTEXT>\n", "<video>\n")
IMAGENET = {"image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225]}


def build(out: Path, family: str, seed: int, reference_frames: bool = False) -> Path:
    """Write a tiny random InternVL checkpoint to ``out``."""
    import transformers as tf

    tok = chatml_tokenizer(SPECIAL_TOKENS, CHAT_TEMPLATE, NAMED)
    side = 448 if reference_frames else TINY_FRAME  # the real model's, for parity checks
    tokens = (side // 14) ** 2 // 4  # pixel shuffle 0.5 halves each side
    vision = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "image_size": side,
        "patch_size": 14,
    }
    config = tf.InternVLConfig(
        text_config=qwen2_text(tok),
        vision_config=vision,
        image_token_id=tok.convert_tokens_to_ids("<IMG_CONTEXT>"),
        image_seq_length=tokens,
        downsample_ratio=0.5,
        tie_word_embeddings=False,
    )
    config.architectures = ["InternVLForConditionalGeneration"]
    size = {"height": side, "width": side}
    image = tf.GotOcr2ImageProcessor(size=size, crop_to_patches=False, **IMAGENET)
    video = tf.InternVLVideoProcessor(size=size, **IMAGENET)
    processor = tf.InternVLProcessor(
        image_processor=image,
        tokenizer=tok,
        video_processor=video,
        image_seq_length=tokens,
        chat_template=CHAT_TEMPLATE,
    )
    model = tf.InternVLForConditionalGeneration
    return save_checkpoint(
        out, model, config, processor, tok, seed=seed, family=family, stop=["<|im_end|>"]
    )
