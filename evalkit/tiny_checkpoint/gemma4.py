"""A tiny random Gemma 4 checkpoint: Gemma 4's vision tower (16-pixel patches, 3 x 3
pooling, 2-D positions) and Gemma 4 language model (one sliding-window layer, one global
layer with its wider heads and proportional RoPE), no audio tower; Gemma 4's specials
and a chat template laid out as the real one (``<|turn>user`` ... ``<turn|>``, one
``<|video|>`` per video, the empty thought channel after ``<|turn>model``).

The video processor keeps Gemma 4's own budget (70 soft tokens per frame, 32 frames):
vLLM 0.32 encodes video frames at 70 soft tokens whatever the checkpoint says, so a
smaller budget would only make transformers and vLLM disagree. The image budget is the
real 280 only with ``reference_frames`` (70 otherwise: vLLM profiles images at it)."""

from __future__ import annotations

from pathlib import Path

from evalkit.tiny_checkpoint.common import (
    TEXT_SIZES,
    padded_vocab,
    save_checkpoint,
    train_tokenizer,
)

# the named tokens Gemma4Processor reads from its tokenizer (google/gemma-4-E2B-it's
# tokenizer_config.json); the rest are Gemma 4's turn and thinking markers
NAMED = {
    "image_token": "<|image|>",
    "boi_token": "<|image>",
    "eoi_token": "<image|>",
    "video_token": "<|video|>",
    "audio_token": "<|audio|>",
    "boa_token": "<|audio>",
    "eoa_token": "<audio|>",
}
SPECIAL_TOKENS = [
    "<pad>",
    "<eos>",
    "<bos>",
    "<unk>",
    "<mask>",
    "<|turn>",
    "<turn|>",
    "<|channel>",
    "<channel|>",
    "<|think|>",
    *NAMED.values(),
]
# Gemma 4's template (google/gemma-4-*-it chat_template.jinja), its multimodal part: the
# first system message as a system turn, each content item in order (text trimmed, one
# marker per image/video), the model turn opened with the thought channel left empty
# (thinking off, the template's default)
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "<|turn>{{ role }}\n"
    "{% if message['content'] is string %}{{ message['content'] | trim }}"
    "{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'text' %}{{ item['text'] | trim }}"
    "{% elif item['type'] == 'image' %}<|image|>"
    "{% elif item['type'] == 'video' %}<|video|>"
    "{% endif %}{% endfor %}{% endif %}"
    "<turn|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|turn>model\n"
    "{% if not enable_thinking | default(false) %}<|channel>thought\n<channel|>{% endif %}"
    "{% endif %}"
)


def build(out: Path, family: str, seed: int, reference_frames: bool = False) -> Path:
    """Write a tiny random Gemma 4 checkpoint to ``out``."""
    import transformers as tf

    tok = train_tokenizer(
        SPECIAL_TOKENS, eos="<eos>", pad="<pad>", chat_template=CHAT_TEMPLATE, named=NAMED
    )
    tok.bos_token = "<bos>"
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    text = {
        **TEXT_SIZES,
        "vocab_size": padded_vocab(tok),
        "vocab_size_per_layer_input": padded_vocab(tok),
        "hidden_size_per_layer_input": 0,  # no per-layer embeddings (as the 31B model)
        "layer_types": ["sliding_attention", "full_attention"],
        "sliding_window": 512,
        "global_head_dim": 64,  # vLLM's CPU attention takes 32 and 64
        "final_logit_softcapping": 30.0,
        "bos_token_id": ids["<bos>"],
        "eos_token_id": [ids["<eos>"], ids["<turn|>"]],
        "pad_token_id": ids["<pad>"],
        "tie_word_embeddings": True,
    }
    soft = 280 if reference_frames else 70
    vision = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "patch_size": 16,
        "pooling_kernel_size": 3,
        "position_embedding_size": 1024,
        "default_output_length": soft,
        "initializer_range": 0.05,
    }
    config = tf.Gemma4Config(
        text_config=text,
        vision_config=vision,
        audio_config=None,
        boi_token_id=ids["<|image>"],
        eoi_token_id=ids["<image|>"],
        image_token_id=ids["<|image|>"],
        video_token_id=ids["<|video|>"],
        boa_token_id=ids["<|audio>"],
        eoa_token_index=ids["<audio|>"],
        audio_token_id=ids["<|audio|>"],
        tie_word_embeddings=True,
    )
    config.architectures = ["Gemma4ForConditionalGeneration"]
    # the shipped processor configs (google/gemma-4-*-it processor_config.json): images
    # rescaled only, video frames also "normalised" by mean 0 / std 1
    image = tf.Gemma4ImageProcessor(
        patch_size=16, max_soft_tokens=soft, pooling_kernel_size=3, do_normalize=False
    )
    video = tf.Gemma4VideoProcessor(
        patch_size=16, max_soft_tokens=70, pooling_kernel_size=3, num_frames=32
    )
    processor = tf.Gemma4Processor(
        feature_extractor=tf.Gemma4AudioFeatureExtractor(),
        image_processor=image,
        tokenizer=tok,
        video_processor=video,
        chat_template=CHAT_TEMPLATE,
        image_seq_length=soft,
    )
    model = tf.Gemma4ForConditionalGeneration
    stop = ["<eos>", "<turn|>"]
    return save_checkpoint(out, model, config, processor, tok, seed=seed, family=family, stop=stop)
