"""The driver's hand-out, re-queue and discard logic, on fake replicas (no Ray started)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")

from ray.exceptions import ActorDiedError

from evalkit.pipeline import PipelineStats
from evalkit.scale.cluster import ReplicaHandle
from evalkit.scale.driver import Driver, Snapshot, frame_counts
from evalkit.scale.queue import Key, WorkItem, WorkQueue
from evalkit.store import Store
from evalkit.testing.runs import Rec, record


class Ref:
    """A finished call: its result, or the error ``ray.get`` raises."""

    def __init__(self, result: Any = None, error: BaseException | None = None) -> None:
        self.result, self.error = result, error


class FakeRay:
    """``wait`` answers the oldest call first; ``get`` returns or raises its outcome."""

    def __init__(self) -> None:
        self.killed: list[Any] = []

    def wait(self, refs: list[Ref], num_returns: int, timeout: float) -> tuple[list[Ref], list]:
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref: Ref) -> Any:
        if ref.error is not None:
            raise ref.error
        return ref.result

    def cancel(self, ref: Ref) -> None:
        pass

    def kill(self, actor: Any, no_restart: bool = True) -> None:
        self.killed.append(actor)


class Method:
    def __init__(self, fn: Callable[[list[Key]], Ref]) -> None:
        self.fn = fn

    def remote(self, *args: Any) -> Ref:
        return self.fn(*args)


class FakeReplica:
    """Answers every batch with one ok record per key; ``die_on`` = the call numbers
    (1-based) that fail as if the actor had died."""

    def __init__(self, name: str, die_on: tuple[int, ...] = ()) -> None:
        self.name, self.die_on, self.calls = name, die_on, 0
        self.run_batch = Method(self._batch)
        self.pid = Method(lambda: Ref(4242))  # answered at once: restarted already
        self.shm = Method(lambda: Ref(("node", [])))  # its engine holds no shared memory

    def _batch(self, keys: list[Key], generation: int = 0) -> Ref:
        self.calls += 1
        if self.calls in self.die_on:
            return Ref(error=ActorDiedError())
        return Ref([(b, record(Rec(sid, replica=self.name), b)) for b, sid in keys])


def drive(
    tmp_path: Path, replicas: list[FakeReplica], n: int = 12, batch: int = 2
) -> tuple[Driver, list[dict[str, Any]], list[Snapshot]]:
    queue = WorkQueue([WorkItem(("b", f"s{i}"), float(n - i)) for i in range(n)], batch)
    handles = [ReplicaHandle(r.name, r, None) for r in replicas]
    seen: list[Snapshot] = []
    with Store(tmp_path / "b.jsonl") as store:
        driver = Driver(
            FakeRay(), queue, handles, {"b": store}, {"b": PipelineStats()}, seen.append
        )
        try:
            driver.run()
        finally:
            lines = [json.loads(x) for x in (tmp_path / "b.jsonl").read_text().splitlines()]
    return driver, lines, seen


def test_every_sample_is_recorded_once_across_replicas(tmp_path: Path) -> None:
    driver, lines, seen = drive(tmp_path, [FakeReplica("r0"), FakeReplica("r1")])
    assert sorted(r["id"] for r in lines) == sorted(f"s{i}" for i in range(12))
    assert {r["replica"] for r in lines} == {"r0", "r1"}
    assert driver.stats["b"].completed == 12
    assert seen[-1].accepted == 12 and seen[-1].pending == 0


def test_a_dead_replica_s_work_goes_to_the_other_and_its_late_batch_is_discarded(
    tmp_path: Path,
) -> None:
    # r0's first batch fails (actor died); its second, already answered, arrives late
    dead, live = FakeReplica("r0", die_on=(1,)), FakeReplica("r1")
    driver, lines, _ = drive(tmp_path, [dead, live])
    ids = [r["id"] for r in lines]
    assert sorted(ids) == sorted(f"s{i}" for i in range(12)) and len(ids) == len(set(ids))
    assert {r["replica"] for r in lines} == {"r1"}
    state = driver.state["r0"]
    assert not state.alive and state.discarded == 2 and state.done == 0
    assert driver.ray.killed == [dead]
    assert dead.calls == 2  # no more work after it was presumed dead


def test_when_every_replica_dies_the_run_stops_and_keeps_its_records(tmp_path: Path) -> None:
    replicas = [FakeReplica("r0", die_on=(3,)), FakeReplica("r1", die_on=(3,))]
    with pytest.raises(RuntimeError, match=r"every replica died.*resume"):
        drive(tmp_path, replicas)
    kept = [json.loads(x)["id"] for x in (tmp_path / "b.jsonl").read_text().splitlines()]
    assert len(kept) == 8 and len(set(kept)) == 8


def test_longest_samples_are_handed_out_first(tmp_path: Path) -> None:
    _, lines, _ = drive(tmp_path, [FakeReplica("r0")], n=6, batch=1)
    assert [r["id"] for r in lines] == [f"s{i}" for i in range(6)]  # cost n - i


def test_a_progress_callback_that_raises_stops_the_run(tmp_path: Path) -> None:
    queue = WorkQueue([WorkItem(("b", f"s{i}")) for i in range(6)], 1)
    replica = FakeReplica("r0")

    def stop(snap: Snapshot) -> None:
        if snap.accepted >= 2:
            raise KeyboardInterrupt

    with Store(tmp_path / "b.jsonl") as store, pytest.raises(KeyboardInterrupt):
        handles = [ReplicaHandle("r0", replica, None)]
        Driver(FakeRay(), queue, handles, {"b": store}, {"b": PipelineStats()}, stop).run()
    assert len((tmp_path / "b.jsonl").read_text().splitlines()) == 2


def test_replica_flags_reach_the_config_and_tp_the_engine() -> None:
    import argparse

    from evalkit.cli.run import add_arguments, config_from_args

    p = argparse.ArgumentParser()
    add_arguments(p)
    argv = ["--model", "m", "--replicas", "3", "--ray-address", "ray://head:10001"]
    cfg = config_from_args(p.parse_args([*argv, "--cpus-per-replica", "4"]))
    assert (cfg.replicas, cfg.ray_address, cfg.cpus_per_replica) == (3, "ray://head:10001", 4)
    assert cfg.on_ray
    cfg = config_from_args(p.parse_args(["--model", "m", "--tensor-parallel-size", "2"]))
    assert cfg.engine_options["tensor_parallel_size"] == 2 and not cfg.on_ray


def test_replica_settings_leave_the_fingerprint_alone() -> None:
    from evalkit.run.config import RunConfig
    from evalkit.run.plan import result_config

    one = RunConfig(model="m")
    many = one.model_copy(update={"replicas": 8, "ray_address": "auto", "cpus_per_replica": 4})
    assert result_config(one, []) == result_config(many, [])


def test_a_replicated_run_is_refused_by_the_single_engine_path() -> None:
    from evalkit.errors import ConfigError
    from evalkit.run.config import RunConfig
    from evalkit.run.execute import execute

    with pytest.raises(ConfigError, match="build their own engines"):
        execute(RunConfig(model="m", replicas=2), engine=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="run_replicas"):
        execute(RunConfig(model="m", replicas=2))


def test_a_tensor_parallel_vllm_replica_runs_its_workers_as_its_own_processes() -> None:
    from evalkit.run.config import RunConfig
    from evalkit.run.plan import plan_of
    from evalkit.scale.replica import _inside_actor

    tp2 = plan_of(RunConfig(model="m", engine_options={"tensor_parallel_size": 2}), [])
    assert _inside_actor(tp2).engine_options["engine_kwargs"] == {
        "distributed_executor_backend": "mp"
    }
    assert "engine_kwargs" not in tp2.engine_options  # the run's settings stay as given
    assert _inside_actor(plan_of(RunConfig(model="m"), [])).engine_options == {}


def test_the_replica_sink_stamps_records_and_reports_nothing_done() -> None:
    from evalkit.scale.replica import RecordSink

    sink = RecordSink("r3")
    written = record(Rec("a"), "b")
    sink.append(written)
    (stamped,) = sink.records
    assert stamped.replica == "r3" and written.replica is None  # the writer's record untouched
    assert stamped.line() == written.line()[:-2] + ', "replica": "r3"}\n'  # last on the line
    assert sink.done_ids() == set()


def test_the_replica_stamp_is_validated_in_the_replica() -> None:
    from pydantic import ValidationError

    from evalkit.scale.replica import RecordSink

    sink = RecordSink(3)  # type: ignore[arg-type]  # what an unchecked stamp let through
    with pytest.raises(ValidationError, match="replica"):
        sink.append(record(Rec("a"), "b"))


def test_a_batch_of_records_is_appended_at_once_and_a_repeat_refused(tmp_path: Path) -> None:
    from evalkit.errors import DataError

    with Store(tmp_path / "b.jsonl") as store:
        store.append_many([record(Rec("a"), "b"), record(Rec("b", failed_stage="engine"), "b")])
        with pytest.raises(DataError, match="already has a finished record"):
            store.append_many([record(Rec("c"), "b"), record(Rec("a"), "b")])
        store.append_many([record(Rec("b"), "b")])  # a retried failure supersedes
    with Store(tmp_path / "b.jsonl") as again:
        assert {r.id: r.status for r in again.records()} == {"a": "ok", "b": "ok"}


@pytest.mark.heavy
@pytest.mark.timeout(180)
def test_overhead_is_measured_on_a_local_ray_instance_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from evalkit.testing.echo_replica import measure_overhead

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    out = measure_overhead(300, replicas=2, batch_size=8)
    assert out["ray_start_s"] > 0 and out["driver_records_per_s"] > 0
    assert out["driver_records"] == 300
    import ray

    assert not ray.is_initialized()  # the instance it started is shut down


def test_leases_fill_a_pipeline_on_big_runs_and_stay_small_on_small_ones() -> None:
    from evalkit.pipeline import PipelineConfig
    from evalkit.scale.driver import default_batch

    pipe = PipelineConfig(max_in_flight=32)
    assert default_batch(60_000, 8, 2, pipe) == 16  # two leases fill max_in_flight
    assert default_batch(12, 2, 2, pipe) == 1  # 12 samples: several leases each
    assert default_batch(0, 2, 2, pipe) == 1


def test_the_progress_table_shows_each_replica_and_the_total() -> None:
    import io

    from rich.console import Console

    from evalkit.scale.driver import ReplicaState
    from evalkit.scale.progress import table

    snap = Snapshot(
        started=0.0,
        total=10,
        accepted=7,
        pending=1,
        replicas={
            "r0": ReplicaState("r0", pid=11, done=5, leased=2),
            "r1": ReplicaState("r1", pid=12, alive=False, done=2, discarded=1),
        },
    )
    out = io.StringIO()
    Console(file=out, width=200).print(table(snap))
    text = out.getvalue()
    assert "r0" in text and "running" in text and "lost" in text
    assert "7/10" in text and "1 queued" in text


def test_a_replica_within_its_restarts_gets_work_again_after_a_crash(tmp_path: Path) -> None:
    crashy, other = FakeReplica("r0", die_on=(1, 2)), FakeReplica("r1")
    queue = WorkQueue([WorkItem(("b", f"s{i}"), float(12 - i)) for i in range(12)], 2)
    handles = [ReplicaHandle(r.name, r, None) for r in (crashy, other)]
    with Store(tmp_path / "b.jsonl") as store:
        driver = Driver(FakeRay(), queue, handles, {"b": store}, {"b": PipelineStats()})
        driver.max_restarts = 1
        driver.run()
    lines = [json.loads(x) for x in (tmp_path / "b.jsonl").read_text().splitlines()]
    ids = [r["id"] for r in lines]
    assert sorted(ids) == sorted(f"s{i}" for i in range(12)) and len(ids) == len(set(ids))
    state = driver.state["r0"]
    # both batches in flight failed with the one crash: one restart, not two
    assert state.alive and state.restarts == 1 and state.done > 0
    assert driver.ray.killed == []


class _BackAtWork(Exception):
    """Ends the run of the restart test once the restarted replica has done work."""


@pytest.mark.heavy
@pytest.mark.timeout(240)
def test_ray_restarts_a_killed_replica_which_then_gets_work_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import signal
    import time

    from evalkit.scale.cluster import Placement, ray_session, start_replicas, stop_replicas
    from evalkit.testing.echo_replica import EchoReplica

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    killed: dict[str, int] = {}
    deadline = time.monotonic() + 150.0  # the event, or a clear failure: never a fixed sleep

    def kill_r1_then_wait_for_it(snap: Snapshot) -> None:
        r1 = snap.replicas["r1"]
        if not killed and snap.accepted >= 4 and r1.pid:
            killed.update(accepted=snap.accepted)
            os.kill(r1.pid, signal.SIGKILL)
        elif killed and r1.restarts == 1:
            # batches it returned before dying may land after the kill: count from the
            # moment the driver saw the crash
            killed.setdefault("done_at_restart", r1.done)
            if r1.done > killed["done_at_restart"]:
                raise _BackAtWork
        assert time.monotonic() < deadline, f"r1 not back at work: {r1}"

    # more work than the run will do: it ends on the event, however loaded the machine is
    queue = WorkQueue([WorkItem(("b", f"s{i}")) for i in range(100_000)], 2)
    with ray_session(num_cpus=2) as session, Store(tmp_path / "b.jsonl") as store:
        placement = Placement({"CPU": 1.0}, {"num_cpus": 1})
        handles = start_replicas(session.ray, EchoReplica, (0.3,), 2, placement, 4, restarts=1)
        driver = Driver(
            session.ray,
            queue,
            handles,
            {"b": store},
            {"b": PipelineStats()},
            kill_r1_then_wait_for_it,
        )
        driver.max_restarts = 1
        try:
            with pytest.raises(_BackAtWork):
                driver.run()
        finally:
            stop_replicas(session.ray, handles)
    lines = [json.loads(x) for x in (tmp_path / "b.jsonl").read_text().splitlines()]
    ids = [r["id"] for r in lines]
    assert killed and len(ids) == len(set(ids))  # nothing recorded twice across the crash
    state = driver.state["r1"]
    assert state.alive and state.restarts == 1
    assert any(r["replica"] == "r1" for r in lines[killed["accepted"] :])  # back at work


def test_the_judge_runs_once_as_a_service_the_replicas_share(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a judge configured, the driver starts ONE judge service (on a GPU only for a
    local vLLM judge on a cluster with GPUs), hands its client to the replicas and stops
    it at the end; without one, no service."""
    from evalkit.run.config import RunConfig
    from evalkit.scale import judge_service
    from evalkit.scale.driver import shared_judge

    started: list[float] = []
    stopped: list[bool] = []

    def fake_start(cfg: RunConfig, *, num_gpus: float = 0, **_: Any) -> tuple[str, Any]:
        started.append(num_gpus)
        return "client", lambda: stopped.append(True)

    class Cluster:
        def __init__(self, gpus: int) -> None:
            self.gpus = gpus

        def cluster_resources(self) -> dict[str, float]:
            return {"CPU": 2.0, "GPU": float(self.gpus)}

    monkeypatch.setattr(judge_service, "start_judge_service", fake_start)
    with shared_judge(RunConfig(model="m"), Cluster(0)) as client:
        assert client is None and not started
    judged = RunConfig(model="m", judge={"model": "j", "engine": "vllm"})
    with shared_judge(judged, Cluster(8)) as client:
        assert client == "client" and started == [1] and not stopped
    assert stopped == [True]
    served = RunConfig(model="m", judge={"model": "gpt-4o", "engine": "openai"})
    with shared_judge(served, Cluster(8)):
        assert started == [1, 0]


def test_a_replica_scores_with_the_judge_it_is_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The replica opens its judge around the shared service's client (not a judge of its
    own): what it hands ``judge_for`` is the client it was given."""
    import asyncio
    import contextlib

    from evalkit.run import components
    from evalkit.run.config import RunConfig
    from evalkit.run.plan import plan_of
    from evalkit.scale.replica import Replica

    given: list[Any] = []

    @contextlib.asynccontextmanager
    async def judge_for(cfg: Any, engine: Any, cache_dir: Path) -> Any:
        given.append(engine)
        yield "judge"

    class Engine:
        async def close(self) -> None:
            return None

    monkeypatch.setattr(components, "judge_for", judge_for)
    monkeypatch.setattr(components, "make_engine", lambda plan: Engine())
    judged = plan_of(RunConfig(model="m", engine="openai"), [])
    replica = Replica([(judged, str(tmp_path))], "judge-client", "r0")

    async def setup_and_close() -> None:
        await replica.setup()
        await replica.close()

    asyncio.run(setup_and_close())
    assert given == ["judge-client"]


class RestartingReplica(FakeReplica):
    """Its first batch crashes it; while Ray restarts it every call fails, its first
    ``pid()`` too; the second ``pid()`` finds it back."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.restarting = False
        self.pid_calls = 0
        self.calls_while_restarting = 0
        self.pid = Method(self._pid)

    def _batch(self, keys: list[Key], generation: int = 0) -> Ref:
        self.calls += 1
        if self.restarting:
            self.calls_while_restarting += 1
            return Ref(error=ActorDiedError())
        if self.calls == 1:
            self.restarting = True
            return Ref(error=ActorDiedError())
        return Ref([(b, record(Rec(sid, replica=self.name), b)) for b, sid in keys])

    def _pid(self) -> Ref:
        self.pid_calls += 1
        if self.pid_calls == 1:
            return Ref(error=ActorDiedError())
        self.restarting = False
        return Ref(777)


def test_a_restarting_replica_gets_no_lease_until_it_answers_and_is_not_lost(
    tmp_path: Path,
) -> None:
    crashy, other = RestartingReplica("r0"), FakeReplica("r1")
    queue = WorkQueue([WorkItem(("b", f"s{i}"), float(40 - i)) for i in range(40)], 1)
    handles = [ReplicaHandle(r.name, r, None) for r in (crashy, other)]
    with Store(tmp_path / "b.jsonl") as store:
        driver = Driver(FakeRay(), queue, handles, {"b": store}, {"b": PipelineStats()}, depth=1)
        driver.max_restarts = 1
        driver.run()
    state = driver.state["r0"]
    assert crashy.calls_while_restarting == 0 and crashy.pid_calls == 2
    assert state.alive and state.restarts == 1 and state.pid == 777 and state.done > 0


class _Ref:
    def __init__(self, value: Any) -> None:
        self.value = value


class _CountsActor:
    """A replica's ``frame_counts`` as Ray answers it: a value, or the actor's death."""

    def __init__(self, value: Any) -> None:
        self.frame_counts = self
        self.value = value

    def remote(self) -> _Ref:
        return _Ref(self.value)


class _GetRay:
    def get(self, ref: _Ref) -> Any:
        if isinstance(ref.value, BaseException):
            raise ref.value
        return ref.value


def test_a_replica_dead_after_its_last_lease_leaves_the_others_frame_counts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # seen in a CI run: the killed replica had no lease left, so the driver still took it for
    # alive, and asking it for its frame counts ended the finished run in ActorDiedError
    handles = [
        ReplicaHandle("r0", _CountsActor({"set": [((8, 84, 112, "pil"), 3)]}), None),
        ReplicaHandle("r1", _CountsActor(ActorDiedError()), None),
        ReplicaHandle("r2", _CountsActor({"never": []}), None, alive=False),
    ]
    got = frame_counts(_GetRay(), handles)
    assert got == [{"set": [((8, 84, 112, "pil"), 3)]}]
    assert "replica r1 died before its frame counts were read" in caplog.text


class _ListRay(FakeRay):
    """``get`` of a list too, as a fleet asks every replica at once."""

    def get(self, ref: Any) -> Any:
        if isinstance(ref, list):
            return [FakeRay.get(self, r) for r in ref]
        return FakeRay.get(self, ref)


class CheckpointReplica(FakeReplica):
    """A replica of a watch's fleet: it loads weights and adopts runs; with ``crash`` its
    first batch kills it and Ray brings it back as it was built (hand-out 0, first
    weights). Every call is logged in order."""

    def __init__(self, name: str, crash: bool = False) -> None:
        super().__init__(name)
        self.crash, self.generation, self.weights = crash, 0, "base"
        self.log: list[tuple[Any, ...]] = []
        self.load_weights = Method(self._load)
        self.adopt = Method(self._adopt)

    def _load(self, path: str) -> Ref:
        self.log.append(("load", path))
        self.weights = path
        return Ref(None)

    def _adopt(self, held: list[Any], generation: int) -> Ref:
        self.log.append(("adopt", held, generation))
        self.generation = generation
        return Ref(4242)

    def _batch(self, keys: list[Key], generation: int = 0) -> Ref:
        self.calls += 1
        self.log.append(("batch", generation, self.generation, self.weights))
        if self.crash and self.calls == 1:
            self.generation, self.weights = 0, "base"  # restarted from its first arguments
            return Ref(error=ActorDiedError())
        return super()._batch(keys, generation)


def test_a_fleet_hands_each_run_to_its_replicas_and_restores_one_ray_restarted(
    tmp_path: Path,
) -> None:
    """``evalkit watch --replicas``: the replicas take each checkpoint's weights and runs
    (a new hand-out), every lease names the hand-out, and a replica Ray restarted (back with
    its first weights and runs) is given the current ones before any more work."""
    import contextlib

    from evalkit.scale.cluster import Session
    from evalkit.scale.fleet import Fleet
    from evalkit.startup import StartupTimes

    crashy, steady = CheckpointReplica("r0", crash=True), CheckpointReplica("r1")
    handles = [ReplicaHandle(r.name, r, None) for r in (crashy, steady)]
    ray = _ListRay()
    fleet = Fleet(contextlib.ExitStack(), Session(ray))
    fleet.handles, fleet.held, fleet.startup = handles, ["plan-0"], StartupTimes(engines_s=1.0)
    assert fleet.take_startup() is not None and fleet.take_startup() is None  # the first run's
    for step, n in ((10, 12), (20, 6)):
        fleet.load_weights_now(f"ckpt-{step}")
        assert fleet.adopt([f"plan-{step}"]) == handles
        queue = WorkQueue([WorkItem(("b", f"s{i}"), 1.0) for i in range(n)], 2)
        with Store(tmp_path / f"{step}.jsonl") as store:
            driver = Driver(ray, queue, handles, {"b": store}, {"b": PipelineStats()}, depth=1)
            driver.max_restarts = 1
            fleet.attach(driver)
            driver.run()
            fleet.detach(driver)
        lines = (tmp_path / f"{step}.jsonl").read_text().splitlines()
        assert sorted(json.loads(x)["id"] for x in lines) == sorted(f"s{i}" for i in range(n))
    # r0 crashed on its first batch of step 10; restored to ckpt-10 and hand-out 1 first
    assert crashy.log[:3] == [
        ("load", "ckpt-10"),
        ("adopt", ["plan-10"], 1),
        ("batch", 1, 1, "ckpt-10"),
    ]
    back = crashy.log[3:5]
    assert back == [("load", "ckpt-10"), ("adopt", ["plan-10"], 1)], crashy.log
    # every batch each replica ran was for the hand-out it held, on the weights of its step
    for r in (crashy, steady):
        batches = [e for e in r.log if e[0] == "batch"][1 if r is crashy else 0 :]
        assert batches and all(e[1] == e[2] and e[3] == f"ckpt-{e[1] * 10}" for e in batches)
    assert fleet.restarts == {"r0": 1, "r1": 0}  # Ray's restarts count across the runs
    assert ray.killed == []
