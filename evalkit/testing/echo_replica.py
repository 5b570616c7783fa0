"""A stand-in replica for the Ray driver's tests and perf scripts, and the driver's overhead.

``EchoReplica`` speaks the replica actor's interface (setup, pid, shm, run_batch, close)
without an engine: it answers each batch with minimal records, so what a run through it
costs is the driver's own (lease, transfer, accept, fsync'd append). ``measure_overhead``
times that on a local Ray instance (``perf/scale.py``). Never imported by product code.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from evalkit.pipeline import PipelineStats
from evalkit.records import SampleRecord, ScoreRecord
from evalkit.scale.cluster import ray_session, start_replicas, stop_replicas
from evalkit.scale.driver import DEPTH, Driver
from evalkit.scale.queue import Key, WorkItem, WorkQueue
from evalkit.store import Store


def _echo_record(bench: str, sid: str, replica: str) -> SampleRecord:
    """The least ``ok`` record the store takes (EchoReplica's answer)."""
    return SampleRecord(
        id=sid,
        status="ok",
        score=ScoreRecord(value=1.0),
        benchmark=bench,
        task_type="echo",
        fingerprint="",
        replica=replica,
    )


class EchoReplica:
    """A replica that answers each batch with a minimal record per sample, after
    ``delay_s``: with none, what is left of a batch's time is the driver's (lease,
    transfer, accept, fsync'd append)."""

    def __init__(self, delay_s: float = 0.0, name: str = "") -> None:
        from evalkit.engines.lifecycle import shm_listing

        self.delay_s = delay_s
        self.name = name
        self._shm_before = shm_listing()

    async def setup(self) -> str:
        """Nothing to start."""
        return self.name

    def pid(self) -> int:
        """The actor's process id."""
        import os

        return os.getpid()

    async def shm(self) -> tuple[str, list[str]]:
        """This node's id and the /dev/shm entries this actor's processes hold (none
        unless a subclass starts some), as :meth:`Replica.shm` says them."""
        from evalkit.scale.replica import shm_report

        await self.setup()
        return shm_report(self._shm_before)

    async def run_batch(
        self, keys: list[Key], generation: int = 0
    ) -> list[tuple[str, SampleRecord]]:
        """One ``ok`` record per key (lane, sample id), stamped with this replica (one
        hand-out of runs: ``generation`` is not checked)."""
        if self.delay_s:
            import asyncio

            await asyncio.sleep(self.delay_s)
        return [(b, _echo_record(b, sid, self.name)) for b, sid in keys]

    async def close(self) -> None:
        """Nothing to stop."""


def measure_overhead(
    n_records: int = 2000, replicas: int = 2, batch_size: int = 16, workdir: str | None = None
) -> dict[str, Any]:
    """Ray start-up seconds and the records per second the driver accepts (trivial
    replicas, real queue and fsync'd store); JSON-able, for ``perf/scale.py``."""
    import tempfile

    from evalkit.scale.cluster import Placement

    with contextlib.ExitStack() as stack:
        tmp = workdir or stack.enter_context(tempfile.TemporaryDirectory())
        store = stack.enter_context(Store(Path(tmp) / "overhead.jsonl"))
        with ray_session(num_cpus=replicas) as session:
            ray = session.ray
            t0 = time.perf_counter()
            placement = Placement({"CPU": 1.0}, {"num_cpus": 1})
            handles = start_replicas(ray, EchoReplica, (0.0,), replicas, placement, DEPTH + 2)
            actors_s = time.perf_counter() - t0
            items = [WorkItem(("overhead", f"s{i}"), float(i % 97)) for i in range(n_records)]
            queue = WorkQueue(items, batch_size)
            stats = {"overhead": PipelineStats(total=n_records)}
            t1 = time.perf_counter()
            try:
                Driver(ray, queue, handles, {"overhead": store}, stats).run()
            finally:
                stop_replicas(ray, handles)
            took = time.perf_counter() - t1
    return {
        "ray_start_s": session.started_s,
        "replica_start_s": actors_s,
        "driver_records": n_records,
        "driver_seconds": took,
        "driver_records_per_s": n_records / took if took > 0 else None,
        "driver_replicas": replicas,
        "driver_batch_size": batch_size,
    }
