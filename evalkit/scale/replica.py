"""One evaluation replica: its own engine, frame cache and scorers, the real pipeline.

The driver makes it a Ray actor (``ray.remote(Replica)``, async, several batches at once
on one engine). It writes no files of the run: the pipeline's records (built by the
pipeline's own writers, :mod:`evalkit.records`) are collected by :class:`RecordSink`,
stamped with the replica's name and returned to the driver, which decides what is kept.
Everything is built by the runner's own functions, as an in-process run builds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import Counter
from pathlib import Path
from typing import Any, cast

from evalkit.engines import engine_spec, reads_local_checkpoint
from evalkit.engines.lifecycle import held_shm, shm_listing
from evalkit.pipeline import Pipeline
from evalkit.records import SampleRecord
from evalkit.runconfig import RunConfig
from evalkit.rundir import RunDir
from evalkit.sample import Sample
from evalkit.store import Store
from evalkit.video.budget import FrameLog


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


class Replica:
    """A Ray actor's state: ``setup`` once, then ``run_batch`` calls, then ``close``."""

    def __init__(
        self, cfg: dict[str, Any], run_path: str, fingerprint: str, judge: Any, name: str
    ) -> None:
        self.cfg = RunConfig.model_validate(cfg)
        self.judge_engine = judge
        """The shared judge service's client (None: no judge, or one built here)."""
        self.name = name
        self.run_path = Path(run_path)
        self.fingerprint = fingerprint
        self._stack = contextlib.AsyncExitStack()
        self._benches: dict[str, Any] = {}
        self._samples: dict[tuple[str, str], Sample] = {}
        self._logs: dict[str, FrameLog] = {}
        self._parts: dict[str, Any] = {}
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
        """Load the benchmarks and start the engine, judge and decoding pool (once; a
        restarted actor does it again on its first batch)."""
        async with self._setting_up:
            if not self._parts:
                await self._setup()
        return self.name

    async def _setup(self) -> None:
        from evalkit.engines.lifecycle import close_engine
        from evalkit.engines.logs import quiet_engine_logs
        from evalkit.runner import (
            judge_for,
            make_engine,
            miss_pool,
            model_factor,
            resolve_benchmarks,
        )
        from evalkit.runparts import make_cache

        quiet_engine_logs()  # the driver's console shows progress, not engine start-up logs
        cfg = self.cfg
        factor = model_factor(cfg) if reads_local_checkpoint(cfg.engine) else None
        for bench in resolve_benchmarks(cfg, factor):
            self._benches[bench.name] = bench
            self._logs[bench.name] = FrameLog()
            for s in bench.samples:
                self._samples[(bench.name, s.id)] = s
        engine = make_engine(_inside_actor(cfg))
        self._stack.push_async_callback(close_engine, engine)
        judge_dir = RunDir(self.run_path).judge_cache_path
        judge = await self._stack.enter_async_context(judge_for(cfg, self.judge_engine, judge_dir))
        pool = self._stack.enter_context(miss_pool(cfg.cache_workers))
        self._parts = {"engine": engine, "judge": judge, "pool": pool, "cache": make_cache(cfg)}

    async def run_batch(self, keys: list[tuple[str, str]]) -> list[tuple[str, SampleRecord]]:
        """Run the leased samples through the pipeline; (benchmark, record) of each."""
        await self.setup()
        by_bench: dict[str, list[Sample]] = {}
        for bench, sid in keys:
            by_bench.setdefault(bench, []).append(self._samples[(bench, sid)])
        out: list[tuple[str, SampleRecord]] = []
        for bench, samples in by_bench.items():
            sink = RecordSink(self.name)
            await self._pipeline(bench, sink).run(samples)
            out += [(bench, rec) for rec in sink.records]
        return out

    def _pipeline(self, bench_name: str, sink: RecordSink) -> Pipeline:
        from evalkit.runner import make_scorer
        from evalkit.runparts import make_builder

        bench, p, cfg = self._benches[bench_name], self._parts, self.cfg
        judge = p["judge"]  # make_scorer gives it this benchmark's judge prompt
        builder = make_builder(
            cfg, bench, p["cache"], p["engine"], p["pool"], self._logs[bench_name]
        )
        scorer = make_scorer(bench.spec, judge, bench.prompt, cfg.rule)
        store = cast(Store, sink)  # the pipeline only appends and asks for done ids
        return Pipeline(p["engine"], builder, scorer, store, cfg.pipeline, self.fingerprint)

    def frame_counts(self) -> dict[str, list[tuple[tuple[int, int, int, str], int]]]:
        """What the replica's IO threads loaded, per benchmark (for ``frames.json``)."""
        return {name: list(log.counts().items()) for name, log in self._logs.items()}

    async def close(self) -> None:
        """Stop the engine, the judge and the decoding pool."""
        await self._stack.aclose()


def shm_report(before: set[str]) -> tuple[str, list[str]]:
    """(the Ray node id of this actor, the /dev/shm entries its process and descendants
    hold that were not in ``before``): what the driver unlinks should the actor die
    without closing its engine (Ray kills the engine's processes with it, not their
    shared memory)."""
    import ray

    return ray.get_runtime_context().get_node_id(), sorted(held_shm(before))


def _inside_actor(cfg: RunConfig) -> RunConfig:
    """``cfg`` for an engine built inside a replica actor. A tensor-parallel engine
    (``EngineSpec.tensor_parallel``: vLLM) runs its workers as processes of the actor, which
    already holds the group's GPUs; vLLM's own Ray executor would ask the cluster for as many
    GPUs again."""
    tp = int(cfg.engine_options.get("tensor_parallel_size") or 1)
    if not engine_spec(cfg.engine).tensor_parallel or tp <= 1:
        return cfg
    kwargs = {"distributed_executor_backend": "mp", **cfg.engine_options.get("engine_kwargs", {})}
    options = {**cfg.engine_options, "engine_kwargs": kwargs}
    return cfg.model_copy(update={"engine_options": options})


def merge_frame_counts(
    run_path: Path, counts: list[dict[str, list[tuple[tuple[int, int, int, str], int]]]]
) -> None:
    """Write the replicas' frame counts into the run's ``frames.json``, per benchmark."""
    merged: dict[str, Counter[tuple[int, int, int, str]]] = {}
    for per_bench in counts:
        for name, rows in per_bench.items():
            merged.setdefault(name, Counter()).update(
                {(k[0], k[1], k[2], k[3]): v for k, v in rows}
            )
    for name, counter in merged.items():
        log = FrameLog()
        log.add_counts(counter)
        log.write(RunDir(run_path).frames_path, name)
