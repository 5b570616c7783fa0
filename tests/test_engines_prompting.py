"""Model family detection, the engine registry, and Request -> chat prompt."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from evalkit.engines import ENGINE_CONFIGS, ENGINES
from evalkit.engines.base import Request
from evalkit.engines.family import check_frame_sizes, detect_family, family_from_config
from evalkit.engines.prompting import chat_messages, content_items, render_prompt
from evalkit.errors import EvalkitError
from evalkit.registry import RegistryError
from tests._engine_env import make_frames


@pytest.mark.parametrize(
    ("model_type", "factor"),
    [("qwen2_vl", 28), ("qwen2_5_vl", 28), ("qwen3_vl", 32), ("qwen3_5", 32)],
)
def test_family_factor_by_model_type(model_type: str, factor: int) -> None:
    assert family_from_config({"model_type": model_type}).factor == factor


def test_family_reads_patch_from_vision_config(tmp_path: Path) -> None:
    cfg = {"model_type": "qwen2_5_vl", "vision_config": {"patch_size": 16}}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert detect_family(tmp_path).factor == 32


def test_unknown_family_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(EvalkitError, match=r"config\.json.*'llama'"):
        detect_family(tmp_path)


def test_missing_config_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EvalkitError, match=r"no config\.json"):
        detect_family(tmp_path)


def test_registry_is_lazy_and_suggests_names() -> None:
    assert set(ENGINES) >= {"vllm", "hf", "openai"}
    assert set(ENGINE_CONFIGS) >= {"vllm", "hf", "openai"}
    with pytest.raises(RegistryError, match="did you mean 'vllm'"):
        ENGINES.get("vlm")


def test_engine_configs_reject_unknown_keys() -> None:
    cfg_cls = ENGINE_CONFIGS.get("vllm")
    assert cfg_cls(model="m").enable_chunked_prefill is True
    with pytest.raises(ValueError, match="max_batched"):
        cfg_cls(model="m", max_batched=3)


def test_media_go_before_text_without_markers() -> None:
    req = Request(
        id="a", text="Q?", videos=[make_frames(2, 28, 28)], images=[np.zeros((28, 28, 3), np.uint8)]
    )
    assert [i["type"] for i in content_items(req)] == ["video", "image", "text"]


def test_markers_place_media_in_order() -> None:
    req = Request(
        id="a",
        text="First <image> then <video> end",
        videos=[make_frames(2, 28, 28)],
        images=[np.zeros((28, 28, 3), np.uint8)],
        system="sys",
    )
    msgs = chat_messages(req)
    assert msgs[0] == {"role": "system", "content": "sys"}
    kinds = [(i["type"], i.get("text")) for i in msgs[1]["content"]]
    assert kinds == [
        ("text", "First "),
        ("image", None),
        ("text", " then "),
        ("video", None),
        ("text", " end"),
    ]


def test_marker_count_mismatch_names_the_request() -> None:
    req = Request(id="s-17", text="<video> and <video>", videos=[make_frames(2, 28, 28)])
    with pytest.raises(EvalkitError, match=r"s-17.*2 <video>"):
        content_items(req)


def test_frames_not_multiple_of_factor_are_refused() -> None:
    req = Request(id="s-3", text="Q", videos=[make_frames(2, 28, 30)])
    with pytest.raises(EvalkitError, match=r"s-3.*28x30.*28"):
        check_frame_sizes(req, 28)
    check_frame_sizes(Request(id="ok", text="Q", videos=[make_frames(2, 56, 28)]), 28)


@pytest.fixture(scope="module")
def tiny_tokenizer() -> object:
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    from evalkit.tiny_checkpoint import build_tokenizer

    return build_tokenizer()


def test_assistant_prefix_follows_the_generation_prompt(tiny_tokenizer: object) -> None:
    plain = Request(id="a", text="Q?", videos=[make_frames(2, 28, 28)])
    prefixed = Request(
        id="a", text="Q?", videos=[make_frames(2, 28, 28)], assistant_prefix="Best Option: ("
    )
    base = render_prompt(tiny_tokenizer, plain)
    assert base.endswith("Q?<|im_end|>\n<|im_start|>assistant\n")
    assert render_prompt(tiny_tokenizer, prefixed) == base + "Best Option: ("


def test_prefixed_prompt_is_what_a_server_renders_for_a_continued_assistant_message(
    tiny_tokenizer: object,
) -> None:
    # vllm serve renders continue_final_message through the same HF chat template; both
    # paths must give the model the same text (the openai engine sends the prefix so)
    req = Request(id="a", text="Q?", system="sys", assistant_prefix="Answer:")
    continued = [*chat_messages(req), {"role": "assistant", "content": "Answer:"}]
    served = tiny_tokenizer.apply_chat_template(  # type: ignore[attr-defined]
        continued, tokenize=False, continue_final_message=True
    )
    assert render_prompt(tiny_tokenizer, req) == served
