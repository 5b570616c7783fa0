"""Colocated rollouts, the parts that need no Ray or engine: which tensors a rank gathers,
how prompts are split over engines, what the config may ask (the heavy end-to-end tests are
in test_trainer_distributed_vllm.py)."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn

from evalkit.errors import ConfigError
from evalkit.trainer import weight_sync as ws
from evalkit.trainer.distributed.colocate import slices
from evalkit.trainer.distributed.rollout_worker import colocated, gathered_weights, rollout_spec
from tests.test_trainer_weight_sync import _Worker

CONFIG = "trainer/configs/grpo_synthvideo_ray2_vllm.yaml"


def _cfg(*overrides: str) -> Any:
    from evalkit.trainer.config import load_config

    return load_config(CONFIG, list(overrides))


class _Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(5, 3)
        self.norm = nn.LayerNorm(3)
        self.head = nn.Linear(3, 5, bias=False)
        self.head.weight = self.embed.weight


def test_gathered_weights_give_a_tied_parameter_once_in_state_dict_order() -> None:
    model = _Tied()
    got = list(gathered_weights(model))
    assert [n for n, _ in got] == ["embed.weight", "norm.weight", "norm.bias"]
    assert all(not t.requires_grad for _, t in got)  # detached: nothing joins a graph
    assert torch.equal(got[0][1], model.head.weight)


def test_send_without_dedup_delivers_every_transient_tensor() -> None:
    """Gathered tensors are freed bucket by bucket, so a later one may get a freed one's
    address; the rank passes them as distinct and every one must arrive."""
    worker = _Worker()

    def transient() -> Any:
        for i in range(12):
            yield f"w{i}", torch.full((16,), float(i))  # dropped once packed

    stats = ws.EngineWeightSync(worker, transport="shm", bucket_mb=64 / 2**20).send(
        transient(), unique=False
    )
    assert stats.tensors == 12 and sorted(worker.loaded) == sorted(f"w{i}" for i in range(12))
    assert all(float(worker.loaded[f"w{i}"][0]) == i for i in range(12))


@pytest.mark.parametrize(
    ("n", "parts", "want"),
    [
        (5, 2, [(0, 3), (3, 5)]),
        (4, 2, [(0, 2), (2, 4)]),
        (1, 2, [(0, 1)]),  # fewer prompts than engines: the others idle
        (3, 1, [(0, 3)]),
    ],
)
def test_prompts_are_cut_into_contiguous_slices(
    n: int, parts: int, want: list[tuple[int, int]]
) -> None:
    assert slices(n, parts) == want


def test_the_vllm_config_hosts_one_engine_on_rank_zero() -> None:
    cfg = _cfg()
    assert colocated(cfg) and not colocated(_cfg("rollout.engine=hf"))
    spec = rollout_spec(cfg)
    assert spec.engine == "vllm" and spec.hosts == (0,)
    assert spec.options["gpu_memory_utilization"] == 0.2  # CPU: a share of the memory node
    assert rollout_spec(_cfg("distributed.rollout_ranks=all")).hosts == (0, 1)
    gpu = rollout_spec(_cfg("distributed.gpus_per_worker=1"))
    assert gpu.options["gpu_memory_utilization"] == 0.5  # leaves the actor its share


def test_a_plugin_engine_that_takes_weights_in_memory_is_colocated() -> None:
    """Colocation follows ``EngineSpec.weight_sync``, not the engine's name."""
    from evalkit import engines

    spec = engines.EngineSpec("test_syncing", "m:Engine", "m:Config", weight_sync=True)
    engines.register_engine(spec)
    try:
        assert colocated(_cfg("rollout.engine=test_syncing"))
        assert not colocated(_cfg("rollout.engine=test_syncing", "distributed.workers=0"))
    finally:
        engines.ENGINE_SPECS.unregister(spec.name)


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (["rollout.engine_options={tensor_parallel_size: 2}"], "needs GPUs"),
        (
            ["rollout.engine_options={tensor_parallel_size: 2}", "distributed.gpus_per_worker=1"],
            "gpus_per_worker >= 2",
        ),
        (["data.val_path=val.jsonl", "trainer.val_freq=1"], "validation"),
        (["algorithm.advantage=remax"], "remax"),
    ],
)
def test_what_colocated_rollouts_cannot_do_is_refused_by_name(
    overrides: list[str], match: str
) -> None:
    with pytest.raises(ConfigError, match=match):
        rollout_spec(_cfg(*overrides))


def _host(rank: int, engine: Any, hosts: tuple[int, ...] = (0,)) -> Any:
    from evalkit.trainer.distributed.rollout_worker import RolloutHost, RolloutSpec
    from evalkit.trainer.rollout import EngineLoop

    host = RolloutHost()
    host.rank = rank
    host.actor = SimpleNamespace(model=_Tied())
    host.rollout_spec = RolloutSpec("vllm", bucket_mb=16 / 2**20, transport="shm", hosts=hosts)
    host.rollout_engine = engine
    host.rollout_loop = EngineLoop()
    return host


def test_the_hosting_rank_wakes_its_engine_and_loads_the_gathered_weights() -> None:
    from tests.test_trainer_weight_sync import _fake_engine, _FakeCore

    core = _FakeCore(sleep_mode=True)
    host = _host(0, _fake_engine(core))
    try:
        assert host.rollout_sleep() is True
        stats = host.rollout_sync()
    finally:
        host.rollout_loop.close()
    assert stats is not None and stats.tensors == 3 and stats.buckets == 3  # tied once
    assert sorted(core.worker.loaded) == ["embed.weight", "norm.bias", "norm.weight"]
    assert core.events[:2] == ["sleep1", "wake:weights"]  # weights woken before sending
    assert core.events[-3:] == ["wake:kv_cache", "reset_prefix", "reset_encoder"]


def test_a_rank_without_an_engine_takes_part_in_the_gather_and_sends_nothing() -> None:
    host = _host(1, None)
    calls: list[str] = []
    real = gathered_weights

    def counting(model: Any) -> Any:
        for name, t in real(model):
            calls.append(name)
            yield name, t

    import evalkit.trainer.distributed.rollout_worker as rw

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rw, "gathered_weights", counting)
        assert host.rollout_sync() is None
    assert calls == ["embed.weight", "norm.weight", "norm.bias"]  # every collective, in order
    assert host.rollout_sleep() is False
    with pytest.raises(RuntimeError, match="rank 1 hosts no rollout engine"):
        host.rollout_generate([], [], SimpleNamespace(), 0)


def test_closing_the_rollout_unlinks_the_ranks_sync_buckets_before_the_engine_closes() -> None:
    """``WorkerGroup.shutdown`` kills the actor right after ``close_rollout``: the
    finaliser that would unlink its /dev/shm buckets may never run."""
    from tests.test_trainer_weight_sync import _fake_engine, _FakeCore, _shm_segments

    engine = _fake_engine(_FakeCore(sleep_mode=False, device="cpu"))
    left_at_close: list[set[str]] = []

    async def close() -> None:
        left_at_close.append(made & _shm_segments())

    engine.close = close
    host = _host(0, engine)
    before = _shm_segments(os.getpid())
    host.rollout_sync()
    sync = engine._trainer_weight_sync  # held: no finaliser can unlink them for us
    made = _shm_segments(os.getpid()) - before
    assert len(made) == 3  # one per bucket

    host.close_rollout()
    assert left_at_close == [set()]
    assert not made & _shm_segments()
    assert host.rollout_engine is None and sync.pool.segments == []
