"""A tiny random LLaVA-NeXT-Video checkpoint: CLIP tower (CLS token dropped, second-last
layer), 2 x 2 average pooling per frame, Llama language model, Vicuna-style prompts
(``USER: <video>\\n... ASSISTANT:``); frames resized by their shortest edge and centre
cropped to 64 x 64 in patches of 8 (the real model's 336 x 336 in patches of 14, scaled
down), 16 tokens per frame after pooling.

vLLM 0.32's pooler for the family divides by ``image_size // patch_size**2`` (where it
means the patch count), which is 1 for the real model and 0 for a 56-pixel tower of
14-pixel patches ("integer division or modulo by zero" in the encoder): the tiny tower
keeps ``image_size >= patch_size**2``."""

from __future__ import annotations

from pathlib import Path

from evalkit.tiny_checkpoint.common import (
    TEXT_SIZES,
    padded_vocab,
    save_checkpoint,
    train_tokenizer,
)

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<image>", "<video>"]
# llava-hf/LLaVA-NeXT-Video-7B-hf's template, the content items kept in their order
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] != 'system' %}{{ message['role'].upper() + ': ' }}{% endif %}"
    "{% if message['content'] is string %}{{ message['content'] + ' ' }}"
    "{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' %}<image>\n"
    "{% elif item['type'] == 'video' %}<video>\n"
    "{% elif 'text' in item %}{{ item['text'] + ' ' }}{% endif %}"
    "{% endfor %}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)


def build(out: Path, family: str, seed: int, reference_frames: bool = False) -> Path:
    """Write a tiny random LLaVA-NeXT-Video checkpoint to ``out``."""
    import transformers as tf

    tok = train_tokenizer(SPECIAL_TOKENS, eos="</s>", pad="<unk>", chat_template=CHAT_TEMPLATE)
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    # the real model's for parity checks; else the smallest the pooler takes (see above)
    side, patch = (336, 14) if reference_frames else (64, 8)
    text = {
        "model_type": "llama",
        "vocab_size": padded_vocab(tok),
        **TEXT_SIZES,
        "bos_token_id": ids["<s>"],
        "eos_token_id": ids["</s>"],
        "pad_token_id": ids["<unk>"],
        "tie_word_embeddings": False,
    }
    vision = {
        "model_type": "clip_vision_model",
        "hidden_size": 64,
        "intermediate_size": 128,
        "projection_dim": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "image_size": side,
        "patch_size": patch,
    }
    pinpoints = [[side, side], [side, 2 * side], [2 * side, side], [2 * side, 2 * side]]
    config = tf.LlavaNextVideoConfig(
        text_config=text,
        vision_config=vision,
        image_token_index=ids["<image>"],
        video_token_index=ids["<video>"],
        vision_feature_select_strategy="default",
        vision_feature_layer=-2,
        spatial_pool_mode="average",
        spatial_pool_stride=2,
        image_grid_pinpoints=pinpoints,
        image_seq_length=(side // patch) ** 2,
        video_seq_length=(side // patch) ** 2 // 4,
        tie_word_embeddings=False,
    )
    config.architectures = ["LlavaNextVideoForConditionalGeneration"]
    edge, crop = {"shortest_edge": side}, {"height": side, "width": side}
    image = tf.LlavaNextImageProcessor(size=edge, crop_size=crop, image_grid_pinpoints=pinpoints)
    video = tf.LlavaNextVideoVideoProcessor(size=edge, crop_size=crop)
    processor = tf.LlavaNextVideoProcessor(
        video_processor=video,
        image_processor=image,
        tokenizer=tok,
        chat_template=CHAT_TEMPLATE,
        patch_size=patch,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
    )
    model = tf.LlavaNextVideoForConditionalGeneration
    return save_checkpoint(
        out, model, config, processor, tok, seed=seed, family=family, stop=["</s>"]
    )
