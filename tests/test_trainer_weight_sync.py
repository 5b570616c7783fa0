"""In-memory weight sync (buckets through shared memory), sleep/wake order, per-request seeds.

No vLLM here: the "engine" is a fake whose RPCs run the real worker-side code
(:func:`trainer.weight_sync.open_bucket`), in this process or in a spawned one.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from evalkit.engines.base import Request, SamplingParams
from evalkit.errors import EvalkitError
from evalkit.trainer import weight_sync as ws
from evalkit.trainer.rollout import (
    EngineLoop,
    per_request_seeds,
    sample_responses,
    sleep_engine,
    sync_weights,
)


def _model_tensors() -> list[tuple[str, torch.Tensor]]:
    gen = torch.Generator().manual_seed(0)
    emb = torch.randn(50, 8, generator=gen)
    return [
        ("embed.weight", emb),
        ("layer.weight", torch.randn(8, 8, generator=gen)),
        ("layer.bias", torch.randn(8, generator=gen).to(torch.bfloat16)),
        ("steps", torch.arange(3)),
        ("big.weight", torch.randn(64, 64, generator=gen)),
        ("lm_head.weight", emb),  # tied to the embedding: sent once
    ]


def test_tied_tensors_are_sent_once_and_buckets_respect_the_size() -> None:
    named = list(ws.unique_tensors(_model_tensors()))
    assert [n for n, _ in named] == [
        "embed.weight",
        "layer.weight",
        "layer.bias",
        "steps",
        "big.weight",
    ]
    # sizes, 64-byte aligned: 1600, 256, 64 (16 B of bf16), 64 (24 B), 16384
    groups = list(ws.buckets(named, 1024))
    assert [[n for n, _ in g] for g in groups] == [
        ["embed.weight"],  # 1600 B > 1024: alone
        ["layer.weight", "layer.bias", "steps"],  # 384 B together
        ["big.weight"],
    ]
    assert [[n for n, _ in g] for g in ws.buckets(named, 2048)] == [
        ["embed.weight", "layer.weight", "layer.bias", "steps"],  # 1984 B <= 2048
        ["big.weight"],
    ]


class _Worker:
    """The worker side of the RPCs, recording what arrived."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.loaded: dict[str, torch.Tensor] = {}

    def __call__(self, method: str, *args: Any) -> list[Any]:
        self.calls.append(method)
        if method == "trainer_load_bucket":
            handle, first, last = args
            self.calls[-1] += "[first]" * first + "[last]" * last
            got = ws.open_bucket(handle)
            self.loaded.update(got)
            return [len(got)]
        return [None]


def _shm_segments(pid: int | None = None) -> set[str]:
    """The weight-sync segments in /dev/shm; those of process ``pid`` only, when given
    (another run's beside this one are not its own)."""
    prefix = "ek-sync-" if pid is None else f"ek-sync-{pid}-"
    return {p for p in os.listdir("/dev/shm") if p.startswith(prefix)}


def test_shm_sync_delivers_every_tensor_exactly_and_reuses_its_segments() -> None:
    worker = _Worker()
    before = _shm_segments(os.getpid())
    sync = ws.EngineWeightSync(worker, transport="shm", bucket_mb=1024 / 2**20)
    stats = sync.send(_model_tensors())
    assert worker.calls == [  # one RPC per bucket; the first begins, the last finishes
        "trainer_load_bucket[first]",
        "trainer_load_bucket",
        "trainer_load_bucket[last]",
    ]
    assert stats.buckets == 3
    expect = dict(ws.unique_tensors(_model_tensors()))
    assert set(worker.loaded) == set(expect) and stats.tensors == len(expect)
    for name, t in expect.items():
        assert worker.loaded[name].dtype == t.dtype and torch.equal(worker.loaded[name], t)
    segments = _shm_segments(os.getpid()) - before
    assert len(segments) == 3
    changed = [(n, t * 2 if t.is_floating_point() else t) for n, t in expect.items()]
    sync.send(changed)  # the next step: the same segments, refilled
    assert _shm_segments(os.getpid()) - before == segments
    assert torch.equal(worker.loaded["big.weight"], dict(changed)["big.weight"])
    sync.close()
    assert _shm_segments(os.getpid()) == before  # unlinked


def test_sync_casts_floating_tensors_to_the_engine_dtype() -> None:
    worker = _Worker()
    ws.EngineWeightSync(worker, transport="shm", dtype=torch.bfloat16).send(_model_tensors())
    assert worker.loaded["layer.weight"].dtype == torch.bfloat16
    assert worker.loaded["steps"].dtype == torch.int64  # integers untouched


def _open_in_child(handle: dict[str, Any]) -> dict[str, torch.Tensor]:
    return dict(ws.open_bucket(handle))


@pytest.mark.timeout(120)
def test_a_bucket_is_read_from_another_process() -> None:
    """The worker is another process (vLLM's engine core): the segment name is enough."""
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=ctx) as pool:

        def rpc(method: str, *args: Any) -> list[Any]:
            if method != "trainer_load_bucket":
                return [None]
            got = pool.submit(_open_in_child, args[0]).result(timeout=100)
            for name, t in got.items():
                assert torch.equal(t, dict(ws.unique_tensors(_model_tensors()))[name])
            return [len(got)]

        stats = ws.EngineWeightSync(rpc, transport="shm").send(_model_tensors())
    assert stats.buckets == 1 and stats.tensors == 5


def test_transport_choice() -> None:
    assert ws.resolve_transport("auto", "cpu") == "shm"
    assert ws.resolve_transport("auto", "cuda") == "cuda_ipc"
    assert ws.resolve_transport("file", "cuda") == "file"
    with pytest.raises(EvalkitError, match="sync_transport"):
        ws.resolve_transport("nccl", "cuda")


# -- sleep / wake around the sync, on a fake AsyncLLM ----------------------------------------


class _FakeCore:
    """The AsyncLLM surface sync_weights and sleep_engine use, recording the call order."""

    def __init__(self, sleep_mode: bool, device: str = "cuda") -> None:
        self.model_config = SimpleNamespace(enable_sleep_mode=sleep_mode, dtype=torch.float32)
        self.vllm_config = SimpleNamespace(device_config=SimpleNamespace(device_type=device))
        self.events: list[str] = []
        self.asleep: set[str] = set()
        self.worker = _Worker()

    async def is_sleeping(self) -> bool:
        return bool(self.asleep)

    async def sleep(self, level: int = 1) -> None:
        self.events.append(f"sleep{level}")
        self.asleep = {"weights", "kv_cache"}

    async def wake_up(self, tags: list[str] | None = None) -> None:
        self.events.append(f"wake:{','.join(tags or [])}")
        self.asleep -= set(tags or self.asleep)

    async def collective_rpc(self, method: str, args: tuple[Any, ...] = ()) -> list[Any]:
        assert "weights" not in self.asleep, "weights sent into a sleeping engine"
        self.events.append(method)
        return self.worker(method, *args)

    async def reset_prefix_cache(self) -> None:
        self.events.append("reset_prefix")

    async def reset_encoder_cache(self) -> None:
        self.events.append("reset_encoder")


def _fake_engine(core: _FakeCore) -> Any:
    return SimpleNamespace(_engine=core)


def _actor() -> Any:
    model = torch.nn.Linear(4, 3)
    return SimpleNamespace(model=model)


def test_sleep_then_sync_wakes_weights_before_sending_and_kv_cache_after() -> None:
    core, loop = _FakeCore(sleep_mode=True), EngineLoop()
    try:
        engine = _fake_engine(core)
        assert sleep_engine(engine, loop, level=2) is True
        sync_weights(engine, _actor(), loop, transport="shm")
    finally:
        loop.close()
    assert core.events == [
        "sleep2",
        "wake:weights",
        "trainer_load_bucket",  # the only bucket: begins and finishes the reload
        "wake:kv_cache",
        "reset_prefix",
        "reset_encoder",
    ]
    assert not core.asleep


def test_a_sync_with_another_bucket_size_unlinks_the_old_buckets_at_once() -> None:
    core, loop = _FakeCore(sleep_mode=False, device="cpu"), EngineLoop()
    engine = _fake_engine(core)
    try:
        before = _shm_segments(os.getpid())
        sync_weights(engine, _actor(), loop, transport="shm", bucket_mb=1.0)
        old = engine._trainer_weight_sync  # held: no finaliser can unlink them for us
        first = _shm_segments(os.getpid()) - before
        assert first
        sync_weights(engine, _actor(), loop, transport="shm", bucket_mb=2.0)
        assert engine._trainer_weight_sync is not old
        assert not first & _shm_segments()
    finally:
        engine._trainer_weight_sync.close()
        loop.close()


def test_without_sleep_mode_sleep_is_a_logged_no_op(caplog: pytest.LogCaptureFixture) -> None:
    from evalkit.trainer import rollout

    rollout._LOGGED.clear()  # the reason is logged once per process
    core, loop = _FakeCore(sleep_mode=False, device="cpu"), EngineLoop()
    try:
        with caplog.at_level("INFO", logger="evalkit.trainer.rollout"):
            assert sleep_engine(_fake_engine(core), loop, level=1) is False
        sync_weights(_fake_engine(core), _actor(), loop)
    finally:
        loop.close()
    assert "no sleep mode" in caplog.text
    assert not [e for e in core.events if e.startswith(("sleep", "wake"))]
    assert "trainer_load_bucket" in core.events


# -- per-request seeds ------------------------------------------------------------------------


class _RecordingEngine:
    def __init__(self, device: str) -> None:
        self._engine = SimpleNamespace(
            vllm_config=SimpleNamespace(device_config=SimpleNamespace(device_type=device))
        )
        self.seen: list[SamplingParams] = []

    async def generate(self, request: Request) -> Any:
        self.seen.append(request.sampling)
        n = request.sampling.n
        return SimpleNamespace(token_ids=[[1]] * n, texts=["a"] * n, logprobs=None)


@pytest.mark.parametrize(("device", "seeded"), [("cuda", True), ("cpu", False)])
def test_rollout_requests_carry_one_seed_per_prompt(device: str, seeded: bool) -> None:
    from evalkit.engines.vllm_engine import to_vllm_sampling

    engine, loop = _RecordingEngine(device), EngineLoop()
    try:
        reqs = [Request(id=f"p{i}", text="x") for i in range(3)]
        sample_responses(engine, reqs, [2, 0, 3], SamplingParams(temperature=1.0), 100, loop)
    finally:
        loop.close()
    assert per_request_seeds(engine) is seeded
    seeds = [s.seed for s in engine.seen]
    assert seeds == ([100, 102] if seeded else [None, None])  # prompt 1 had no online slot
    if seeded:  # and vLLM's SamplingParams gets it
        assert [to_vllm_sampling(s).seed for s in engine.seen] == [100, 102]


_HOLDER = """
import os, signal, sys, time
from evalkit.engines.lifecycle import Termination
from evalkit.trainer.weight_sync import ShmPool
how = sys.argv[1]
pool = ShmPool()
try:
    # the handler is in place before the name is printed: the test signals on reading it
    with Termination() as term:
        print(pool.segment(0, 4096).name, flush=True)
        if how == "kill":  # the whole group at once, multiprocessing's resource tracker too
            time.sleep(0.5)
            os.killpg(0, signal.SIGKILL)
        if how == "raise":
            raise RuntimeError("a step failed")
        time.sleep(120)
except KeyboardInterrupt:
    sys.exit(term.exit_code)
"""


def _holder(how: str) -> tuple[Any, str]:
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parent.parent)
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, how],
        env={**os.environ, "PYTHONPATH": root},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


@pytest.mark.parametrize("how", ["raise", "sigterm"])
def test_a_trainer_process_that_fails_or_is_terminated_unlinks_its_segments(how: str) -> None:
    import signal

    proc, name = _holder(how)
    assert name.startswith(f"ek-sync-{proc.pid}-")
    if how == "sigterm":
        assert name in _shm_segments()
        proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == (143 if how == "sigterm" else 1)
    assert name not in _shm_segments()


def test_segments_of_a_killed_process_are_swept_by_the_next_pool() -> None:
    proc, name = _holder("kill")
    proc.communicate(timeout=60)
    assert proc.returncode == -9 and name in _shm_segments()  # nobody was left to unlink it
    pool = ws.ShmPool()
    try:
        mine = pool.segment(0, 64).name
        assert name not in _shm_segments() and mine in _shm_segments()
    finally:
        pool.close()
