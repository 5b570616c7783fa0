"""A tiny random ERNIE-4.5-VL (MoE) checkpoint in transformers 5's format: ERNIE's vision
tower (patch 14, merge 2, temporal 2) and resampler, a two-layer language model whose second
layer is an MoE with 4 text and 4 vision experts (top 2) and one shared expert, ERNIE's
specials and an ERNIE-style chat template (role prefixes ``User: ``/``Assistant: ``, each
video as ``Video N:<|VIDEO_START|>...<|VIDEO_END|>``: Baidu's FastDeploy DataProcessor and
vLLM's placeholder for the family). Its video processor draws each frame's timestamp, as
the real one does, with a font shipped in the checkpoint (matplotlib's DejaVu Sans here,
Roboto in Baidu's).

vLLM 0.32 does not serve this format (see ``FamilySpec.vllm_refusal``); transformers 5
saves the weights under Baidu's original names (``model.vision_model.*``, per-expert
``mlp.experts.N.*``), which its own loader converts back."""

from __future__ import annotations

from pathlib import Path

from evalkit.tiny_checkpoint.common import (
    TEXT_SIZES,
    padded_vocab,
    save_checkpoint,
    train_tokenizer,
)

# name the processor reads from the tokenizer -> the token
NAMED = {
    "image_token": "<|IMAGE_PLACEHOLDER|>",
    "image_start_token": "<|IMAGE_START|>",
    "image_end_token": "<|IMAGE_END|>",
    "video_token": "<|VIDEO_PLACEHOLDER|>",
    "video_start_token": "<|VIDEO_START|>",
    "video_end_token": "<|VIDEO_END|>",
}
SPECIAL_TOKENS = [
    "<unk>",
    "<s>",
    "</s>",
    "<|begin_of_sentence|>",
    "<|end_of_sentence|>",
    *NAMED.values(),
]
CHAT_TEMPLATE = (
    "<|begin_of_sentence|>"
    "{% set ns = namespace(image=0, video=0) %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{% set prefix = '' %}"
    "{% elif message['role'] == 'user' %}{% set prefix = 'User: ' %}"
    "{% else %}{% set prefix = 'Assistant: ' %}{% endif %}"
    "{{ prefix }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' %}{% set ns.image = ns.image + 1 %}"
    "Picture {{ ns.image }}:<|IMAGE_START|><|IMAGE_PLACEHOLDER|><|IMAGE_END|>"
    "{% elif item['type'] == 'video' %}{% set ns.video = ns.video + 1 %}"
    "Video {{ ns.video }}:<|VIDEO_START|><|VIDEO_PLACEHOLDER|><|VIDEO_END|>"
    "{% elif 'text' in item %}{{ item['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{% if message['role'] == 'assistant' %}<|end_of_sentence|>{% else %}{{ '\\n' }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}Assistant: {% endif %}"
)
MAX_PIXELS = 64 * 28 * 28
"""Per-frame pixel cap of the tiny processors (the real ones: 1196 x 28 x 28 for video)."""


def font_file() -> str:
    """A TrueType font the video processor draws frame timestamps with."""
    import matplotlib

    return str(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf")


def build(out: Path, family: str, seed: int, reference_frames: bool = False) -> Path:
    """Write a tiny random ERNIE-4.5-VL checkpoint to ``out``."""
    import transformers as tf

    tok = train_tokenizer(
        SPECIAL_TOKENS,
        eos="<|end_of_sentence|>",
        pad="<unk>",
        chat_template=CHAT_TEMPLATE,
        named=NAMED,
    )
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    text = {
        "vocab_size": padded_vocab(tok),
        **TEXT_SIZES,
        "mlp_layer_types": ["dense", "sparse"],
        "moe_intermediate_size": [64, 64],
        "moe_num_experts": 4,
        "moe_k": 2,
        "moe_num_shared_experts": 1,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 500000.0,
            "mrope_section": [6, 6, 4],
        },
        "bos_token_id": ids["<|begin_of_sentence|>"],
        "eos_token_id": ids["<|end_of_sentence|>"],
        "pad_token_id": ids["<unk>"],
        "tie_word_embeddings": True,
    }
    vision = {
        "depth": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_heads": 2,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_merge_size": 2,
        "initializer_range": 0.05,
    }
    config = tf.Ernie4_5_VLMoeConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids[NAMED["image_token"]],
        image_start_token_id=ids[NAMED["image_start_token"]],
        image_end_token_id=ids[NAMED["image_end_token"]],
        video_token_id=ids[NAMED["video_token"]],
        video_start_token_id=ids[NAMED["video_start_token"]],
        video_end_token_id=ids[NAMED["video_end_token"]],
        tie_word_embeddings=True,
    )
    config.architectures = ["Ernie4_5_VLMoeForConditionalGeneration"]
    size = {"shortest_edge": 4 * 28 * 28, "longest_edge": MAX_PIXELS}
    image = tf.Ernie4_5_VLMoeImageProcessor(size=size)
    vsize = {} if reference_frames else {"size": size}
    video = tf.Ernie4_5_VLMoeVideoProcessor(font=font_file(), **vsize)
    processor = tf.Ernie4_5_VLMoeProcessor(
        image_processor=image, tokenizer=tok, video_processor=video, chat_template=CHAT_TEMPLATE
    )
    model = tf.Ernie4_5_VLMoeForConditionalGeneration
    stop = ["<|end_of_sentence|>"]
    return save_checkpoint(out, model, config, processor, tok, seed=seed, family=family, stop=stop)
