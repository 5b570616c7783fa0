"""A tiny random MiniCPM-V 4.6 checkpoint: SigLIP-style tower (patch 14) with its
window-attention merger after the first layer and the 2 x 2 merger MLP (16 patches per
token, the model's "16x" mode), Qwen3.5 language model (one linear-attention and one
full-attention layer), ChatML prompts with ``<|image_pad|>`` / ``<|video_pad|>`` where
the media go, which the processor expands per frame to
``<image_id>i</image_id><image>...</image>``.

Every frame is resized to about ``scale_resolution``² pixels on a 56-pixel grid (patch x
the two merges); slices are off for video (``max_slice_nums`` 1), as the authors run video.
The tiny processor's ``scale_resolution`` is 112 (4 tokens a frame), the real model's 448
with ``reference_frames``: vLLM profiles the encoder at that size, so it stays small on
CPU."""

from __future__ import annotations

from pathlib import Path

from evalkit.tiny_checkpoint.common import (
    CHATML_SPECIALS,
    TEXT_SIZES,
    chatml_tokenizer,
    padded_vocab,
    save_checkpoint,
)
from evalkit.tiny_checkpoint.qwen import QWEN3_5_TEXT

# MiniCPMV4_6Processor.__init__ reads these as tokenizer attributes
NAMED = {
    "image_token": "<|image_pad|>",
    "video_token": "<|video_pad|>",
    "image_start_token": "<image>",
    "image_end_token": "</image>",
    "slice_start_token": "<slice>",
    "slice_end_token": "</slice>",
    "image_id_start_token": "<image_id>",
    "image_id_end_token": "</image_id>",
}
SPECIAL_TOKENS = [*CHATML_SPECIALS, *NAMED.values()]
# ChatML (Qwen3.5's, no default system turn) with the bare pad token where each image or
# video goes (vLLM 0.32's MiniCPMV4_6 placeholders); the instruct model's generation
# prompt carries an empty thinking block unless enable_thinking is set
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' %}<|image_pad|>"
    "{% elif item['type'] == 'video' %}<|video_pad|>"
    "{% elif 'text' in item %}{{ item['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if not enable_thinking %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
)
TINY_SCALE = 112
"""The tiny processor's ``scale_resolution``: frames of about 112 x 112, 4 tokens each."""
# the processor's defaults (ImageNet standard mean/std), given to both processors: vLLM
# normalises video frames with the image processor's
SAME = {"image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}


def build(out: Path, family: str, seed: int, reference_frames: bool = False) -> Path:
    """Write a tiny random MiniCPM-V 4.6 checkpoint to ``out``."""
    import transformers as tf

    tok = chatml_tokenizer(SPECIAL_TOKENS, CHAT_TEMPLATE, NAMED)
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    text = {
        "model_type": "qwen3_5_text",
        "vocab_size": padded_vocab(tok),
        **TEXT_SIZES,
        **QWEN3_5_TEXT,
        # one position per token on all three sections (vLLM's get_mrope_input_positions)
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 1_000_000.0,
            "mrope_section": [2, 1, 1],
            "mrope_interleaved": True,
        },
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "tie_word_embeddings": False,
    }
    vision = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "image_size": 56,
        "patch_size": 14,
    }
    config = tf.MiniCPMV4_6Config(
        text_config=text,
        vision_config=vision,
        insert_layer_id=0,  # the window merger after the first of the two layers
        image_size=56,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        tie_word_embeddings=False,
    )
    config.architectures = ["MiniCPMV4_6ForConditionalGeneration"]
    scale = 448 if reference_frames else TINY_SCALE
    sizes = {"scale_resolution": scale, "patch_size": 14, **SAME}
    image = tf.MiniCPMV4_6ImageProcessor(max_slice_nums=9, **sizes)
    # slices off for video (OpenBMB/MiniCPM-V README, MiniCPM-V 4.6 video inference)
    video = tf.MiniCPMV4_6VideoProcessor(max_slice_nums=1, max_num_frames=128, **sizes)
    processor = tf.MiniCPMV4_6Processor(
        image_processor=image, video_processor=video, tokenizer=tok, chat_template=CHAT_TEMPLATE
    )
    model = tf.MiniCPMV4_6ForConditionalGeneration
    stop = ["<|im_end|>", "<|endoftext|>"]
    return save_checkpoint(out, model, config, processor, tok, seed=seed, family=family, stop=stop)
