"""Backends describe themselves (EngineSpec): callers ask the registration, not the name."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterator

import pytest
from pydantic import BaseModel, ConfigDict

from evalkit import engines
from evalkit.cli.run import add_arguments
from evalkit.config import throughput_only, throughput_only_fields
from evalkit.engines import EngineSpec, engine_choices, engine_for_mode, register_engine
from evalkit.engines.base import BatchEngine, Completion, Engine, Request
from evalkit.engines.openai_engine import OpenAIConfig
from evalkit.engines.vllm_engine import VLLMConfig
from evalkit.preflight import check_model
from evalkit.runner import JudgeConfig, _result_engine_options, _result_judge, build_engine


class EchoConfig(BaseModel):
    """A test backend's options: one that changes answers, one that only changes speed."""

    model_config = ConfigDict(extra="forbid")
    model: str
    prefix: str = ""
    lanes: int = throughput_only(1)


class EchoEngine:
    """Answers each request with its prefix and the request's text."""

    def __init__(self, config: EchoConfig) -> None:
        self.config = config

    async def generate(self, request: Request) -> Completion:
        return Completion(request_id=request.id, texts=[self.config.prefix + request.text])

    async def close(self) -> None:
        return None


@pytest.fixture
def echo() -> Iterator[EngineSpec]:
    """The test backend, registered for one test (the registries are process-wide)."""
    spec = register_engine(
        EngineSpec(
            "test_echo",
            f"{__name__}:EchoEngine",
            f"{__name__}:EchoConfig",
            local_checkpoint=False,
        )
    )
    yield spec
    engines.ENGINE_SPECS.unregister(spec.name)


def test_a_new_backend_is_one_registration(echo: EngineSpec) -> None:
    assert "test_echo" in engine_choices()
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args(["--engine", "test_echo"]).engine == "test_echo"
    check_model("served-name-not-a-folder", "test_echo")  # not a local checkpoint: unchecked
    engine = build_engine("test_echo", "m", {"prefix": "> ", "lanes": 4})
    assert isinstance(engine, Engine) and not isinstance(engine, BatchEngine)
    reply = asyncio.run(engine.generate(Request(id="r", text="hi")))
    assert reply.text == "> hi"
    assert _result_engine_options("test_echo", {"prefix": "> ", "lanes": 4}) == {"prefix": "> "}


def test_sync_mode_takes_the_batch_variant_only_where_one_is_registered() -> None:
    assert engine_for_mode("vllm", "sync") == "vllm_batch"
    assert engine_for_mode("vllm", "async") == "vllm"
    assert engine_for_mode("hf", "sync") == "hf"
    assert "vllm_batch" not in engine_choices()
    assert {"vllm", "hf", "openai"} <= set(engine_choices())


def test_throughput_only_fields_are_read_from_the_config_models() -> None:
    assert throughput_only_fields(VLLMConfig) == {
        "max_num_seqs",
        "max_num_batched_tokens",
        "gpu_memory_utilization",
        "enforce_eager",
        "record_steps",
    }
    assert throughput_only_fields(OpenAIConfig) == {"timeout_s"}
    options = {"max_num_seqs": 4, "dtype": "float32", "enforce_eager": True}
    assert _result_engine_options("vllm", options) == {"dtype": "float32"}


def test_the_judge_fingerprint_leaves_out_how_the_judge_is_called() -> None:
    judge = JudgeConfig(model="j", timeout_s=5, retries=3, concurrency=2, max_failures=9)
    recorded = _result_judge(judge)
    assert recorded is not None
    assert {"timeout_s", "retries", "concurrency", "max_failures"}.isdisjoint(recorded)
    assert recorded["model"] == "j" and _result_judge(None) is None
