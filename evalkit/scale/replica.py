"""One evaluation replica: its own engine, frame cache and scorers, the real pipeline.

The driver makes it a Ray actor (``ray.remote(Replica)``, async, several batches at once
on one engine). It writes no files of the run: the pipeline's records (built by the
pipeline's own writers, :mod:`evalkit.records`) are collected by :class:`RecordSink`,
stamped with the replica's name and returned to the driver, which decides what is kept.
It runs the driver's :class:`~evalkit.run.plan.RunPlan` s (sent once, never re-resolved:
one for a run, one per setting for a sweep, all on its one engine) with the parts every
process of a run builds alike (``evalkit.run.components``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

from evalkit.engines import engine_spec
from evalkit.engines.base import Engine
from evalkit.engines.lifecycle import held_shm, shm_listing
from evalkit.pipeline import Pipeline
from evalkit.records import SampleRecord
from evalkit.run.plan import RunPlan
from evalkit.rundir import RunDir
from evalkit.sample import Sample
from evalkit.store import Store
from evalkit.video.budget import FrameLog

if TYPE_CHECKING:
    from evalkit.cache import FrameCache
    from evalkit.scale.judge_service import JudgeClient
    from evalkit.scoring import LLMJudge


class RecordSink:
    """The store a replica's pipeline writes to: records kept in memory, nothing on disk.

    ``done_ids`` is empty: which samples are done is the driver's to decide, and it
    leases only samples without a record.
    """

    def __init__(self, replica: str) -> None:
        self.replica = replica
        self.records: list[SampleRecord] = []

    def append(self, record: SampleRecord) -> None:
        """Keep one finished record, stamped with this replica."""
        self.records.append(record.stamped(self.replica))

    def done_ids(self, *, include_failed: bool = True) -> set[str]:
        """No sample is done from the pipeline's point of view (see the class)."""
        return set()


Run = tuple[RunPlan, str]
"""A run plan and its run directory: what a replica is handed (one for ``evalkit run``,
one per setting for ``evalkit sweep``)."""


def lanes(runs: Sequence[Run]) -> dict[str, tuple[int, str]]:
    """Each benchmark of each run named as the work queue names it (the first part of a
    :data:`~evalkit.scale.queue.Key`) -> (the run's index, the benchmark). One run: the
    benchmark's name. Several (a sweep's settings): ``RUN_DIR_NAME/benchmark``. The driver
    and every replica derive the names from the same list, so they agree."""
    out: dict[str, tuple[int, str]] = {}
    for i, (plan, path) in enumerate(runs):
        for b in plan.benches:
            lane = b.name if len(runs) == 1 else f"{Path(path).name}/{b.name}"
            if lane in out:
                raise ValueError(f"two runs of one replica set share the lane {lane!r}")
            out[lane] = (i, b.name)
    return out


@dataclass
class _Held:
    """One run plan a replica runs: the plan, its run directory (its judge cache), and
    what its IO threads loaded per benchmark."""

    plan: RunPlan
    run_path: Path
    logs: dict[str, FrameLog] = field(default_factory=dict)
    samples: dict[tuple[str, str], Sample] = field(default_factory=dict)
    """(benchmark, sample id) -> the plan's sample."""


class Replica:
    """A Ray actor's state: ``setup`` once, then ``run_batch`` calls, then ``close``.

    It holds the runs it is handed (:data:`Run`: one for ``evalkit run``; a sweep's
    settings, which differ in request settings only, share its one engine) and resolves
    nothing: the benchmarks, samples, frame specs and fingerprints are the plans', as the
    driver resolved them. Batches name samples by lane (:func:`lanes`) and id. A restarted
    actor is built again from the same arguments, so it holds the same runs.
    """

    def __init__(self, runs: Sequence[Run], judge: JudgeClient | None, name: str) -> None:
        if not runs:
            raise ValueError("a replica needs at least one run plan")
        self.judge_engine = judge
        """The shared judge service's client (None: no judge, or one built here)."""
        self.name = name
        self._hold_runs(runs)
        self.generation = 0
        """Which hand-out of runs it holds (:meth:`adopt`); a batch names the one it is for."""
        self._stack = contextlib.AsyncExitStack()
        self._parts: _Parts | None = None
        self._setting_up = asyncio.Lock()
        self._shm_before = shm_listing()

    def pid(self) -> int:
        """The actor's process id (tests kill it by this)."""
        return os.getpid()

    async def shm(self) -> tuple[str, list[str]]:
        """Once the engine is up: this node's id and the /dev/shm entries the engine holds
        (see :func:`shm_report`)."""
        await self.setup()
        return shm_report(self._shm_before)

    async def setup(self) -> str:
        """Start the engine, judge and decoding pool (once; a restarted actor does it again
        on its first batch)."""
        async with self._setting_up:
            if self._parts is None:
                self._parts = await self._setup()
        return self.name

    async def _setup(self) -> _Parts:
        from evalkit.engines.lifecycle import close_engine
        from evalkit.engines.logs import quiet_engine_logs
        from evalkit.run.components import data_here, judge_for, make_cache, make_engine, miss_pool

        quiet_engine_logs()  # the driver's console shows progress, not engine start-up logs
        for h in self._held:  # a node that lacks a release fetches it (once per node: locked)
            data_here(h.plan)
        held = self._held[0]  # the engine, judge and cache of the first run (alike in all)
        cfg = held.plan.config
        engine = make_engine(_inside_actor(held.plan))
        self._stack.push_async_callback(close_engine, engine)
        judge_dir = RunDir(held.run_path).judge_cache_path
        judge = await self._stack.enter_async_context(judge_for(cfg, self.judge_engine, judge_dir))
        pool = self._stack.enter_context(miss_pool(cfg.cache_workers))
        return _Parts(engine, judge, pool, make_cache(cfg))

    def _hold_runs(self, runs: Sequence[Run]) -> None:
        self._held = [_hold(plan, path) for plan, path in runs]
        self._lanes = {lane: (self._held[i], b) for lane, (i, b) in lanes(runs).items()}

    async def load_weights(self, path: str) -> None:
        """Load checkpoint folder ``path``'s weights into this replica's engine in place
        (``evalkit watch``: the next checkpoint, same architecture)."""
        from evalkit.engines.base import ReloadsWeights

        await self.setup()
        assert self._parts is not None
        engine = self._parts.engine
        if not isinstance(engine, ReloadsWeights):
            raise TypeError(f"replica {self.name}'s engine cannot load weights in place")
        await engine.load_weights(path)

    def adopt(self, runs: Sequence[Run], generation: int) -> int:
        """Hold ``runs`` from now on instead of those held so far (``evalkit watch``: the
        next checkpoint's plans, on the engine, judge and cache already up; the runs must
        want the same engine). Returns the actor's pid."""
        if not runs:
            raise ValueError("a replica needs at least one run plan")
        self._hold_runs(runs)
        self.generation = generation
        return os.getpid()

    async def run_batch(
        self, keys: list[tuple[str, str]], generation: int = 0
    ) -> list[tuple[str, SampleRecord]]:
        """Run the leased samples, (lane, sample id) each, through the pipeline of their
        run and benchmark; (lane, record) of each. ``generation`` is the hand-out of runs
        the lease is for: a replica holding other runs (restarted by Ray with the runs it
        was first given, and not handed the current ones) refuses it rather than answer
        from the wrong plan or weights."""
        if generation != self.generation:
            raise RuntimeError(
                f"replica {self.name} holds the runs of hand-out {self.generation}, the "
                f"lease is for hand-out {generation}"
            )
        await self.setup()
        by_lane: dict[str, list[Sample]] = {}
        for lane, sid in keys:
            held, bench = self._lanes[lane]
            by_lane.setdefault(lane, []).append(held.samples[(bench, sid)])
        out: list[tuple[str, SampleRecord]] = []
        for lane, samples in by_lane.items():
            held, bench = self._lanes[lane]
            sink = RecordSink(self.name)
            await self._pipeline(held, bench, sink).run(samples)
            out += [(lane, rec) for rec in sink.records]
        return out

    def _pipeline(self, held: _Held, bench_name: str, sink: RecordSink) -> Pipeline:
        from evalkit.run.components import make_builder, make_scorer

        assert self._parts is not None
        p, cfg, bench = self._parts, held.plan.config, held.plan.bench(bench_name)
        builder = make_builder(cfg, bench, p.cache, p.engine, p.pool, held.logs[bench_name])
        # make_scorer gives the judge this benchmark's judge prompt
        scorer = make_scorer(bench.spec, p.judge, bench.prompt, cfg.rule)
        store = cast(Store, sink)  # the pipeline only appends and asks for done ids
        return Pipeline(p.engine, builder, scorer, store, cfg.pipeline, held.plan.fingerprint)

    def frame_counts(self) -> dict[str, list[tuple[tuple[int, int, int, str], int]]]:
        """What the replica's IO threads loaded, per lane (for each run's ``frames.json``)."""
        return {
            lane: list(held.logs[bench].counts().items())
            for lane, (held, bench) in self._lanes.items()
        }

    async def close(self) -> None:
        """Stop the engine, the judge and the decoding pool."""
        await self._stack.aclose()


@dataclass
class _Parts:
    """What a replica starts once and every plan it holds shares."""

    engine: Engine
    judge: LLMJudge | None
    pool: ProcessPoolExecutor
    cache: FrameCache


def _hold(plan: RunPlan, run_path: str) -> _Held:
    held = _Held(plan, Path(run_path))
    held.logs = {b.name: FrameLog() for b in plan.benches}
    held.samples = {(b.name, s.id): s for b in plan.benches for s in b.samples}
    return held


def shm_report(before: set[str]) -> tuple[str, list[str]]:
    """(the Ray node id of this actor, the /dev/shm entries its process and descendants
    hold that were not in ``before``): what the driver unlinks should the actor die
    without closing its engine (Ray kills the engine's processes with it, not their
    shared memory)."""
    import ray

    return ray.get_runtime_context().get_node_id(), sorted(held_shm(before))


def _inside_actor(plan: RunPlan) -> RunPlan:
    """``plan`` for an engine built inside a replica actor. A tensor-parallel engine
    (``EngineSpec.tensor_parallel``: vLLM) runs its workers as processes of the actor, which
    already holds the group's GPUs; vLLM's own Ray executor would ask the cluster for as many
    GPUs again."""
    tp = int(plan.engine_options.get("tensor_parallel_size") or 1)
    if not engine_spec(plan.engine).tensor_parallel or tp <= 1:
        return plan
    given = plan.engine_options.get("engine_kwargs", {})
    kwargs = {"distributed_executor_backend": "mp", **given}
    return replace(plan, engine_options={**plan.engine_options, "engine_kwargs": kwargs})


def merge_frame_counts(
    runs: Sequence[Run], counts: list[dict[str, list[tuple[tuple[int, int, int, str], int]]]]
) -> None:
    """Write the replicas' frame counts (per lane, :meth:`Replica.frame_counts`) into each
    run's ``frames.json``, per benchmark."""
    named = lanes(runs)
    merged: dict[str, Counter[tuple[int, int, int, str]]] = {}
    for per_lane in counts:
        for lane, rows in per_lane.items():
            merged.setdefault(lane, Counter()).update(
                {(k[0], k[1], k[2], k[3]): v for k, v in rows}
            )
    for lane, counter in merged.items():
        i, bench = named[lane]
        log = FrameLog()
        log.add_counts(counter)
        log.write(RunDir(runs[i][1]).frames_path, bench)
