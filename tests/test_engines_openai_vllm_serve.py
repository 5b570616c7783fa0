"""The OpenAI-compatible client against a real ``vllm serve`` on CPU (heavy: server start
~30-90 s each). The scripted-server tests (test_engines_openai.py) cover retries and errors;
this one proves the server takes our frames and metadata as the local engines do: same prompt
tokens, same greedy tokens as transformers on the same inputs, for a Qwen-VL checkpoint and
for one of another family (GLM-4.1V, named as ``--engine-opt family=glm4v`` names it).
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("vllm")

from evalkit.engines.base import Request, SamplingParams
from evalkit.engines.hf_engine import HFConfig, HFEngine
from evalkit.engines.openai_engine import OpenAIConfig, OpenAIEngine
from evalkit.tiny_checkpoint import build_tiny_model
from tests._engine_env import engine_env, make_frames

pytestmark = pytest.mark.heavy

START_TIMEOUT_S = 300


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module", params=["qwen2_5_vl", "glm4v"])
def tiny(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    family: str = request.param
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / family, family, seed=0)


@pytest.fixture(scope="module")
def server(tiny: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = _free_port()
    log = tmp_path_factory.mktemp("serve") / "vllm_serve.log"
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(tiny), "--served-model-name", "tiny",
        "--host", "127.0.0.1", "--port", str(port),
        "--dtype", "float32", "--enforce-eager", "--max-model-len", "2048",
        "--max-num-seqs", "4", "--no-enable-prefix-caching",
        "--limit-mm-per-prompt", '{"video": 2, "image": 2}',
        "--trust-request-mm-kwargs",  # frames' metadata and "do not resample" per request
    ]  # fmt: skip
    env = {**os.environ, **engine_env()}
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vllm serve not up in {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")
            time.sleep(1)
        yield base + "/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _requests() -> list[Request]:
    # T=4 frames of 112x168: within the HF/vLLM M-RoPE parity limit (see test_engines_vllm)
    return [
        Request(
            id=f"clip{i}",
            text=f"What happens in clip {i}? Answer briefly.",
            videos=[make_frames(4, 112, 168, seed=300 + i)],
            sampling=SamplingParams(max_tokens=10),
        )
        for i in range(3)
    ]


def test_frames_sent_to_vllm_serve_give_the_local_greedy_answer(server: str, tiny: Path) -> None:
    reqs = _requests()
    hf = HFEngine(HFConfig(model=str(tiny)))
    expected = [hf.generate_sync(r) for r in reqs]

    async def go() -> list:
        family = None if tiny.name.startswith("qwen") else tiny.name  # as --engine-opt family=
        config = OpenAIConfig(base_url=server, model="tiny", max_concurrency=2, family=family)
        engine = OpenAIEngine(config)
        try:
            return list(await asyncio.gather(*(engine.generate(r) for r in reqs)))
        finally:
            await engine.close()

    got = asyncio.run(go())
    # The same prompt token count proves the server saw 4 frames of 112x168 (not resampled
    # or resized): the visual tokens are most of the prompt.
    assert [c.prompt_tokens for c in got] == [c.prompt_tokens for c in expected]
    assert [c.output_tokens for c in got] == [c.output_tokens for c in expected]
    # The byte-level tiny model may end on an incomplete UTF-8 fragment, which the server's
    # detokenizer holds back; everything before it must agree.
    assert [c.text for c in got] == [c.text.rstrip("\ufffd") for c in expected]
    assert all(c.timings.first_token is not None for c in got)
