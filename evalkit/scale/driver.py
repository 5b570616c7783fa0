"""The driver of a replicated run: one work queue, one run directory, N replica actors.

The driver plans the run and opens its directory exactly as an in-process run does
(``plan_run``, ``open_run``: same fingerprint, stores, resume by sample id), sends the
plan to the replicas once, queues the samples without a record, and leases small
batches (longest expected cost first, see :mod:`evalkit.scale.queue`) to replica actors
as they finish, keeping ``depth`` batches in flight per replica. A sweep hands it
several plans (its settings: same engine, other request settings), each with its own
run directory, through the same queue (:func:`run_plans`); the queue's keys name the
run's benchmark as a lane (``evalkit.scale.replica.lanes``). Records
come back as the batch's result; the queue accepts each sample once and the driver
appends it to its lane's store (fsync'd). A replica whose call fails with
``RayActorError`` (crash, OOM kill, node lost) is presumed dead: its leases end, its
samples go to the others, and anything it still returns is discarded. The /dev/shm
entries its engine held (each replica reports them once its engine is up) are unlinked
once no process maps them: Ray kills a dead actor's engine processes, not their shared
memory (the engine's watchdog is a best effort beside it, see ``release_unmapped_shm``).
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from evalkit.engines import engine_spec
from evalkit.pipeline import PipelineConfig, PipelineStats
from evalkit.records import SampleRecord
from evalkit.run.components import make_cache
from evalkit.run.config import RunConfig
from evalkit.run.execute import RunResult
from evalkit.run.open import OpenRun, open_run, run_path
from evalkit.run.plan import RunPlan, plan_run
from evalkit.scale.cluster import (
    ReplicaHandle,
    Session,
    placement_for,
    ray_session,
    require_ray,
    start_replicas,
    stop_replicas,
)
from evalkit.scale.cost import CostModel
from evalkit.scale.queue import Key, Lease, WorkItem, WorkQueue
from evalkit.store import Store

if TYPE_CHECKING:
    from evalkit.scale.judge_service import JudgeClient
    from evalkit.startup import StartupTimes

log = logging.getLogger(__name__)

DEPTH = 2
"""Batches in flight per replica: one runs while the next is already there."""


class HeldReplicas(Protocol):
    """Replicas already up that a run is handed to (``evalkit.scale.fleet.Fleet``: a watch's,
    kept across its checkpoints): what the run asks of them."""

    session: Session

    def adopt(self, held: list[Any]) -> list[ReplicaHandle]:
        """The live replicas, given the runs they now hold."""
        ...

    def take_startup(self) -> StartupTimes | None:
        """Their start-up times, for the first run that uses them only."""
        ...

    def attach(self, driver: Driver) -> None:
        """``driver`` runs the current hand-out on them."""
        ...

    def detach(self, driver: Driver) -> None:
        """``driver`` is done with them."""
        ...


@dataclass
class ReplicaState:
    """What one replica has done, for the progress display."""

    name: str
    pid: int | None = None
    alive: bool = True
    leased: int = 0
    """Samples it holds now."""
    done: int = 0
    failed: int = 0
    discarded: int = 0
    """Records refused (a stale lease: the replica was presumed dead)."""
    output_tokens: int = 0
    restarts: int = 0
    """Crashes Ray restarted it from (``replica_restarts``)."""


@dataclass
class Snapshot:
    """The run's state, handed to the progress callback after every batch."""

    started: float
    total: int
    accepted: int
    pending: int
    replicas: dict[str, ReplicaState] = field(default_factory=dict)


Progress = Callable[[Snapshot], None]


def run_replicas(
    cfg: RunConfig,
    on_progress: Progress | None = None,
    *,
    batch_size: int | None = None,
    depth: int = DEPTH,
    on_open: Callable[[Path], None] | None = None,
) -> RunResult:
    """Run ``cfg`` on ``cfg.replicas`` Ray actors into one run directory (resumable);
    ``on_open(path)`` is called once the run directory exists (before Ray starts a local
    instance and before any engine: ``evalkit run`` sends their output to its log file)."""
    from evalkit.run.preflight import check_run

    require_ray()
    check_run(cfg, engine_given=False)
    plan = plan_run(cfg)
    (result,) = run_plans([plan], on_progress, batch_size=batch_size, depth=depth, on_open=on_open)
    return result


def run_plans(
    plans: Sequence[RunPlan],
    on_progress: Progress | None = None,
    *,
    batch_size: int | None = None,
    depth: int = DEPTH,
    on_open: Callable[[Path], None] | None = None,
    before_work: Callable[[], object] | None = None,
    fleet: HeldReplicas | None = None,
) -> list[RunResult]:
    """Run ``plans``, each into its own run directory, on one set of replicas (the first
    plan's ``replicas``, engine and model: a sweep's settings differ in request settings
    only) through one work queue; a RunResult per plan. ``before_work()`` is called once
    the replicas' engines are up, before the first lease (a sweep finishes decoding its
    videos there). ``fleet``: replicas already up (:class:`HeldReplicas`), handed these plans,
    and left up at the end; default: replicas started for these plans and stopped."""
    from evalkit.run.preflight import media_preflight

    require_ray()
    cfg = plans[0].config
    # before Ray, the run directories, any engine
    missing = [media_preflight(p.config, p.benches) for p in plans]
    with contextlib.ExitStack() as stack:
        session = fleet.session if fleet is not None else None
        if session is None and cfg.ray_address:  # the cluster answers before any run dir
            timeout = cfg.ray_connect_timeout_s
            session = stack.enter_context(ray_session(cfg.ray_address, connect_timeout_s=timeout))
        runs = [
            stack.enter_context(open_run(p, run_path(p.config), missing=m, on_open=on_open))
            for p, m in zip(plans, missing, strict=True)
        ]
        return _Run(runs, session, before_work, fleet).execute(on_progress, batch_size, depth)


@dataclass
class _Lane:
    """One benchmark of one run as the queue sees it: where its records go."""

    run: OpenRun
    bench: str
    store: Store
    stats: PipelineStats


@dataclass
class _Run:
    """Replicated runs once the cluster answered and their directories are open."""

    runs: list[OpenRun]
    session: Session | None
    """The connection to the cluster at ``ray_address`` (None: a local instance, started
    once there is work to do)."""
    before_work: Callable[[], object] | None = None
    fleet: HeldReplicas | None = None
    """Replicas already up, to hand these runs (None: started here and stopped)."""

    def execute(
        self, on_progress: Progress | None, batch_size: int | None, depth: int
    ) -> list[RunResult]:
        """Queue the samples without a record, drive the replicas."""
        from evalkit.scale.replica import lanes

        named = lanes([(r.plan, str(r.path)) for r in self.runs])
        by_lane: dict[str, _Lane] = {}
        items: list[WorkItem] = []
        costs = CostModel(make_cache(self.runs[0].plan.config))  # durations looked up once
        for lane, (i, bench) in named.items():
            run = self.runs[i]
            store = run.store(bench)
            todo, stats = work_items(run.plan, bench, lane, store, costs)
            stats.media_missing = run.media_missing.get(bench, 0)
            by_lane[lane] = _Lane(run, bench, store, stats)
            items += todo
        if items:
            cfg = self.runs[0].plan.config
            size = batch_size or default_batch(len(items), cfg.replicas, depth, cfg.pipeline)
            with contextlib.ExitStack() as stack:
                if self.session is None:
                    self.session = stack.enter_context(ray_session())
                self._drive(stack, WorkQueue(items, size), by_lane, on_progress, depth)
        return [self._result(run, by_lane, not items) for run in self.runs]

    @contextlib.contextmanager
    def _warming(self) -> Iterator[None]:
        """The pending samples' videos decoded into the frame cache here while the
        replicas' engines start, as an in-process run does while its engine starts
        (``evalkit.run.warmup``: nothing more is submitted once they are up; a video that
        fails is the pipeline's to report). A sweep has decoded every video already
        (``before_work``). The replicas find hits, or wait on the entry's lock and then
        hit; where their node does not share this cache they decode as before."""
        from evalkit.run.warmup import warming, warmup_jobs

        cfg = self.runs[0].plan.config
        runs = [] if self.before_work is not None else [(r.plan, r.dir) for r in self.runs]
        jobs = warmup_jobs(runs)
        with warming(make_cache(cfg), jobs, cfg.cache_workers):
            yield

    @staticmethod
    def _result(run: OpenRun, by_lane: dict[str, _Lane], idle: bool) -> RunResult:
        stats = {ln.bench: ln.stats for ln in by_lane.values() if ln.run is run}
        nothing = idle and not any(run.media_missing.values())
        return RunResult(path=run.path, stats=stats, nothing_to_run=nothing)

    def _drive(
        self,
        stack: contextlib.ExitStack,
        queue: WorkQueue,
        by_lane: dict[str, _Lane],
        on_progress: Progress | None,
        depth: int,
    ) -> None:
        from evalkit.scale.replica import Replica, merge_frame_counts
        from evalkit.startup import StartupTimes

        assert self.session is not None
        first, ray = self.runs[0].plan, self.session.ray
        cfg = first.config
        # the plans cross to the replicas once (the object store), never re-resolved there
        held = [(r.plan, str(r.path)) for r in self.runs]
        fleet = self.fleet
        if fleet is None:
            tp = int(first.engine_options.get("tensor_parallel_size") or 1)
            placement = placement_for(ray, first.engine, tp, cfg.cpus_per_replica)
            judge = stack.enter_context(shared_judge(cfg, ray))
            args = (ray.put(held), judge)
            t0 = time.perf_counter()
            with self._warming():
                handles = start_replicas(
                    ray, Replica, args, cfg.replicas, placement, depth + 2, cfg.replica_restarts
                )
            startup: StartupTimes | None = StartupTimes(
                ray_s=self.session.started_s,
                engines_s=time.perf_counter() - t0,
                replicas=cfg.replicas,
                ray_address=cfg.ray_address,
            )
        else:
            handles, startup = fleet.adopt(held), fleet.take_startup()
        for run in self.runs:
            if startup is not None:
                startup.write(run.dir)
        graceful = False
        try:
            if self.before_work is not None:
                self.before_work()
            stores = {lane: ln.store for lane, ln in by_lane.items()}
            stats = {lane: ln.stats for lane, ln in by_lane.items()}
            driver = Driver(ray, queue, handles, stores, stats, on_progress, depth)
            driver.max_restarts = cfg.replica_restarts
            if fleet is not None:
                fleet.attach(driver)
            try:
                driver.run()
            finally:
                if fleet is not None:
                    fleet.detach(driver)
            graceful = True
            merge_frame_counts(held, frame_counts(ray, handles))
        finally:
            if fleet is None:
                stop_replicas(ray, handles, graceful=graceful)


def frame_counts(ray: Any, handles: Sequence[ReplicaHandle]) -> list[Any]:
    """The frame counts of every replica still alive at the end; one that died after its
    last lease (its records are durable) gives none, with a warning: frames.json then
    counts the other replicas' frames."""
    from ray.exceptions import RayActorError

    asked = [(h, h.actor.frame_counts.remote()) for h in handles if h.alive]
    counts = []
    for h, ref in asked:
        try:
            counts.append(ray.get(ref))
        except RayActorError as exc:
            log.warning(
                "replica %s died before its frame counts were read (%s): frames.json counts "
                "the other replicas' frames",
                h.name,
                type(exc).__name__,
            )
    return counts


@contextlib.contextmanager
def shared_judge(cfg: RunConfig, ray: Any) -> Iterator[JudgeClient | None]:
    """The run's judge engine started once, as a Ray actor the replicas share (None when
    no judge is configured); it runs on a GPU only when its backend runs its model on one
    (``EngineSpec.uses_gpu``: a local vLLM model) on a cluster that has GPUs."""
    if cfg.judge is None:
        yield None
        return
    from evalkit.scale.judge_service import start_judge_service

    uses_gpu = engine_spec(cfg.judge.engine).uses_gpu
    gpus = 1 if uses_gpu and ray.cluster_resources().get("GPU") else 0
    client, shutdown = start_judge_service(cfg, num_gpus=gpus)
    try:
        yield client
    finally:
        shutdown()


def default_batch(n_items: int, replicas: int, depth: int, pipeline: PipelineConfig) -> int:
    """Samples per lease: ``depth`` leases fill a replica's pipeline (``max_in_flight``),
    but a small run still gets ~8 leases per replica, so none is left with the tail."""
    fill = max(1, pipeline.max_in_flight // depth)
    return max(1, min(fill, math.ceil(n_items / (8 * replicas))))


def work_items(
    plan: RunPlan, bench: str, lane: str, store: Store, costs: CostModel
) -> tuple[list[WorkItem], PipelineStats]:
    """``bench``'s samples without a record in ``store`` (failed ones too with
    ``retry_failed``), costed, keyed by ``lane``; and its counters with the resumed ones
    counted as skipped."""
    b = plan.bench(bench)
    done = store.done_ids(include_failed=not plan.config.retry_failed)
    todo = [s for s in b.samples if s.id not in done]
    stats = PipelineStats(total=len(b.samples), skipped=len(b.samples) - len(todo))
    return costs.items(lane, todo, b.frame_spec), stats


RELEASE_TIMEOUT_S = 60.0
"""How long the end of a run waits for the release of lost replicas' shared memory."""

RESTART_TIMEOUT_S = 300.0
"""How long a crashed replica may take to come back (Ray restarting it) before it is
presumed dead; its vLLM engine starts again, which is minutes on a loaded machine."""


class Driver:
    """Leases batches to replicas as they finish and keeps each accepted record once."""

    def __init__(
        self,
        ray: Any,
        queue: WorkQueue,
        handles: list[ReplicaHandle],
        stores: dict[str, Store],
        stats: dict[str, PipelineStats],
        on_progress: Progress | None = None,
        depth: int = DEPTH,
    ) -> None:
        """``stores`` and ``stats`` by lane (the first part of the queue's keys)."""
        self.ray = ray
        self.queue = queue
        self.handles = {h.name: h for h in handles}
        self.stores = stores
        self.stats = stats
        self.on_progress = on_progress
        self.depth = depth
        self.in_flight: dict[Any, tuple[str, Lease]] = {}  # ObjectRef -> (replica, lease)
        self.state = {h.name: ReplicaState(h.name, h.pid) for h in handles}
        self.started = time.time()
        self.max_restarts = 0
        """Crashes after which a replica still gets work (Ray restarts its actor)."""
        self.restart_timeout_s = RESTART_TIMEOUT_S
        self.probes: dict[Any, tuple[str, float]] = {}  # pid() call -> (replica, deadline)
        """Replicas Ray is restarting get no lease until their ``pid()`` answers: a lease
        sent to an actor still restarting fails too, and would count as a second crash."""
        self.release_shm = True
        """Unlink the shared memory a lost replica's engine held (see :meth:`_orphaned`)."""
        self.shm: dict[str, tuple[str, list[str]]] = {}
        """Each live replica's (node id, /dev/shm entries its engine holds), as reported."""
        self.asks: dict[Any, tuple[str, int]] = {}  # shm() call -> (replica, its restarts)
        self.releases: list[tuple[str, str, list[str], Any]] = []  # (replica, node, names, ref)
        self.generation = 0
        """The hand-out of runs the replicas hold (a fleet's: one per checkpoint)."""
        self.restore: Callable[[ReplicaHandle], None] | None = None
        """Brings a replica Ray restarted back to the current runs and weights before it
        gets work again (``evalkit.scale.fleet.Fleet.restore``); None: it is built with them."""
        self.stopping: threading.Event | None = None
        """Set from another thread: the run stops at the next turn (:class:`Stopped`)."""

    def run(self) -> None:
        """Until every queued sample has its record (or no replica is left)."""
        self.started = time.time()
        for st in self.stats.values():  # pipeline time, as for one engine: replicas are up
            st.started = self.started
        try:
            for name in self.handles:
                self._ask_shm(name)
            while not self.queue.finished():
                if self.stopping is not None and self.stopping.is_set():
                    raise Stopped("stopped before every sample had its record")
                self._top_up()
                if not self.in_flight and not self.probes:
                    raise RuntimeError(self._stuck())
                refs = [*self.probes, *self.asks, *self.in_flight]
                ready, _ = self.ray.wait(refs, num_returns=1, timeout=1.0)
                for ref in ready:
                    if ref in self.probes:
                        self._probed(ref)
                    elif ref in self.asks:
                        self._reported(ref)
                    else:
                        self._collect(ref)
                if self.on_progress is not None:
                    self.on_progress(self.snapshot())
        finally:
            for st in self.stats.values():
                st.finished = time.time()
            for ref in [*self.in_flight, *self.asks]:  # of dead replicas: nobody waits for them
                with contextlib.suppress(Exception):
                    self.ray.cancel(ref)
            self._await_releases()

    def _top_up(self) -> None:
        busy: dict[str, int] = {}
        for name, _ in self.in_flight.values():
            busy[name] = busy.get(name, 0) + 1
        restarting = {name for name, _ in self.probes.values()}
        for name, handle in self.handles.items():
            while handle.alive and name not in restarting and busy.get(name, 0) < self.depth:
                lease = self.queue.lease(name)
                if lease is None:
                    return
                ref = handle.actor.run_batch.remote(lease.keys, self.generation)
                self.in_flight[ref] = (name, lease)
                busy[name] = busy.get(name, 0) + 1
                self.state[name].leased += len(lease.items)

    def _collect(self, ref: Any) -> None:
        from ray.exceptions import RayActorError

        name, lease = self.in_flight.pop(ref)
        state = self.state[name]
        try:
            results = self.ray.get(ref)
        except RayActorError:
            if self.queue.is_open(lease.id):  # else: failed by a crash already counted
                self._lost(name)
            return
        state.leased = max(0, state.leased - len(lease.items))
        kept: dict[str, list[SampleRecord]] = {}
        for lane, record in results:
            if self._accept(state, lease, lane, record):
                kept.setdefault(lane, []).append(record)
        for lane, recs in kept.items():  # one fsync per store of the batch
            self.stores[lane].append_many(recs)
        self.queue.release(lease.id)  # samples the batch did not return: queued again

    def _accept(self, state: ReplicaState, lease: Lease, lane: str, record: SampleRecord) -> bool:
        """Whether the queue accepts ``record`` (counted); a refused one is discarded."""
        key: Key = (lane, record.id)
        if not self.queue.complete(lease.id, key):
            state.discarded += 1
            return False
        st = self.stats[lane]
        if record.status == "ok":
            st.completed += 1
            state.done += 1
            output = (record.tokens.output if record.tokens else None) or 0
            st.output_tokens += output
            state.output_tokens += output
        else:
            st.failed += 1
            state.failed += 1
        return True

    def _lost(self, name: str) -> None:
        """``name`` crashed: its leases end and their samples go back to the queue; past
        its restarts it is presumed dead and gets no more work."""
        handle, state = self.handles[name], self.state[name]
        state.leased = 0
        self.queue.fail_replica(name)
        self._orphaned(name, self.shm.pop(name, None))
        if state.restarts < self.max_restarts:
            state.restarts += 1
            state.pid = None  # a new process once Ray has restarted it
            deadline = time.monotonic() + self.restart_timeout_s
            self.probes[handle.actor.pid.remote()] = (name, deadline)
            return
        handle.alive = state.alive = False
        with contextlib.suppress(Exception):  # it may be half alive (a hung node): end it
            self.ray.kill(handle.actor, no_restart=True)

    def _probed(self, ref: Any) -> None:
        """A restarting replica's ``pid()`` answered (it is back: leases resume) or failed
        (still restarting: asked again until its deadline, then it is presumed dead)."""
        from ray.exceptions import RayActorError

        name, deadline = self.probes.pop(ref)
        handle, state = self.handles[name], self.state[name]
        try:
            state.pid = self.ray.get(ref)
            if self.restore is not None:
                self.restore(handle)
            self._ask_shm(name)  # the restarted engine's own
            return
        except RayActorError:
            pass
        except Exception as exc:  # it is back but cannot take the current weights or runs
            log.warning("replica %s restarted but was not restored (%s): it gets no more work",
                        name, " ".join(str(exc).split())[:300])  # fmt: skip
            handle.alive = state.alive = False
            with contextlib.suppress(Exception):
                self.ray.kill(handle.actor, no_restart=True)
            return
        if time.monotonic() < deadline:
            self.probes[handle.actor.pid.remote()] = (name, deadline)
            return
        handle.alive = state.alive = False
        with contextlib.suppress(Exception):
            self.ray.kill(handle.actor, no_restart=True)

    def _ask_shm(self, name: str) -> None:
        """Ask ``name`` which /dev/shm entries its engine holds (answered once it is up)."""
        self.asks[self.handles[name].actor.shm.remote()] = (name, self.state[name].restarts)

    def _reported(self, ref: Any) -> None:
        """A replica's shared memory report: kept while that incarnation lives; one that
        crashed meanwhile (the report lands after the crash was seen) is orphaned now."""
        name, restarts = self.asks.pop(ref)
        state = self.state[name]
        try:
            node, names = self.ray.get(ref)
        except Exception:  # it died first (its batches tell), or it cannot say
            return
        if state.alive and state.restarts == restarts:
            self.shm[name] = (node, list(names))
        else:
            self._orphaned(name, (node, list(names)))

    def _orphaned(self, name: str, report: tuple[str, list[str]] | None) -> None:
        """Release the /dev/shm entries a crashed replica's engine held: a task pinned to
        the replica's node (its /dev/shm is that node's RAM, out of the driver's reach
        when it is another machine; the same path serves the driver's own node) unlinks
        each that still exists once no live process there maps or holds it open (never
        another process's segment; see ``release_unmapped_shm``). A dead node's task
        fails: that is said at the end of the run, with the names."""
        if report is None or not report[1] or not self.release_shm:
            return
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from evalkit.engines.lifecycle import release_unmapped_shm

        node, names = report
        task = self.ray.remote(num_cpus=0, max_retries=0)(release_unmapped_shm)
        pinned = NodeAffinitySchedulingStrategy(node_id=node, soft=False)
        try:
            ref = task.options(scheduling_strategy=pinned).remote(names)
        except Exception as exc:  # Ray refuses the task: say so, with the names
            log.warning("replica %s left %s on node %s (%s)", name, names, node, exc)
            return
        self.releases.append((name, node, names, ref))

    def _await_releases(self) -> None:
        """Wait (bounded) for the release tasks; what they could not release is said."""
        for name, node, names, ref in self.releases:
            try:
                out = self.ray.get(ref, timeout=RELEASE_TIMEOUT_S)
            except Exception as exc:  # node lost, timeout
                log.warning(
                    "replica %s was lost; its shared memory on node %s may remain (%s): "
                    "/dev/shm/%s",
                    name, node, type(exc).__name__, " /dev/shm/".join(names),
                )  # fmt: skip
                continue
            if out["released"]:
                log.info("released the shared memory of lost replica %s: %s", name,
                         ", ".join(out["released"]))  # fmt: skip
            if out["in_use"]:
                log.warning("replica %s was lost; still in use on node %s, so left: %s",
                            name, node, ", ".join(out["in_use"]))  # fmt: skip
        self.releases.clear()

    def _stuck(self) -> str:
        dead = [n for n, h in self.handles.items() if not h.alive]
        left = self.queue.total - self.queue.accepted
        if len(dead) == len(self.handles):
            return (
                f"every replica died ({', '.join(dead)}); {left} samples have no record. "
                "The records so far are kept: resume the run (--resume) to finish it"
            )
        return f"{left} samples have no record but none is pending or leased (a bug)"

    def snapshot(self) -> Snapshot:
        """The counters as they are now."""
        return Snapshot(
            started=self.started,
            total=self.queue.total,
            accepted=self.queue.accepted,
            pending=self.queue.pending,
            replicas={k: ReplicaState(**vars(v)) for k, v in self.state.items()},
        )


class Stopped(RuntimeError):
    """A replicated run stopped from another thread (:attr:`Driver.stopping`); the records
    accepted so far are kept, the rest resume."""
