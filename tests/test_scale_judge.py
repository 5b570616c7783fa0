"""The judge as one shared Ray actor: replicas' clients share one engine; the guard stays
on the caller's side."""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalkit.engines.base import Completion, Engine, Request
from evalkit.errors import ConfigError
from evalkit.run.config import JudgeConfig, RunConfig
from evalkit.scale.judge_service import JudgeClient, start_judge_service
from evalkit.scoring.judge_guard import JudgeGuard
from tests._distributed import local_ray
from tests.scripted_engine import ScriptedEngine

CFG = RunConfig(model="policy", judge=JudgeConfig(model="judge", engine="openai"))


@pytest.fixture(scope="module")
def ray_session() -> Iterator[Any]:
    with local_ray(2) as ray:  # never a running cluster
        yield ray


def scripted_judge(marker: str, decode_s: float) -> Engine:
    """Builds the stand-in judge engine, leaving one line in ``marker`` per engine built."""
    with open(marker, "a") as f:
        f.write(f"{os.getpid()}\n")
    return ScriptedEngine(prefill_s=0.0, decode_s=decode_s)


def ask(client: JudgeClient, ids: list[str]) -> tuple[int, list[str]]:
    """A replica's side: its own event loop, several judge requests at once."""

    async def one(rid: str) -> Completion:
        return await client.generate(Request(id=rid, text="judge this", metadata={"answer": rid}))

    async def all_() -> list[Completion]:
        return await asyncio.gather(*(one(r) for r in ids))

    return os.getpid(), [c.text for c in asyncio.run(all_())]


@pytest.mark.timeout(120)
def test_two_callers_in_two_ray_tasks_share_one_judge_engine(ray_session, tmp_path: Path) -> None:
    ray = ray_session
    marker = tmp_path / "engines_built"
    factory = functools.partial(scripted_judge, str(marker), 0.05)
    client, shutdown = start_judge_service(CFG, factory=factory)
    try:
        task = ray.remote(num_cpus=1)(ask)
        first, second = ["r1-a", "r1-b", "r1-c"], ["r2-a", "r2-b"]
        (pid1, texts1), (pid2, texts2) = ray.get(
            [task.remote(client, first), task.remote(client, second)]
        )
        assert (texts1, texts2) == (first, second)  # each caller got its own answers
        assert pid1 != pid2 and os.getpid() not in (pid1, pid2)
        served = ray.get(client.actor.served.remote())
        assert sorted(served) == sorted(first + second)
        assert len(marker.read_text().splitlines()) == 1  # one engine for both callers
    finally:
        shutdown()


@pytest.mark.timeout(120)
def test_the_callers_guard_times_out_a_slow_shared_judge_and_retries(
    ray_session, tmp_path: Path
) -> None:
    ray = ray_session
    factory = functools.partial(scripted_judge, str(tmp_path / "built"), 5.0)
    client, shutdown = start_judge_service(CFG, factory=factory)
    guard = JudgeGuard(timeout_s=0.3, retries=1, backoff_s=0.0, max_failures=1)
    try:
        request = Request(id="slow", text="judge this")
        with pytest.raises(TimeoutError):
            asyncio.run(guard.call(lambda: client.generate(request)))
        assert guard.calls == 2 and guard.down  # two attempts, then the breaker trips
        assert ray.get(client.actor.served.remote()) == ["slow", "slow"]
        # both attempts were cancelled in the actor, not left to run their 5 s
        deadline = time.monotonic() + 2.0
        while ray.get(client.actor.in_flight.remote()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ray.get(client.actor.in_flight.remote()) == 0
    finally:
        shutdown()


def test_a_judge_engine_that_cannot_start_is_an_error_at_start(ray_session) -> None:
    with pytest.raises(ConfigError, match=r"judge engine \(openai, model judge\) failed"):
        start_judge_service(CFG, factory=functools.partial(_broken))


def _broken() -> Engine:
    raise RuntimeError("no such checkpoint")


def test_a_run_without_a_judge_has_no_judge_service() -> None:
    with pytest.raises(ConfigError, match="no judge configured"):
        start_judge_service(RunConfig(model="policy"))
