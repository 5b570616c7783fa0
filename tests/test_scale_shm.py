"""A killed replica's shared memory: Ray kills the actor's engine processes, never their
/dev/shm segments; the driver releases them (no engine watchdog in these replicas)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from multiprocessing import resource_tracker, shared_memory
from pathlib import Path
from typing import Any

import pytest

from evalkit.engines.lifecycle import release_unmapped_shm
from evalkit.testing.echo_replica import EchoReplica
from tests._shm_holder import HOLDER

SHM = Path("/dev/shm")
NODE = "ab" * 28  # a Ray node id (hex of 28 bytes)
pytestmark = pytest.mark.skipif(not SHM.is_dir(), reason="no /dev/shm on this system")


def _segment_name() -> str:
    return f"psm_ektest_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def segment() -> Iterator[str]:
    """A segment name of this test's, unlinked after it (whatever the test left)."""
    name = _segment_name()
    yield name
    if (SHM / name).exists():
        os.unlink(SHM / name)


def _create(name: str) -> shared_memory.SharedMemory:
    seg = shared_memory.SharedMemory(name=name, create=True, size=4096)
    resource_tracker.unregister(seg._name, "shared_memory")  # type: ignore[attr-defined]
    return seg


def test_a_segment_no_process_maps_is_released(segment: str) -> None:
    _create(segment).close()  # unmapped, not unlinked: what a killed engine leaves
    out = release_unmapped_shm([segment], wait_s=0)
    assert out == {"released": [segment], "in_use": []}
    assert not (SHM / segment).exists()


def test_a_segment_a_live_process_maps_is_left_alone(segment: str) -> None:
    seg = _create(segment)
    try:
        out = release_unmapped_shm([segment], wait_s=0.5)
        assert out == {"released": [], "in_use": [segment]}
        assert (SHM / segment).exists()
    finally:
        seg.close()


def test_a_semaphore_is_seen_held_while_mapped_then_released() -> None:
    # glibc maps a semaphore under a temporary name, unlinked once linked to its own: the
    # mapping reads "/dev/shm/sem.XXXXXX (deleted)", matched to its entry by inode
    import multiprocessing

    import psutil

    from evalkit.engines._watchdog import shm_held

    lock = multiprocessing.get_context("spawn").Lock()  # a named POSIX semaphore
    name = "sem." + lock._semlock.name.lstrip("/")  # type: ignore[attr-defined]
    try:
        assert (SHM / name).exists()
        assert name in shm_held([psutil.Process()])
        out = release_unmapped_shm([name], wait_s=0.3)
        assert out == {"released": [], "in_use": [name]}  # never unlinked while in use
    finally:
        del lock  # its finaliser unlinks it (and takes it off the resource tracker)


def test_names_that_are_not_plain_entries_of_dev_shm_are_refused(tmp_path: Path) -> None:
    victim = tmp_path / "keep"
    victim.write_text("x")
    out = release_unmapped_shm([f"../..{victim}", str(victim)], wait_s=0)
    assert out == {"released": [], "in_use": []} and victim.exists()


class ReleasingRay:
    """FakeRay whose tasks run at once, here; notes the node each is pinned to."""

    def __init__(self, base: Any) -> None:
        self.base, self.pinned_to = base, []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.base, name)

    def remote(self, **_: Any) -> Any:
        from tests.test_scale_driver import Ref

        ray = self

        class Task:
            def __init__(self, fn: Any) -> None:
                self.fn = fn

            def options(self, scheduling_strategy: Any) -> Task:
                ray.pinned_to.append(scheduling_strategy.node_id)
                return self

            def remote(self, names: list[str]) -> Any:
                return Ref(self.fn(names, wait_s=0))

        return Task

    def get(self, ref: Any, timeout: float | None = None) -> Any:
        return self.base.get(ref)

    def wait(self, refs: list[Any], num_returns: int, timeout: float) -> tuple[list, list]:
        """Oldest first, but a ref with ``ready_at`` = k is ready from the k-th wait on."""
        self.waits = getattr(self, "waits", 0) + 1
        ready = [r for r in refs if getattr(r, "ready_at", 0) <= self.waits][:num_returns]
        return ready, [r for r in refs if r not in ready]


def _drive_fakes(tmp_path: Path, replicas: list[Any], max_restarts: int = 0) -> Any:
    """The driver over fake replicas (tests/test_scale_driver.py's) and ReleasingRay."""
    from evalkit.pipeline import PipelineStats
    from evalkit.scale.cluster import ReplicaHandle
    from evalkit.scale.driver import Driver
    from evalkit.scale.queue import WorkItem, WorkQueue
    from evalkit.store import Store
    from tests.test_scale_driver import FakeRay

    queue = WorkQueue([WorkItem(("b", f"s{i}")) for i in range(8)], 2)
    handles = [ReplicaHandle(r.name, r, None) for r in replicas]
    ray = ReleasingRay(FakeRay())
    with Store(tmp_path / "b.jsonl") as store:
        driver = Driver(ray, queue, handles, {"b": store}, {"b": PipelineStats()})
        driver.max_restarts = max_restarts
        driver.run()
    return driver


def test_a_crashed_replica_s_reported_segment_is_released_on_its_node(
    tmp_path: Path, segment: str
) -> None:
    from tests.test_scale_driver import FakeReplica, Method, Ref

    _create(segment).close()  # its engine core was killed with it: nobody maps it
    dead, live = FakeReplica("r0", die_on=(1,)), FakeReplica("r1")
    dead.shm = Method(lambda: Ref((NODE, [segment])))
    driver = _drive_fakes(tmp_path, [dead, live])
    assert driver.ray.pinned_to == [NODE]
    assert not (SHM / segment).exists()


def test_a_report_that_lands_after_its_replica_s_crash_is_released(
    tmp_path: Path, segment: str
) -> None:
    from tests.test_scale_driver import FakeReplica, Method, Ref

    _create(segment).close()
    late = Ref((NODE, [segment]))
    late.ready_at = 3  # type: ignore[attr-defined]  # after r1's report (1), r0's crash (2)
    dead = FakeReplica("r0", die_on=(1,))
    dead.shm = Method(lambda: late)
    driver = _drive_fakes(tmp_path, [dead, FakeReplica("r1")])
    assert not driver.state["r0"].alive and "r0" not in driver.shm
    assert driver.ray.pinned_to == [NODE] and not (SHM / segment).exists()


def test_a_restarted_replica_s_old_segment_is_released_and_its_new_one_kept(
    tmp_path: Path, segment: str
) -> None:
    from tests.test_scale_driver import FakeReplica, Method, Ref

    _create(segment).close()  # the first incarnation's, left by its killed engine core
    new = _create(_segment_name())  # the restarted engine's, in use
    reports = iter([[segment], [new.name]])
    crashy = FakeReplica("r0", die_on=(1,))
    crashy.shm = Method(lambda: Ref((NODE, next(reports))))
    try:
        driver = _drive_fakes(tmp_path, [crashy, FakeReplica("r1")], max_restarts=1)
        assert driver.state["r0"].restarts == 1 and driver.shm["r0"] == (NODE, [new.name])
        assert not (SHM / segment).exists() and (SHM / new.name).exists()
    finally:
        new.close()
        new.unlink()


class ShmEngineReplica(EchoReplica):
    """An echo replica whose "engine" is a child process holding a ``psm_*`` segment."""

    async def setup(self) -> str:
        if not hasattr(self, "_holder"):
            self.segment = _segment_name()
            cmd = [sys.executable, "-c", HOLDER, self.segment]
            self._holder = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
            assert self._holder.stdout is not None
            assert self._holder.stdout.readline().strip() == "ready"
        return self.name

    async def close(self) -> None:
        """A clean engine close: the holder stops and its segment goes."""
        self._holder.kill()
        self._holder.wait()
        if (SHM / self.segment).exists():
            os.unlink(SHM / self.segment)


def _unmapped_within(name: str, timeout_s: float) -> bool:
    import psutil

    from evalkit.engines._watchdog import shm_held

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if name not in shm_held(list(psutil.process_iter())):
            return True
        time.sleep(0.25)
    return False


def _kill_a_replica_mid_run(tmp_path: Path, release: bool) -> str:
    """Run two ShmEngineReplicas, SIGKILL r1 once its report is in; r1's segment name."""
    from evalkit.pipeline import PipelineStats
    from evalkit.scale.cluster import Placement, ray_session, start_replicas, stop_replicas
    from evalkit.scale.driver import Driver, Snapshot
    from evalkit.scale.queue import WorkItem, WorkQueue
    from evalkit.store import Store

    killed: dict[str, Any] = {}
    queue = WorkQueue([WorkItem(("b", f"s{i}")) for i in range(60)], 2)
    with ray_session(num_cpus=2) as session, Store(tmp_path / "b.jsonl") as store:
        placement = Placement({"CPU": 1.0}, {"num_cpus": 1})
        handles = start_replicas(session.ray, ShmEngineReplica, (0.05,), 2, placement, 4)

        def kill_r1(snap: Snapshot) -> None:
            r1 = snap.replicas["r1"]
            if not killed and snap.accepted >= 4 and "r1" in driver.shm and r1.pid:
                killed["names"] = driver.shm["r1"][1]
                os.kill(r1.pid, signal.SIGKILL)

        driver = Driver(session.ray, queue, handles, {"b": store}, {"b": PipelineStats()}, kill_r1)
        driver.release_shm = release
        try:
            driver.run()
        finally:
            stop_replicas(session.ray, handles)
    ids = [json.loads(x)["id"] for x in (tmp_path / "b.jsonl").read_text().splitlines()]
    assert sorted(ids) == sorted(f"s{i}" for i in range(60))  # the run itself completed
    assert killed, "r1 was never killed: the run ended first"
    names = [n for n in killed["names"] if n.startswith("psm_ektest_")]
    assert len(names) == 1, f"r1 reported {killed['names']}"
    return names[0]


@pytest.mark.heavy
@pytest.mark.timeout(240)
def test_a_killed_replica_s_engine_segment_is_gone_after_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    name = _kill_a_replica_mid_run(tmp_path, release=True)
    try:
        assert not (SHM / name).exists()
    finally:
        if (SHM / name).exists():
            os.unlink(SHM / name)


@pytest.mark.heavy
@pytest.mark.timeout(240)
def test_control_without_the_release_the_killed_replica_s_segment_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    name = _kill_a_replica_mid_run(tmp_path, release=False)
    try:
        # Ray has killed the holder (the engine core): nobody maps it, yet it is there
        assert _unmapped_within(name, 60.0)
        assert (SHM / name).exists()
    finally:
        if (SHM / name).exists():
            os.unlink(SHM / name)
