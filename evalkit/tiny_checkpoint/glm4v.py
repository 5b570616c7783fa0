"""A tiny random GLM-4.1V checkpoint: GLM's vision tower (patch 14, merge 2, temporal 2)
and GLM-4 language model, with GLM's specials and a GLM-style chat template."""

from __future__ import annotations

from pathlib import Path

from evalkit.tiny_checkpoint.common import (
    TEXT_SIZES,
    padded_vocab,
    save_checkpoint,
    train_tokenizer,
)

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "[gMASK]",
    "<sop>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|begin_of_image|>",
    "<|end_of_image|>",
    "<|begin_of_video|>",
    "<|end_of_video|>",
    "<|image|>",
    "<|video|>",
]
CHAT_TEMPLATE = (
    "[gMASK]<sop>{% for message in messages %}<|{{ message['role'] }}|>\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' %}<|begin_of_image|><|image|><|end_of_image|>"
    "{% elif item['type'] == 'video' %}<|begin_of_video|><|video|><|end_of_video|>"
    "{% elif 'text' in item %}{{ item['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
MAX_PIXELS = 64 * 28 * 28
"""Per-image budget; vLLM profiles the encoder with it, so it is small on CPU."""


def build(out: Path, family: str, seed: int, reference_frames: bool = False) -> Path:
    """Write a tiny random GLM-4.1V checkpoint to ``out``."""
    import transformers as tf

    tok = train_tokenizer(
        SPECIAL_TOKENS, eos="<|user|>", pad="<|endoftext|>", chat_template=CHAT_TEMPLATE
    )
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    text = {
        "vocab_size": padded_vocab(tok),
        **TEXT_SIZES,
        # rotary on half of each head (16 dims): the M-RoPE sections sum to 8
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 10000.0,
            "mrope_section": [2, 3, 3],
            "partial_rotary_factor": 0.5,
        },
        "bos_token_id": ids["[gMASK]"],
        "eos_token_id": [ids["<|user|>"], ids["<|endoftext|>"]],
        "pad_token_id": ids["<|endoftext|>"],
    }
    vision = {
        "depth": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_heads": 2,
        "patch_size": 14,
        "image_size": 56,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "out_hidden_size": 128,
        "initializer_range": 0.05,
    }
    config = tf.Glm4vConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image|>"],
        video_token_id=ids["<|video|>"],
        image_start_token_id=ids["<|begin_of_image|>"],
        image_end_token_id=ids["<|end_of_image|>"],
        video_start_token_id=ids["<|begin_of_video|>"],
        video_end_token_id=ids["<|end_of_video|>"],
    )
    config.architectures = ["Glm4vForConditionalGeneration"]
    # one mean/std for both processors: vLLM normalises video with the image processor's
    same = {"image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}
    size = {"shortest_edge": 4 * 28 * 28, "longest_edge": MAX_PIXELS}
    image = tf.Glm4vImageProcessor(size=size, **same)
    vsize = {"shortest_edge": 4 * 28 * 28, "longest_edge": 4 * MAX_PIXELS}
    budgets = {"size": vsize, "max_image_size": {"longest_edge": 4 * MAX_PIXELS}}
    if reference_frames:  # the real model's budgets (the processor's defaults): parity checks
        budgets = {}
    video = tf.Glm4vVideoProcessor(**budgets, **same)
    processor = tf.Glm4vProcessor(
        image_processor=image, tokenizer=tok, video_processor=video, chat_template=CHAT_TEMPLATE
    )
    model = tf.Glm4vForConditionalGeneration
    stop = ["<|user|>", "<|endoftext|>"]
    return save_checkpoint(out, model, config, processor, tok, seed=seed, family=family, stop=stop)
