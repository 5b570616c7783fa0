"""The four Qwen-VL families the product names, end to end on CPU (heavy: one vLLM engine
start per family, ~20-40 s each).

For Qwen2-VL, Qwen2.5-VL, Qwen3-VL and Qwen3.5: ``evalkit model tiny --family`` builds a
checkpoint; the family is detected with its frame factor; vLLM and transformers give the
same prompt length and the same greedy tokens on a video and on an image request; and the
family's own use of the frames' timestamps shows: Qwen3-VL and Qwen3.5 write them into the
prompt as text ("<t seconds>"), and vLLM writes the same ones as transformers (same prompt
length and tokens for a clip 100 s long); Qwen2.5-VL reads the timing into its M-RoPE
positions instead (same tokens for that clip too: evalkit.engines.reference_rope gives transformers
the reference positions vLLM uses), Qwen2-VL ignores it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm")

from evalkit.engines.base import Request, SamplingParams
from evalkit.engines.family import detect_family
from evalkit.engines.hf_engine import HFConfig, HFEngine
from evalkit.engines.vllm_engine import VLLMConfig, VLLMEngine
from evalkit.tiny_checkpoint import QWEN_FAMILIES, build_tiny_model
from evalkit.video.types import Frames
from tests._engine_env import apply_engine_env, make_frames

pytestmark = pytest.mark.heavy

FACTOR = {"qwen2_vl": 28, "qwen2_5_vl": 28, "qwen3_vl": 32, "qwen3_5": 32}
TIMESTAMPS_IN_PROMPT = {"qwen3_vl", "qwen3_5"}
# vLLM's CPU kernel for Qwen3.5's gated delta-net layers runs in bfloat16 only.
DTYPE = {"qwen3_5": "bfloat16"}


def test_every_named_family_can_be_built() -> None:
    assert set(QWEN_FAMILIES) == set(FACTOR)  # the other families: test_families_e2e.py


@pytest.fixture(scope="module")
def engine_env() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        apply_engine_env(mp)
        yield


def _long_clip(frames: Frames, seconds: float = 100.0) -> Frames:
    """The same pixels, as sampled uniformly from a clip ``seconds`` long."""
    fps = frames.meta.source_fps
    total = round(seconds * fps)
    n = len(frames.meta.indices)
    indices = [round(i * (total - 1) / (n - 1)) for i in range(n)]
    meta = replace(
        frames.meta,
        total_frames=total,
        duration_s=total / fps,
        indices=indices,
        timestamps=[i / fps for i in indices],
    )
    return Frames(frames.array, meta)


def _requests(family: str) -> list[Request]:
    factor = FACTOR[family]
    video = make_frames(4, 2 * factor, 3 * factor, seed=1)
    image = make_frames(1, 2 * factor, 3 * factor, seed=2).array[0]
    sampling = SamplingParams(max_tokens=10)
    reqs = [
        Request(id="video", text="<video> What happens?", videos=[video], sampling=sampling),
        Request(id="image", text="<image> What is this?", images=[image], sampling=sampling),
    ]
    # Qwen2.5-VL puts a long clip's timing into M-RoPE positions (temporal step 100 here,
    # past the spatial extent: evalkit.engines.reference_rope), the Qwen3 families write it as text
    long = Request(
        id="long", text="<video> What happens?", videos=[_long_clip(video)], sampling=sampling
    )
    reqs.append(long)
    return reqs


def _vllm(model: Path, dtype: str, reqs: list[Request]) -> list[Any]:
    async def go() -> list[Any]:
        eng = VLLMEngine(
            VLLMConfig(
                model=str(model),
                dtype=dtype,
                enforce_eager=True,
                max_num_batched_tokens=256,
                max_num_seqs=4,
                max_model_len=2048,
                enable_prefix_caching=False,
            )
        )
        try:
            return [await eng.generate(r) for r in reqs]
        finally:
            await eng.close()

    return asyncio.run(go())


@pytest.mark.parametrize("family", sorted(FACTOR))
def test_family_runs_on_vllm_and_transformers_alike(
    family: str, tmp_path: Path, engine_env: None
) -> None:
    model = build_tiny_model(tmp_path / family, family, seed=0)
    assert detect_family(model).factor == FACTOR[family]
    dtype = DTYPE.get(family, "float32")
    reqs = _requests(family)
    hf = HFEngine(HFConfig(model=str(model), dtype=dtype))
    expected = [hf.generate_sync(r) for r in reqs]
    if family in TIMESTAMPS_IN_PROMPT:  # "<99.5 seconds>" is longer than "<0.2 seconds>"
        assert expected[2].prompt_tokens > expected[0].prompt_tokens
        assert "seconds>" in hf.processor.batch_decode(hf.inputs(reqs[2])["input_ids"])[0]
    got = _vllm(model, dtype, reqs)
    assert [c.prompt_tokens for c in got] == [c.prompt_tokens for c in expected]
    assert [c.token_ids for c in got] == [c.token_ids for c in expected]
