"""The LLM judge as one shared service for all replicas of a run.

Without it every replica would load its own copy of the judge model. Here the judge engine
runs once, inside a Ray actor (:class:`JudgeActor`), and each replica gets a
:class:`JudgeClient`: a small picklable object with the Engine protocol (``generate``,
``close``) that forwards each request to the actor. The judge's calling policy (timeouts,
retries, the circuit breaker: ``evalkit.scoring.judge_guard``) stays on the replica side,
around the client, exactly as around a local engine; a request the guard gives up on is
cancelled in the actor too. Ray does the rest: the actor's placement, its restart after a
crash (once), and moving requests and completions between processes.

``start_judge_service(cfg)`` must be called with Ray connected
(``evalkit.scale.cluster.ray_session``); it returns ``(client, shutdown)``. Pass the
client to a replica as its judge engine
(``judge_for(cfg, client, ...)`` then leaves it open: the service owns the engine) and
call ``shutdown()`` once, after the last replica is done.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evalkit.engines.base import Completion, Engine, Request
from evalkit.errors import ConfigError, TransientError
from evalkit.run.config import JudgeConfig, RunConfig
from evalkit.scale.cluster import require_ray

EngineFactory = Callable[[], Engine]
"""Builds the judge engine inside the actor (picklable: module-level or a partial)."""


class JudgeActor:
    """Holds the one judge engine; its async methods run on the actor's event loop, so
    requests from every replica are in flight at once (the engine batches them)."""

    def __init__(self, factory: EngineFactory) -> None:
        self._engine = factory()
        self._served: list[str] = []
        self._in_flight = 0

    async def generate(self, request: Request) -> Completion:
        """One judge request, from any replica."""
        self._served.append(request.id)
        self._in_flight += 1
        try:
            return await self._engine.generate(request)
        finally:
            self._in_flight -= 1

    def served(self) -> list[str]:
        """Ids of the requests this actor was given, in order (for tests and reports)."""
        return list(self._served)

    def in_flight(self) -> int:
        """Requests inside the engine now (a cancelled one leaves at once)."""
        return self._in_flight

    async def close(self) -> None:
        """Release the engine."""
        from evalkit.engines.lifecycle import close_engine

        await close_engine(self._engine)


@dataclass
class JudgeClient:
    """The Engine a replica's judge calls: forwards to the shared :class:`JudgeActor`."""

    actor: Any
    """The actor's handle (picklable: the client travels to replicas with it)."""

    async def generate(self, request: Request) -> Completion:
        """Ask the shared judge; errors arrive as the engine raised them."""
        ray = require_ray()
        ref = self.actor.generate.remote(request)
        try:
            completion: Completion = await ref
        except asyncio.CancelledError:  # the guard's timeout: stop the work in the actor too
            ray.cancel(ref)
            raise
        except ray.exceptions.RayTaskError as exc:
            # the engine's own error, so the guard can tell transient from fatal
            cause = exc.cause if isinstance(exc.cause, Exception) else exc
            raise cause from None
        except ray.exceptions.RayActorError as exc:
            raise TransientError(f"the shared judge service is unavailable: {exc}") from None
        return completion

    async def close(self) -> None:
        """Nothing to release here: the service's ``shutdown`` closes the one engine."""


def engine_factory(jc: JudgeConfig) -> EngineFactory:
    """What builds the configured judge engine, as a replica's ``judge_for`` would."""
    from evalkit.run.components import build_sized
    from evalkit.run.config import judge_engine_options

    options = judge_engine_options(jc)
    return functools.partial(build_sized, jc.engine, jc.model, options, "--judge-opt")


def start_judge_service(
    cfg: RunConfig,
    *,
    factory: EngineFactory | None = None,
    num_cpus: float = 0,
    num_gpus: float = 0,
    max_concurrency: int = 1000,
    wait: bool = True,
) -> tuple[JudgeClient, Callable[[], None]]:
    """Start the run's judge engine once, as a Ray actor; return a client for the
    replicas and a ``shutdown()`` that closes the engine and ends the actor.

    ``num_gpus``: what the judge engine needs (e.g. 1 for a vLLM judge on a GPU; 0 for a
    served endpoint or a CPU engine). ``factory`` replaces the configured engine (tests).
    With ``wait`` it returns once the engine is built, and a failure to build it is raised
    here rather than on the first judged sample.
    """
    if cfg.judge is None:
        raise ConfigError("start_judge_service: the run has no judge configured (judge:)")
    ray = require_ray()
    if not ray.is_initialized():
        raise ConfigError(
            "start_judge_service: connect to Ray first (evalkit.scale.cluster.ray_session)"
        )
    actor_cls = ray.remote(JudgeActor).options(
        num_cpus=num_cpus,
        num_gpus=num_gpus,
        max_concurrency=max_concurrency,
        max_restarts=1,  # a crashed engine is rebuilt once; the guard retries meanwhile
        max_task_retries=0,  # retries are the guard's: it knows the judge's budget
    )
    actor = actor_cls.remote(factory or engine_factory(cfg.judge))
    if wait:
        _wait_ready(ray, actor, cfg.judge)

    def shutdown() -> None:
        with contextlib.suppress(ray.exceptions.RayError):  # already dead: nothing to close
            ray.get(actor.close.remote(), timeout=60)
        ray.kill(actor)

    return JudgeClient(actor), shutdown


def _wait_ready(ray: Any, actor: Any, jc: JudgeConfig) -> None:
    try:
        ray.get(actor.served.remote())
    except ray.exceptions.RayError as exc:
        ray.kill(actor)
        raise ConfigError(
            f"the judge engine ({jc.engine}, model {jc.model}) failed to start in the shared "
            f"judge service: {exc}"
        ) from None
