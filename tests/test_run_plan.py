"""The run plan: a run resolved once (``plan_run``), the same fingerprint as runs made before
it, sent to replicas as is (it pickles) and run there without resolving anything again."""

from __future__ import annotations

import asyncio
import pickle
from pathlib import Path
from typing import Any

import pytest

from evalkit.records import SampleRecord
from evalkit.run import components
from evalkit.run.config import RunConfig
from evalkit.run.plan import plan_run
from tests._run_dirs import BENCH, Counting, run_config, write_set

# Computed by the code before the plan existed (evalkit.runner.run_manifest over
# resolve_benchmarks) for the configurations below: a run directory made then must resume
# under the plan without --force, so these values never change.
PINNED = {
    "defaults": "327ff48fdc55ca5f",
    "every result setting": "255120bd9cf36fac",
}
SETTINGS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "every result setting": {
        "frames": {"fps": 1.0, "max_pixels": 200704},
        "max_tokens": 7,
        "variant": "plain",
        "cache_codec": "jpeg",
        "engine_options": {"max_retries": 3, "timeout_s": 5, "base_url": "http://x"},
        "judge": {"model": "judge-m", "timeout_s": 9},
        "rule": "official+judge",
    },
}


def _config(root: Path, **kw: Any) -> RunConfig:
    # relative paths: the ad-hoc spec records its file's path, so the hash is the same anywhere
    cfg = run_config(root, **kw)
    return cfg.model_copy(update={"data": f"{BENCH}.jsonl", "cache_root": "cache"})


@pytest.mark.parametrize("name", sorted(PINNED))
def test_the_fingerprint_is_the_one_runs_made_before_the_plan_recorded(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_set(tmp_path, 3)
    monkeypatch.chdir(tmp_path)
    plan = plan_run(_config(tmp_path, **SETTINGS[name]))
    assert plan.fingerprint == PINNED[name]
    assert plan.manifest.result_config.fingerprint() == PINNED[name]


def test_a_plan_pickles_whole(tmp_path: Path) -> None:
    """The driver sends the plan to the replicas through Ray's object store."""
    write_set(tmp_path, 3)
    plan = plan_run(run_config(tmp_path, max_tokens=5))
    back = pickle.loads(pickle.dumps(plan))
    assert back.id == plan.id == plan.fingerprint
    assert back.manifest.dump() == plan.manifest.dump()
    (bench,) = back.benches
    assert bench.name == BENCH and bench.sampling.max_tokens == 5
    assert [s.id for s in bench.samples] == [s.id for s in plan.bench(BENCH).samples]
    assert bench.frame_spec == plan.benches[0].frame_spec


def test_a_replica_runs_its_plans_without_resolving_any_benchmark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replica gets the driver's plans (two here, as a sweep's settings): it never loads
    a benchmark nor reads a config, one batch may hold samples of both, and each record
    carries its own plan's fingerprint."""
    from evalkit.bench import unified_known
    from evalkit.run import plan as plan_module
    from evalkit.scale.replica import Replica, lanes

    write_set(tmp_path, 4)
    plan = plan_run(run_config(tmp_path))
    other = plan_run(run_config(tmp_path, max_tokens=3))
    assert other.fingerprint != plan.fingerprint

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a replica resolved the benchmarks again")

    monkeypatch.setattr(plan_module, "resolve_benchmarks", refuse)
    monkeypatch.setattr(unified_known, "data_benches", refuse)
    monkeypatch.setattr(components, "make_engine", lambda plan: Counting())
    runs = [(plan, str(tmp_path / "runs" / "r")), (other, str(tmp_path / "runs" / "r3"))]
    sent = pickle.loads(pickle.dumps(runs))  # as Ray hands them over
    replica = Replica(sent, None, "r0")
    assert lanes(runs) == {f"r/{BENCH}": (0, BENCH), f"r3/{BENCH}": (1, BENCH)}
    ids = [s.id for s in plan.bench(BENCH).samples][:3]
    keys = [(f"r/{BENCH}", i) for i in ids] + [(f"r3/{BENCH}", ids[0])]

    async def one_batch() -> list[tuple[str, SampleRecord]]:
        try:
            return await replica.run_batch(keys)
        finally:
            await replica.close()

    out = asyncio.run(one_batch())
    assert sorted((lane, rec.id) for lane, rec in out) == sorted(keys)
    assert {rec.fingerprint for lane, rec in out if lane == f"r/{BENCH}"} == {plan.fingerprint}
    assert {rec.fingerprint for lane, rec in out if lane == f"r3/{BENCH}"} == {other.fingerprint}
    assert {rec.replica for _, rec in out} == {"r0"}
    assert not (tmp_path / "runs" / "r").exists()  # a replica writes no file of the run


class Reloading(Counting):
    """A Counting engine that takes weights in place (as vLLM's does)."""

    def __init__(self) -> None:
        super().__init__()
        self.loaded: list[str] = []

    async def load_weights(self, path: str) -> None:
        self.loaded.append(path)


def test_a_replica_takes_the_next_checkpoint_s_weights_and_runs_and_refuses_stale_leases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``evalkit watch --replicas``: a replica up on one plan loads the next checkpoint's
    weights into its engine in place and adopts its plan (hand-out 1); a lease for the
    hand-out it no longer holds is refused, never answered from the other plan."""
    from evalkit.scale.replica import Replica

    write_set(tmp_path, 3)
    plan = plan_run(run_config(tmp_path))
    nxt = plan_run(run_config(tmp_path, max_tokens=3))
    engine = Reloading()
    monkeypatch.setattr(components, "make_engine", lambda plan: engine)
    replica = Replica([(plan, str(tmp_path / "step-0"))], None, "r0")
    ids = [s.id for s in plan.bench(BENCH).samples]

    async def steps() -> list[tuple[str, SampleRecord]]:
        try:
            first = await replica.run_batch([(BENCH, ids[0])])
            assert {rec.fingerprint for _, rec in first} == {plan.fingerprint}
            await replica.load_weights(str(tmp_path / "checkpoint-10"))
            assert replica.adopt([(nxt, str(tmp_path / "step-10"))], 1) > 0
            with pytest.raises(RuntimeError, match="holds the runs of hand-out 1"):
                await replica.run_batch([(BENCH, ids[1])], 0)
            return await replica.run_batch([(BENCH, i) for i in ids], 1)
        finally:
            await replica.close()

    out = asyncio.run(steps())
    assert engine.loaded == [str(tmp_path / "checkpoint-10")]
    assert sorted(rec.id for _, rec in out) == sorted(ids)
    assert {rec.fingerprint for _, rec in out} == {nxt.fingerprint}


def test_a_replica_whose_engine_cannot_reload_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalkit.scale.replica import Replica

    write_set(tmp_path, 1)
    plan = plan_run(run_config(tmp_path))
    monkeypatch.setattr(components, "make_engine", lambda plan: Counting())
    replica = Replica([(plan, str(tmp_path / "r"))], None, "r0")

    async def load() -> None:
        try:
            await replica.load_weights(str(tmp_path))
        finally:
            await replica.close()

    with pytest.raises(TypeError, match="replica r0's engine cannot load weights in place"):
        asyncio.run(load())


def test_a_variant_run_written_before_it_was_named_name_variant_resumes_under_its_name(
    tmp_path: Path,
) -> None:
    import json

    from evalkit.manifest import ResultConfig
    from tests.fixtures.bench import official

    official.videomme(tmp_path / "data" / "Video-MME")
    cfg = RunConfig(model="m", bench=["Video-MME:with_subtitles"], data_root=str(tmp_path / "data"))
    assert plan_run(cfg).names() == ["Video-MME:with_subtitles"]  # a new run's name
    # the same run as evalkit wrote it before: the variant keyed by the bare name
    doc = json.dumps(plan_run(cfg).manifest.dump()).replace(
        '"Video-MME:with_subtitles"', '"Video-MME"'
    )
    old = json.loads(doc)
    old["fingerprint"] = ResultConfig.model_validate(old["result_config"]).fingerprint()
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "config.json").write_text(json.dumps(old))
    resumed = plan_run(cfg.model_copy(update={"resume": str(tmp_path / "old")}))
    assert resumed.names() == ["Video-MME"] and resumed.fingerprint == old["fingerprint"]
