"""Ray plumbing of a replicated run: the Ray session, placement groups, replica actors.

Ray does the scheduling, placement and object transfer; this module only says what to
ask of it. Ray is imported here, lazily: ``evalkit`` imports without it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from evalkit.errors import ConfigError

PLACEMENT_TIMEOUT_S = 120.0
"""How long the replicas' placement groups may wait for resources before the run stops."""


def require_ray() -> Any:
    """The ``ray`` module, or a ConfigError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "this needs Ray, which is not installed: pip install 'evalkit[ray]'"
        ) from None
    return ray


@dataclass
class Session:
    """A connection to Ray; ``started_s`` = seconds ``ray.init`` took (None: reused)."""

    ray: Any
    started_s: float | None = None


@contextlib.contextmanager
def ray_session(address: str | None = None, num_cpus: int | None = None) -> Iterator[Session]:
    """Connect to Ray for the length of the block.

    Already connected (a caller's, a test's instance): used and left as it is. With an
    address: connected, and only disconnected at the end (the cluster stays up). Neither:
    a local instance is started, then shut down.
    """
    ray = require_ray()
    if ray.is_initialized():
        yield Session(ray)
        return
    t0 = time.perf_counter()
    if address:
        try:
            ray.init(address=address, include_dashboard=False)
        except ConnectionError as exc:
            raise ConfigError(
                f"--ray-address {address}: no Ray cluster answers there ({exc}); start one "
                "with `ray start --head` or leave the flag out for a local instance"
            ) from None
    else:
        # "local": a new instance of our own, never another user's cluster found on the box
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False)
    try:
        yield Session(ray, time.perf_counter() - t0)
    finally:
        ray.shutdown()


@dataclass
class ReplicaHandle:
    """One replica actor with its placement group."""

    name: str
    actor: Any
    group: Any
    pid: int | None = None
    alive: bool = True


@dataclass
class Placement:
    """What one replica reserves: a GPU bundle per tensor-parallel group, else CPUs."""

    bundle: dict[str, float]
    actor_options: dict[str, Any] = field(default_factory=dict)


def placement_for(ray: Any, engine: str, tp: int, cpus: int) -> Placement:
    """The bundle and actor resources of a replica on this cluster."""
    has_gpu = ray.cluster_resources().get("GPU", 0) > 0 and engine != "openai"
    if has_gpu:
        return Placement({"GPU": float(tp)}, {"num_gpus": tp, "num_cpus": 0})
    return Placement({"CPU": float(cpus)}, {"num_cpus": cpus})


def start_replicas(
    ray: Any,
    actor_class: type,
    args: tuple[Any, ...],
    n: int,
    placement: Placement,
    concurrency: int,
    restarts: int = 0,
) -> list[ReplicaHandle]:
    """``n`` actors of ``actor_class(*args, name)``, one per placement group, set up;
    Ray restarts a crashed one up to ``restarts`` times (its calls then in flight fail)."""
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    groups = [placement_group([placement.bundle], strategy="PACK") for _ in range(n)]
    ready, _ = ray.wait([g.ready() for g in groups], num_returns=n, timeout=PLACEMENT_TIMEOUT_S)
    if len(ready) < n:
        for g in groups:
            ray.util.remove_placement_group(g)
        raise ConfigError(
            f"{n} replicas need {n} x {placement.bundle}, but the Ray cluster has "
            f"{ray.available_resources()} free; lower --replicas, --cpus-per-replica or "
            "--tensor-parallel-size, or add nodes"
        )
    remote = ray.remote(actor_class)
    handles = []
    for i, group in enumerate(groups):
        name = f"r{i}"
        actor = remote.options(
            max_concurrency=concurrency,
            max_restarts=restarts,
            max_task_retries=0,  # a failed batch is re-leased by the driver, to any replica
            scheduling_strategy=PlacementGroupSchedulingStrategy(group),
            **placement.actor_options,
        ).remote(*args, name)
        handles.append(ReplicaHandle(name, actor, group))
    try:
        ray.get([h.actor.setup.remote() for h in handles])
        for h, pid in zip(handles, ray.get([h.actor.pid.remote() for h in handles]), strict=True):
            h.pid = pid
    except BaseException:
        stop_replicas(ray, handles, graceful=False)
        raise
    return handles


def stop_replicas(ray: Any, handles: list[ReplicaHandle], *, graceful: bool = True) -> None:
    """Close the live replicas' engines, end the actors, free their groups. Not
    ``graceful`` (the run failed or was interrupted): engines get a short while to stop,
    so their engine processes do not outlive the actors."""
    live = [h for h in handles if h.alive]
    with contextlib.suppress(Exception):  # a replica that dies while closing is gone anyway
        ray.get([h.actor.close.remote() for h in live], timeout=120 if graceful else 20)
    for h in handles:
        with contextlib.suppress(Exception):
            ray.kill(h.actor, no_restart=True)
        with contextlib.suppress(Exception):
            ray.util.remove_placement_group(h.group)
        h.alive = False
