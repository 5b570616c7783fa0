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

from evalkit.engines import reads_local_checkpoint
from evalkit.errors import ConfigError, EngineStartError, EvalkitError

CONNECT_TIMEOUT_S = 30.0
"""Default longest wait for a cluster at ``--ray-address`` (``ray_connect_timeout_s``)."""

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
def ray_session(
    address: str | None = None,
    num_cpus: int | None = None,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
) -> Iterator[Session]:
    """Connect to Ray for the length of the block.

    Already connected (a caller's, a test's instance): used and left as it is. With an
    address: connected (ConfigError within ``connect_timeout_s`` when nothing answers
    there, or the cluster refuses us), and only disconnected at the end (the cluster stays
    up). Neither: a local instance is started, then shut down.
    """
    ray = require_ray()
    if ray.is_initialized():
        yield Session(ray)
        return
    t0 = time.perf_counter()
    with _own_sigterm():
        if address:
            connect(ray, address, connect_timeout_s)
        else:
            # "local": a new instance of our own, never another user's cluster on the box
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=False)
    try:
        yield Session(ray, time.perf_counter() - t0)
    finally:
        ray.shutdown()


@contextlib.contextmanager
def _own_sigterm() -> Iterator[None]:
    """``ray.init`` on the main thread installs a SIGTERM handler of its own (it exits
    with status 15): the command's own (``evalkit.engines.lifecycle.Termination``: one
    line, engines closed, 143) is put back."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


_TODO = (
    "start one there with `ray start --head --port PORT` and pass the address it prints, "
    "or leave --ray-address out for a local instance"
)


def connect(ray: Any, address: str, timeout_s: float) -> None:
    """``ray.init(address)``, but first a bounded check that something Ray-like answers
    there (ray.init itself retries a dead address for minutes); ConfigError naming the
    address, what answered, and what to do."""
    host_port = _host_port(address)
    if host_port is not None:
        _probe(address, *host_port, timeout_s)
    try:
        ray.init(address=address, include_dashboard=False)
    except Exception as exc:  # Ray raises ConnectionError, RuntimeError, AuthenticationError
        if _is_auth_error(exc):
            raise ConfigError(
                f"--ray-address {address}: the cluster answered but refused us: "
                f"authentication failed ({_first_line(exc)}); {_AUTH_TODO}"
            ) from None
        if isinstance(exc, ConnectionError):
            raise ConfigError(
                f"--ray-address {address}: something answers there but no Ray cluster let "
                f"us in ({_first_line(exc)}); check that it is the address `ray start "
                f"--head` printed (the GCS port, 6379 by default), or leave --ray-address out "
                "for a local instance"
            ) from None
        raise


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of ``HOST:PORT`` or ``ray://HOST:PORT``; None for ``auto`` & co."""
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]") or "127.0.0.1", int(port)


def _probe(address: str, host: str, port: int, timeout_s: float) -> None:
    """Raise ConfigError unless a TCP server (and, for a GCS address, a gRPC server)
    answers at host:port within ``timeout_s``."""
    import socket

    where = f"--ray-address {address}"
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except socket.gaierror:
        raise ConfigError(
            f"{where}: no such host {host!r}; check the address, or {_TODO}"
        ) from None
    except ConnectionRefusedError:
        raise ConfigError(
            f"{where}: nothing listens on {host}:{port} (connection refused); {_TODO}"
        ) from None
    except TimeoutError:
        raise ConfigError(
            f"{where}: no answer from {host}:{port} within {timeout_s:g} s (host down, or a "
            f"firewall drops the packets; --ray-connect-timeout waits longer); {_TODO}"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{where}: cannot reach {host}:{port} ({exc}); {_TODO}") from None
    if not address.startswith("ray://"):
        _ask_gcs(where, host, port, timeout_s)


_GCS_CALL = "/ray.rpc.NodeInfoGcsService/GetClusterId"
"""A GCS method any Ray cluster answers (an empty request is a valid one)."""

_AUTH_TODO = (
    "give this process the cluster's token (RAY_AUTH_TOKEN, or the file ~/.ray/auth_token "
    "copied from the head node; `ray get-auth-token` prints it there)"
)


def _ask_gcs(where: str, host: str, port: int, timeout_s: float) -> None:
    """One GCS call, with the token ray.init would send: ConfigError when nothing speaks
    gRPC there, when it is not a Ray GCS, or when the cluster refuses the token (ray.init
    would retry that for about 20 s, then call it a connection failure)."""
    try:
        import grpc
    except ImportError:  # Ray brings grpcio; without it, leave the checks to ray.init
        return
    channel = grpc.insecure_channel(f"{host}:{port}")
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout_s)
        call = channel.unary_unary(_GCS_CALL)
        call(b"", timeout=timeout_s, metadata=_auth_metadata())
    except grpc.FutureTimeoutError:
        raise ConfigError(
            f"{where}: {host}:{port} accepts connections but speaks no gRPC within "
            f"{timeout_s:g} s, so it is not a Ray cluster's GCS (6379 by default; not the "
            "dashboard's 8265); give the address `ray start --head` printed"
        ) from None
    except grpc.RpcError as exc:
        code = exc.code() if hasattr(exc, "code") else None
        if code == grpc.StatusCode.UNAUTHENTICATED:
            raise ConfigError(
                f"{where}: the Ray cluster answered but refused us: authentication failed "
                f"({exc.details() if hasattr(exc, 'details') else exc}); {_AUTH_TODO}"
            ) from None
        if code == grpc.StatusCode.UNIMPLEMENTED:
            raise ConfigError(
                f"{where}: a gRPC server answers at {host}:{port}, but not a Ray GCS; give "
                "the address `ray start --head` printed (6379 by default)"
            ) from None
        # anything else: ray.init has the last word
    finally:
        channel.close()


def _auth_metadata() -> tuple[tuple[str, str], ...]:
    """The authentication header ray.init would send (none when this Ray has no token)."""
    try:
        from ray._private.authentication.grpc_authentication_client_interceptor import (
            _get_authentication_metadata_tuple,
        )

        return tuple(_get_authentication_metadata_tuple())
    except Exception:  # another Ray version, or no token: send none, as ray.init would
        return ()


def _is_auth_error(exc: BaseException) -> bool:
    if type(exc).__name__ == "AuthenticationError":
        return True
    text = str(exc).lower()
    return any(w in text for w in ("unauthenticated", "authentication", "auth token"))


def _first_line(exc: BaseException) -> str:
    """The first sentence of ``exc`` (Ray's messages run to a paragraph)."""
    line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return line.split(". ")[0].rstrip(".")[:200]


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
    """The bundle and actor resources of a replica on this cluster: GPUs when it has them
    and the replica's engine runs its model itself (a served model needs none here)."""
    has_gpu = ray.cluster_resources().get("GPU", 0) > 0 and reads_local_checkpoint(engine)
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
        setups = [h.actor.setup.remote() for h in handles]
        for h, setup in zip(handles, setups, strict=True):
            _set_up(ray, h.name, setup)
        for h, pid in zip(handles, ray.get([h.actor.pid.remote() for h in handles]), strict=True):
            h.pid = pid
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM: the actors end now (an engine still
        # starting blocks its actor's loop, so a close would wait for the start to finish)
        stop_replicas(ray, handles, graceful=False, close_s=0.0)
        raise
    except BaseException:
        stop_replicas(ray, handles, graceful=False)
        raise
    return handles


def _set_up(ray: Any, name: str, setup: Any) -> None:
    """Wait for replica ``name``'s setup; an engine that did not start there is the
    EngineStartError it raised (one line, not Ray's remote traceback)."""
    try:
        ray.get(setup)
    except ray.exceptions.RayTaskError as exc:
        cause = exc.cause
        if isinstance(cause, EvalkitError):  # Ray's text holds the replica's traceback
            raise EngineStartError(f"replica {name}: {cause}") from exc
        raise
    except ray.exceptions.RayActorError as exc:
        raise EngineStartError(
            f"replica {name} died while its engine started ({_first_line(exc)}); its "
            "output is in the run's output.log"
        ) from None


def stop_replicas(
    ray: Any, handles: list[ReplicaHandle], *, graceful: bool = True, close_s: float | None = None
) -> None:
    """Close the live replicas' engines, end the actors, free their groups. Not
    ``graceful`` (the run failed or was interrupted): engines get a short while to stop,
    so their engine processes do not outlive the actors; ``close_s`` sets that while (0:
    the actors are ended at once, Ray ending their engine processes with them)."""
    live = [h for h in handles if h.alive]
    wait_s = close_s if close_s is not None else 120 if graceful else 20
    with contextlib.suppress(Exception):  # a replica that dies while closing is gone anyway
        if wait_s > 0:
            ray.get([h.actor.close.remote() for h in live], timeout=wait_s)
    for h in handles:
        with contextlib.suppress(Exception):
            ray.kill(h.actor, no_restart=True)
        with contextlib.suppress(Exception):
            ray.util.remove_placement_group(h.group)
        h.alive = False
