"""Backends describe themselves (EngineSpec): callers ask the registration, not the name."""

from __future__ import annotations

import argparse
import asyncio
import math
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from evalkit import engines
from evalkit.cli.run import add_arguments
from evalkit.config import throughput_only, throughput_only_fields
from evalkit.engines import EngineSpec, engine_choices, engine_for_mode, register_engine
from evalkit.engines.base import BatchEngine, Completion, Engine, Request
from evalkit.engines.openai_engine import OpenAIConfig
from evalkit.engines.vllm_engine import VLLMConfig
from evalkit.errors import ConfigError
from evalkit.run.config import JudgeConfig, RunConfig
from evalkit.run.plan import _result_engine_options, _result_judge
from evalkit.run.preflight import check_model


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
    engine = engines.build("test_echo", "m", {"prefix": "> ", "lanes": 4})
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


def test_build_refuses_an_unknown_option_in_one_line_naming_the_engine(
    echo: EngineSpec,
) -> None:
    with pytest.raises(ConfigError) as err:
        engines.build("test_echo", "m", {"prefix": "> ", "prefx": "> "})
    message = str(err.value)
    assert "\n" not in message
    assert "'test_echo'" in message and "prefx" in message and "EchoConfig" in message
    assert "prefix" not in message.replace("prefx", "")  # the good option is not blamed
    with pytest.raises(ConfigError, match="'test_echo': lanes"):
        engines.build(echo, "m", {"lanes": "many"})  # a spec is taken as well as a name


@pytest.fixture
def sharded() -> Iterator[EngineSpec]:
    """A plug-in backend that says it uses a GPU and splits the model (tensor parallel),
    under a name no call site knows."""
    spec = register_engine(
        EngineSpec(
            "test_sharded",
            f"{__name__}:EchoEngine",
            f"{__name__}:EchoConfig",
            uses_gpu=True,
            tensor_parallel=True,
        )
    )
    yield spec
    engines.ENGINE_SPECS.unregister(spec.name)


def test_a_tensor_parallel_plugin_runs_its_workers_inside_the_replica(
    sharded: EngineSpec, echo: EngineSpec
) -> None:
    from evalkit.run.plan import plan_of
    from evalkit.scale.replica import _inside_actor

    tp2 = {"tensor_parallel_size": 2}
    sharded_plan = plan_of(RunConfig(model="m", engine="test_sharded", engine_options=tp2), [])
    inside = _inside_actor(sharded_plan)
    assert inside.engine_options["engine_kwargs"] == {"distributed_executor_backend": "mp"}
    plain = plan_of(RunConfig(model="m", engine="test_echo", engine_options=tp2), [])  # no
    assert _inside_actor(plain) is plain


def test_the_shared_judge_asks_a_gpu_for_a_plugin_that_uses_one(
    sharded: EngineSpec, echo: EngineSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalkit.scale import judge_service
    from evalkit.scale.driver import shared_judge

    asked: list[float] = []

    def start(cfg: RunConfig, *, num_gpus: float = 0, **_: Any) -> tuple[str, Any]:
        asked.append(num_gpus)
        return "client", lambda: None

    class Cluster:
        def cluster_resources(self) -> dict[str, float]:
            return {"CPU": 2.0, "GPU": 8.0}

    monkeypatch.setattr(judge_service, "start_judge_service", start)
    for name in ("test_sharded", "test_echo"):
        with shared_judge(RunConfig(model="m", judge={"model": "j", "engine": name}), Cluster()):
            pass
    assert asked == [1, 0]


def test_throughput_only_fields_are_read_from_the_config_models() -> None:
    assert throughput_only_fields(VLLMConfig) == {
        "max_num_seqs",
        "max_num_batched_tokens",
        "gpu_memory_utilization",
        "kv_cache_memory_bytes",
        "enforce_eager",
        "record_steps",
        "close_grace_s",
    }
    assert throughput_only_fields(OpenAIConfig) == {"timeout_s", "probe"}
    options = {"max_num_seqs": 4, "dtype": "float32", "enforce_eager": True}
    assert _result_engine_options("vllm", options) == {"dtype": "float32"}


def test_the_judge_fingerprint_leaves_out_how_the_judge_is_called() -> None:
    judge = JudgeConfig(model="j", timeout_s=5, retries=3, concurrency=2, max_failures=9)
    recorded = _result_judge(judge)
    assert recorded is not None
    assert {"timeout_s", "retries", "concurrency", "max_failures"}.isdisjoint(recorded)
    assert recorded["model"] == "j" and _result_judge(None) is None


@pytest.mark.parametrize("grace", [0, -1, math.nan, math.inf])
def test_a_close_grace_that_is_not_a_positive_finite_time_is_refused_by_name(
    grace: float,
) -> None:
    with pytest.raises(ConfigError, match="'vllm': close_grace_s: "):
        engines.engine_config("vllm", "m", {"close_grace_s": grace})


def test_a_short_close_grace_is_kept() -> None:
    config = engines.engine_config("vllm", "m", {"close_grace_s": 0.25})
    assert isinstance(config, VLLMConfig) and config.close_grace_s == 0.25
