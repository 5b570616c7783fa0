"""The transformers engine on the tiny model (CPU, no vLLM needed)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from evalkit.engines.base import Request, SamplingParams
from evalkit.engines.hf_engine import HFConfig, HFEngine
from evalkit.errors import EvalkitError
from evalkit.tiny_checkpoint import build_tiny_model
from tests._engine_env import make_frames


@pytest.fixture(scope="module")
def hf(tmp_path_factory: pytest.TempPathFactory) -> HFEngine:
    model = build_tiny_model(tmp_path_factory.mktemp("hf") / "m", "qwen2_5_vl", seed=0)
    return HFEngine(HFConfig(model=str(model)))


def _video_request(tokens: int = 6, **kw: object) -> Request:
    return Request(
        id="v",
        text="What happens?",
        videos=[make_frames(4, 56, 84, seed=1)],
        sampling=SamplingParams(max_tokens=tokens, **kw),  # type: ignore[arg-type]
    )


def test_async_generate_equals_the_sync_path_and_is_greedy(hf: HFEngine) -> None:
    req = _video_request()
    a = hf.generate_sync(req)
    b = asyncio.run(hf.generate(req))
    assert a.token_ids == b.token_ids and a.text == b.text
    assert a.output_tokens == len(a.token_ids[0]) <= 6


def test_video_tokens_are_counted_in_the_prompt(hf: HFEngine) -> None:
    with_video = hf.generate_sync(_video_request(tokens=1))
    text_only = hf.generate_sync(Request(id="t", text="What happens?", sampling=SamplingParams(1)))
    # 4 frames of 56x84 -> grid 2 x 4 x 6 patches, merged 2x2 -> 12 tokens, + 2 markers.
    assert with_video.prompt_tokens - text_only.prompt_tokens == 12 + 2


def test_timings_are_ordered(hf: HFEngine) -> None:
    t = hf.generate_sync(_video_request()).timings
    assert t.first_token is not None and t.finished is not None
    assert t.submitted <= t.first_token <= t.finished


def test_stop_string_is_cut_like_vllm(hf: HFEngine) -> None:
    full = hf.generate_sync(_video_request(tokens=8)).text
    assert len(full) > 2
    stop = full[1:3]
    cut = hf.generate_sync(_video_request(tokens=8, stop=(stop,))).text
    assert stop not in cut and full.startswith(cut)


def test_frames_off_the_patch_grid_are_refused(hf: HFEngine) -> None:
    req = Request(id="bad-7", text="Q", videos=[make_frames(2, 50, 84)])
    with pytest.raises(EvalkitError, match=r"bad-7.*50x84"):
        hf.generate_sync(req)


def test_closed_engine_refuses_work(tmp_path: Path) -> None:
    model = build_tiny_model(tmp_path / "m", "qwen2_5_vl", seed=0)
    eng = HFEngine(HFConfig(model=str(model)))
    asyncio.run(eng.close())
    with pytest.raises(EvalkitError, match="closed"):
        asyncio.run(eng.generate(Request(id="x", text="hi")))


def test_no_top_k_means_none_not_transformers_default_of_50(
    hf: HFEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """top_k=-1 (evalkit's and vLLM's "off") must reach generate as 0: without a top_k,
    transformers falls back to the generation config's 50 and samples from another policy."""
    seen: dict[str, object] = {}
    generate = hf.model.generate

    def spy(*args: object, **kw: object) -> object:
        seen.update(kw)
        return generate(*args, **kw)

    monkeypatch.setattr(hf.model, "generate", spy)
    hf.generate_sync(_video_request(tokens=2, temperature=1.0, top_k=-1, seed=0))
    assert seen["top_k"] == 0 and seen["do_sample"] is True
    hf.generate_sync(_video_request(tokens=2, temperature=1.0, top_k=5, seed=0))
    assert seen["top_k"] == 5
