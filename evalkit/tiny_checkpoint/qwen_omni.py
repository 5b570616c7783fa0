"""A tiny random Qwen2.5-Omni checkpoint, thinker only (no talker, no token2wav:
``enable_audio_output`` off): Qwen2.5-VL's vision tower, a small Whisper-style audio tower
(never fed: evalkit sends video without its audio), Qwen2 language model, Omni's specials."""

from __future__ import annotations

from pathlib import Path

from evalkit.tiny_checkpoint.common import (
    CHATML_SPECIALS,
    chatml_template,
    qwen2_text,
    save_checkpoint,
    train_tokenizer,
)

# the processor reads these as tokenizer attributes (Qwen2_5OmniProcessor.__init__)
NAMED = {
    "audio_token": "<|AUDIO|>",
    "audio_bos_token": "<|audio_bos|>",
    "audio_eos_token": "<|audio_eos|>",
    "image_token": "<|IMAGE|>",
    "video_token": "<|VIDEO|>",
    "vision_bos_token": "<|vision_bos|>",
    "vision_eos_token": "<|vision_eos|>",
}
SPECIAL_TOKENS = [*CHATML_SPECIALS, *NAMED.values()]
CHAT_TEMPLATE = chatml_template(
    "<|vision_bos|><|IMAGE|><|vision_eos|>", "<|vision_bos|><|VIDEO|><|vision_eos|>"
)
MAX_PIXELS = 64 * 28 * 28
"""Per-image budget; vLLM profiles the encoder with it, so it is small on CPU."""


def build(out: Path, family: str, seed: int, reference_frames: bool = False) -> Path:
    """Write a tiny random Qwen2.5-Omni (thinker) checkpoint to ``out``."""
    import transformers as tf

    tok = train_tokenizer(
        SPECIAL_TOKENS,
        eos="<|im_end|>",
        pad="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
        named=NAMED,
    )
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    text = qwen2_text(tok)  # untied lm_head: said in the text config too, which vLLM reads
    del text["model_type"]  # (its default ties it: other tokens than transformers' thinker)
    text["rope_parameters"] = {
        "rope_type": "default",
        "rope_theta": 1_000_000.0,
        "mrope_section": [4, 6, 6],
    }
    vision = {
        "depth": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_heads": 2,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "out_hidden_size": 128,
        "window_size": 112,
        "fullatt_block_indexes": [1],
        "initializer_range": 0.05,
    }
    audio = {
        "num_mel_bins": 128,
        "encoder_layers": 1,
        "encoder_attention_heads": 2,
        "encoder_ffn_dim": 128,
        "d_model": 64,
        "output_dim": 128,
        "n_window": 100,
        "initializer_range": 0.05,
    }
    thinker = {
        "text_config": text,
        "vision_config": vision,
        "audio_config": audio,
        "audio_token_index": ids["<|AUDIO|>"],
        "image_token_index": ids["<|IMAGE|>"],
        "video_token_index": ids["<|VIDEO|>"],
        "vision_start_token_id": ids["<|vision_bos|>"],
        "vision_end_token_id": ids["<|vision_eos|>"],
        "audio_start_token_id": ids["<|audio_bos|>"],
        "audio_end_token_id": ids["<|audio_eos|>"],
        "user_token_id": tok.encode("user")[0],
        "initializer_range": 0.05,
    }
    config = tf.Qwen2_5OmniConfig(thinker_config=thinker, enable_audio_output=False)
    config.architectures = ["Qwen2_5OmniForConditionalGeneration"]
    # one mean/std for both processors: vLLM normalises video with the image processor's
    same = {"image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}
    common = {
        "size": {"shortest_edge": 4 * 28 * 28, "longest_edge": MAX_PIXELS},
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
        **same,
    }
    processor = tf.Qwen2_5OmniProcessor(
        image_processor=tf.Qwen2VLImageProcessor(**common),
        video_processor=tf.Qwen2VLVideoProcessor(**common, max_frames=64),
        feature_extractor=tf.WhisperFeatureExtractor(feature_size=128),
        tokenizer=tok,
        chat_template=CHAT_TEMPLATE,
    )
    model = tf.Qwen2_5OmniForConditionalGeneration
    stop = ["<|im_end|>", "<|endoftext|>"]
    return save_checkpoint(out, model, config, processor, tok, seed=seed, family=family, stop=stop)
