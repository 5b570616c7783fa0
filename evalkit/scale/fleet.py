"""Replica actors kept up across successive runs of one command (``evalkit watch
--replicas N``): started once on the first run's plan, given each later checkpoint's
weights in place, and handed each run in turn through :func:`evalkit.scale.driver.run_plans`,
whose driver hands out that run's work. The driver is one run's work queue; the fleet is
the actors that outlive it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from evalkit.run.config import RunConfig
from evalkit.run.plan import RunPlan
from evalkit.scale.cluster import (
    ReplicaHandle,
    Session,
    placement_for,
    ray_session,
    require_ray,
    start_replicas,
    stop_replicas,
)
from evalkit.scale.driver import DEPTH, Driver, shared_judge

if TYPE_CHECKING:
    from evalkit.startup import StartupTimes

log = logging.getLogger(__name__)

STOP_WAIT_S = 5.0
"""How long closing a fleet waits for the run in progress to stop taking records."""


class Fleet:
    """Replica actors kept up across successive runs, each handed to them in turn
    (``evalkit watch --replicas N``: one run per checkpoint, its weights loaded into every
    replica's engine in place, so the engines start once). The replicas start on the
    first plan (its engine, model, judge and frame cache); every later plan must want the
    same engine, its weights aside. A replica Ray restarts comes back as it was built (the
    first plan, the first weights): it is brought to the current weights and runs before it
    gets work again (:meth:`restore`), and a lease names the hand-out of runs it is for, so
    a replica holding other runs refuses it rather than answer from them."""

    def __init__(self, stack: contextlib.ExitStack, session: Session) -> None:
        self._stack = stack
        self.session = session
        self.handles: list[ReplicaHandle] = []
        self.held: list[Any] = []
        """The runs the replicas hold now (:data:`evalkit.scale.replica.Run` each)."""
        self.generation = 0
        self.weights: str | None = None
        """The checkpoint folder loaded in place last (None: the first plan's model)."""
        self.restarts: dict[str, int] = {}
        """Restarts each replica has had (Ray's ``max_restarts`` counts across runs)."""
        self.startup: StartupTimes | None = None
        self._driver: Driver | None = None
        self._lock = threading.Lock()

    @classmethod
    def open(cls, cfg: RunConfig) -> Fleet:
        """Connect to Ray: the cluster at ``ray_address``, else a local instance. On the
        thread that outlives the fleet (the command's main thread): Ray starts a local
        instance's processes with a parent-death signal, which Linux sends when the
        *thread* that started them ends."""
        require_ray()
        stack = contextlib.ExitStack()
        try:
            timeout = cfg.ray_connect_timeout_s
            session = stack.enter_context(ray_session(cfg.ray_address, connect_timeout_s=timeout))
        except BaseException:
            stack.close()
            raise
        return cls(stack, session)

    def start(self, plan: RunPlan, path: str) -> None:
        """The shared judge and ``replicas`` actors on ``plan``'s engine, each set up (any
        thread: this waits for the engines); ``path`` is the run directory ``plan``'s
        records will go to."""
        from evalkit.scale.replica import Replica
        from evalkit.startup import StartupTimes

        cfg, ray = plan.config, self.session.ray
        tp = int(plan.engine_options.get("tensor_parallel_size") or 1)
        placement = placement_for(ray, plan.engine, tp, cfg.cpus_per_replica)
        judge = self._stack.enter_context(shared_judge(cfg, ray))
        held = [(plan, path)]
        t0 = time.perf_counter()
        self.handles = start_replicas(
            ray, Replica, (ray.put(held), judge), cfg.replicas, placement, DEPTH + 2,
            cfg.replica_restarts,
        )  # fmt: skip
        self._stack.callback(stop_replicas, ray, self.handles)
        self.held = held
        self.startup = StartupTimes(
            ray_s=self.session.started_s,
            engines_s=time.perf_counter() - t0,
            replicas=cfg.replicas,
            ray_address=cfg.ray_address,
        )

    def live(self) -> list[ReplicaHandle]:
        """The replicas not given up."""
        return [h for h in self.handles if h.alive]

    def load_weights_now(self, path: str) -> None:
        """Load checkpoint folder ``path`` into every live replica's engine in place; any
        failure is raised (the engines may then hold mixed weights: start a new fleet)."""
        ray = self.session.ray
        ray.get([h.actor.load_weights.remote(path) for h in self.live()])
        self.weights = path

    async def load_weights(self, path: str) -> None:
        """:meth:`load_weights_now` off the event loop (the ``ReloadsWeights`` protocol)."""
        from evalkit.engines.lifecycle import in_daemon_thread

        await in_daemon_thread(self.load_weights_now, path)

    def adopt(self, held: list[Any]) -> list[ReplicaHandle]:
        """Hand ``held`` to every live replica (a new hand-out); the replicas that took it.
        One that died meanwhile is given up; none left is an error."""
        from ray.exceptions import RayActorError

        ray = self.session.ray
        self.generation += 1
        asked = [(h, h.actor.adopt.remote(held, self.generation)) for h in self.live()]
        for h, ref in asked:
            try:
                h.pid = ray.get(ref)
            except RayActorError as exc:
                log.warning("replica %s was lost between runs (%s)", h.name, type(exc).__name__)
                h.alive = False
        self.held = held
        if not self.live():
            raise RuntimeError("every replica died; start the watch again to go on")
        return self.handles

    def restore(self, handle: ReplicaHandle) -> None:
        """Bring ``handle``, restarted by Ray, to the current weights and runs."""
        ray = self.session.ray
        if self.weights is not None:
            ray.get(handle.actor.load_weights.remote(self.weights))
        ray.get(handle.actor.adopt.remote(self.held, self.generation))

    def take_startup(self) -> StartupTimes | None:
        """The fleet's start-up times, for the first run that uses it only."""
        startup, self.startup = self.startup, None
        return startup

    def attach(self, driver: Driver) -> None:
        """``driver`` runs the current hand-out on this fleet."""
        driver.generation = self.generation
        driver.restore = self.restore
        driver.stopping = threading.Event()
        for name, n in self.restarts.items():
            driver.state[name].restarts = n
        with self._lock:
            self._driver = driver

    def detach(self, driver: Driver) -> None:
        """``driver`` is done: its replicas' restarts are remembered."""
        self.restarts = {name: st.restarts for name, st in driver.state.items()}
        with self._lock:
            self._driver = None

    def close_now(self) -> None:
        """Stop a run in progress (its records so far are kept), the replicas, the judge
        and the Ray session."""
        with self._lock:
            driver = self._driver
        if driver is not None and driver.stopping is not None:
            driver.stopping.set()
            deadline = time.monotonic() + STOP_WAIT_S
            while self._driver is not None and time.monotonic() < deadline:
                time.sleep(0.05)  # the driver looks at ``stopping`` every turn (<= 1 s)
        self._stack.close()

    async def close(self) -> None:
        """:meth:`close_now` off the event loop."""
        from evalkit.engines.lifecycle import in_daemon_thread

        await in_daemon_thread(self.close_now)
