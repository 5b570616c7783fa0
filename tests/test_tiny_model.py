"""The tiny random checkpoints (Qwen-VL; Gemma 4's layout): offline, deterministic, loadable by
transformers."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from evalkit.cli.main import main as cli_main
from evalkit.engines.family import detect_family
from evalkit.tiny_checkpoint import SPECIAL_TOKENS, build_tiny_model


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def tiny25(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("m") / "a", "qwen2_5_vl", seed=3)


def test_same_seed_gives_byte_identical_weights(tiny25: Path, tmp_path: Path) -> None:
    again = build_tiny_model(tmp_path / "b", "qwen2_5_vl", seed=3)
    for name in ("model.safetensors", "config.json", "tokenizer.json"):
        assert _digest(tiny25 / name) == _digest(again / name), name


def test_other_seed_gives_other_weights(tiny25: Path, tmp_path: Path) -> None:
    other = build_tiny_model(tmp_path / "c", "qwen2_5_vl", seed=4)
    assert _digest(tiny25 / "model.safetensors") != _digest(other / "model.safetensors")
    assert _digest(tiny25 / "tokenizer.json") == _digest(other / "tokenizer.json")


def test_config_has_the_cpu_sizes(tiny25: Path) -> None:
    cfg = json.loads((tiny25 / "config.json").read_text())
    text, vision = cfg["text_config"], cfg["vision_config"]
    assert (text["hidden_size"], text["num_hidden_layers"]) == (128, 2)
    assert (text["num_attention_heads"], text["num_key_value_heads"], text["head_dim"]) == (
        4,
        2,
        32,
    )
    assert text["rope_parameters"]["mrope_section"] == [4, 6, 6]
    assert (vision["depth"], vision["hidden_size"], vision["patch_size"]) == (2, 64, 14)
    assert detect_family(tiny25).factor == 28


def test_weights_are_stored_in_bfloat16_so_vllm_auto_loads_them_without_a_cast(
    tiny25: Path,
) -> None:
    # vLLM's dtype "auto" makes a float32 checkpoint bfloat16 and warns once per tensor;
    # bfloat16 weights load silently (and widen exactly under --dtype float32)
    from safetensors import safe_open

    assert json.loads((tiny25 / "config.json").read_text())["dtype"] == "bfloat16"
    with safe_open(tiny25 / "model.safetensors", "pt") as f:
        dtypes = {str(f.get_slice(k).get_dtype()) for k in f.keys()}  # noqa: SIM118
    assert dtypes == {"BF16"}


def test_tokenizer_has_qwen_specials_and_about_2k_vocab(tiny25: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny25)
    assert 1500 <= len(tok) <= 2200
    ids = tok.convert_tokens_to_ids(SPECIAL_TOKENS)
    assert len(set(ids)) == len(SPECIAL_TOKENS) and tok.unk_token_id not in ids
    text = "What happens first? Answer with the option's letter."
    assert tok.decode(tok(text)["input_ids"]) == text


def test_chat_template_places_video_then_text(tiny25: Path) -> None:
    from transformers import AutoProcessor

    proc = AutoProcessor.from_pretrained(tiny25)
    msgs = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "Why?"}]}]
    prompt = proc.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert prompt.endswith(
        "<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>Why?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert prompt.startswith("<|im_start|>system\n")


def test_image_and_video_processors_share_mean_and_std(tiny25: Path) -> None:
    cfg = json.loads((tiny25 / "processor_config.json").read_text())
    image, video = cfg["image_processor"], cfg["video_processor"]
    assert image["image_mean"] == video["image_mean"]
    assert image["image_std"] == video["image_std"]


def test_qwen3_vl_family_builds_with_patch_16(tmp_path: Path) -> None:
    out = build_tiny_model(tmp_path / "q3", "qwen3_vl", seed=0)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["model_type"] == "qwen3_vl"
    assert cfg["vision_config"]["deepstack_visual_indexes"] == [0]
    assert cfg["text_config"]["rope_parameters"]["mrope_interleaved"] is True
    assert detect_family(out).factor == 32


def test_ernie_family_builds_an_moe_whose_template_places_the_video_as_ernie_does(
    tmp_path: Path,
) -> None:
    from transformers import AutoProcessor

    out = build_tiny_model(tmp_path / "ernie", "ernie4_5_vl_moe", seed=0)
    text = json.loads((out / "config.json").read_text())["text_config"]
    assert text["mlp_layer_types"] == ["dense", "sparse"] and text["moe_num_experts"] == 4
    processor = AutoProcessor.from_pretrained(out)
    assert processor.video_processor.draw_on_frames  # its font travels with the checkpoint
    video = [{"type": "video"}, {"type": "text", "text": "Why?"}]
    chat = [
        {"role": "user", "content": video},
        {"role": "assistant", "content": "No."},
        {"role": "user", "content": "And?"},
    ]
    prompt = processor.apply_chat_template(chat)
    assert prompt == (
        "<|begin_of_sentence|>User: Video 1:<|VIDEO_START|><|VIDEO_PLACEHOLDER|><|VIDEO_END|>"
        "Why?\nAssistant: No.<|end_of_sentence|>User: And?\n"
    )


def test_cli_builds_the_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli_main(["model", "tiny", str(tmp_path / "cli"), "--seed", "1"])
    assert rc == 0
    assert (tmp_path / "cli" / "model.safetensors").is_file()
    assert "built tiny qwen2_5_vl" in capsys.readouterr().out


def test_gemma4_template_and_processor_lay_out_a_video_as_gemma_4s_do(tmp_path: Path) -> None:
    import numpy as np
    from transformers import AutoProcessor
    from transformers.video_utils import VideoMetadata

    processor = AutoProcessor.from_pretrained(build_tiny_model(tmp_path / "g4", "gemma4"))
    messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "Why?"}]}]
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    # the real template's turns, one marker per video, the empty thought channel (thinking off)
    assert (
        text
        == "<bos><|turn>user\n<|video|>Why?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>"
    )
    frames = np.zeros((2, 168, 224, 3), dtype=np.uint8)
    meta = VideoMetadata(
        total_num_frames=60, fps=30.0, frames_indices=[0, 45], width=224, height=168
    )
    out = processor(text=[text], videos=[frames], video_metadata=[meta], do_sample_frames=False)
    prompt = processor.tokenizer.decode(out["input_ids"][0])
    # each frame: its mm:ss, then its soft tokens (336x432 px: 63 of the 70) between <|image>
    # and <image|>
    soft = "<|video|>" * 63
    assert f"00:00 <|image>{soft}<image|> 00:01 <|image>{soft}<image|>Why?" in prompt


def test_qwen3_omni_builds_a_thinker_only_moe_checkpoint_with_its_specials(tmp_path: Path) -> None:
    from safetensors import safe_open
    from transformers import AutoProcessor

    out = build_tiny_model(tmp_path / "o3", "qwen3_omni_moe", seed=0)
    cfg = json.loads((out / "config.json").read_text())
    thinker = cfg["thinker_config"]
    assert cfg["enable_audio_output"] is False
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        names = set(f.keys())
    assert {k.split(".")[0] for k in names} == {"thinker"}  # no talker, no code2wav
    assert thinker["tie_word_embeddings"] is thinker["text_config"]["tie_word_embeddings"] is False
    assert thinker["text_config"]["num_experts"] > thinker["text_config"]["num_experts_per_tok"]
    vision = thinker["vision_config"]  # vLLM's position table (image_size) = transformers'
    assert (vision["image_size"] // vision["patch_size"]) ** 2 == vision["num_position_embeddings"]
    assert detect_family(out).factor == 32
    processor = AutoProcessor.from_pretrained(out)
    assert (processor.video_token, processor.vision_bos_token) == (
        "<|video_pad|>",
        "<|vision_start|>",
    )
    assert processor.audio_token == "<|audio_pad|>"
    user = {"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "What?"}]}
    text = processor.apply_chat_template([user], tokenize=False, add_generation_prompt=True)
    # no default system turn: Qwen3-Omni's evaluation sets none
    assert text == (
        "<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>What?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
