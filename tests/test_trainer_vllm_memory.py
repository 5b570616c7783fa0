"""vLLM's memory on CPU: the trainer's CPU-sized default and the preflight before engine start."""

from __future__ import annotations

import pytest

from evalkit.engines.cpu_memory import reserves_cpu_memory
from evalkit.errors import ConfigError
from evalkit.trainer.config import load_config
from evalkit.trainer.distributed.rollout_worker import rollout_spec
from evalkit.trainer.vllm_memory import CPU_MEMORY_UTILIZATION, preflight

GIB = 1024**3
# the issue's box: vLLM counted 19.97 GiB on the node, 15.92 GiB available
NODE = (int(19.97 * GIB), int(15.92 * GIB))


@pytest.fixture
def no_kv_env(monkeypatch):
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)


def test_vllm_default_of_0_9_is_refused_up_front_with_the_fix(no_kv_env):
    with pytest.raises(ConfigError) as err:
        preflight({"gpu_memory_utilization": 0.9}, node=NODE)
    message = str(err.value)
    assert "17.97 GiB" in message and "15.92 GiB available" in message
    assert "gpu_memory_utilization <= 0.79" in message and "\n" not in message


def test_cpu_default_fits_the_issue_box(no_kv_env):
    ask = preflight({}, node=NODE)
    assert ask is not None and ask.fraction == CPU_MEMORY_UTILIZATION and ask.fits


def test_every_colocated_engine_counts(no_kv_env):
    with pytest.raises(ConfigError, match=r"4 x 3\.99 GiB"):
        preflight({}, engines=4, node=NODE)


def test_kv_cache_env_skips_the_check_as_vllm_does(monkeypatch):
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    assert preflight({"gpu_memory_utilization": 0.9}, node=NODE) is None


def test_cpu_workers_get_the_cpu_default_and_gpu_workers_half():
    base = ["rollout.engine=vllm", "distributed.workers=2"]
    cpu = rollout_spec(load_config(None, base))
    assert cpu.options["gpu_memory_utilization"] == CPU_MEMORY_UTILIZATION
    gpu = rollout_spec(load_config(None, [*base, "distributed.gpus_per_worker=1"]))
    assert gpu.options["gpu_memory_utilization"] == 0.5
    mine = rollout_spec(
        load_config(None, [*base, "rollout.engine_options={gpu_memory_utilization: 0.3}"])
    )
    assert mine.options["gpu_memory_utilization"] == 0.3


def test_a_plugin_that_reserves_memory_gets_the_cpu_handling_and_one_that_does_not_none(
    monkeypatch,
):
    """The CPU sizing and preflight follow ``EngineSpec.reserves_memory``, not the name."""
    from evalkit import engines

    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    spec = engines.EngineSpec("test_reserving", "m:Engine", "m:Config", reserves_memory=True)
    engines.register_engine(spec)
    try:
        assert reserves_cpu_memory("test_reserving") and reserves_cpu_memory("vllm")
        assert not reserves_cpu_memory("hf")
    finally:
        engines.ENGINE_SPECS.unregister(spec.name)
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    assert not reserves_cpu_memory("vllm")  # on a GPU vLLM's own default stands
