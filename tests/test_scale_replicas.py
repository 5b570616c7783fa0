"""Replicas on a local Ray instance: real vLLM CPU engines, tiny model, generated videos.

Exactly-once into one run directory: with two replicas, with one replica killed by its
pid mid-run, and across a resume with another replica count (heavy).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm")
pytest.importorskip("ray")

from evalkit.engines._watchdog import _is_tracker
from evalkit.run.config import RunConfig
from evalkit.scale.driver import Snapshot, run_replicas
from evalkit.tiny_checkpoint import build_tiny_model
from tests._engine_env import engine_env, write_index_video_set

pytestmark = pytest.mark.heavy

N_VIDEOS, PER_VIDEO = 3, 4  # 12 samples
BATCH = 2
ENGINE = {
    "dtype": "float32",
    "max_num_batched_tokens": 64,
    "max_num_seqs": 8,
    "max_model_len": 2048,
    "enforce_eager": True,
}
FRAMES = {"fps": 2, "max_frames": 8, "max_pixels": 112 * 84, "min_pixels": 28 * 28 * 4}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("replicas")
    build_tiny_model(root / "model", "qwen2_5_vl", seed=0)
    return write_index_video_set(root, N_VIDEOS, PER_VIDEO, lambda v: 32 + 16 * v, "replicas")


@pytest.fixture(scope="module")
def ray_instance(workdir: Path) -> Iterator[Any]:
    """A local Ray instance whose workers inherit the engine environment."""
    import ray

    env = {**engine_env(), "EVALKIT_CACHE": str(workdir / "cache"), "RAY_AUTH_MODE": "disabled"}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        for key in ("VLLM_CACHE_ROOT", "HF_HOME", "XDG_CACHE_HOME"):
            os.makedirs(env[key], exist_ok=True)
        ray.init(address="local", num_cpus=2, include_dashboard=False)
        try:
            yield ray
        finally:
            ray.shutdown()


def config(workdir: Path, replicas: int, **more: Any) -> RunConfig:
    return RunConfig(
        model=str(workdir / "model"),
        data=str(workdir / "set.jsonl"),
        video_root=str(workdir / "videos"),
        engine="vllm",
        engine_options=ENGINE,
        frames=FRAMES,
        max_tokens=8,
        runs_dir=str(workdir / "runs"),
        replicas=replicas,
        **more,
    )


def records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / "set.jsonl").read_text().splitlines()]


def all_ids() -> set[str]:
    return {f"replicas/{v * 100 + q}" for v in range(N_VIDEOS) for q in range(PER_VIDEO)}


def evalkit_run(workdir: Path, run_id: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """`evalkit run` in a subprocess (with ``--replicas``: a Ray instance of its own)."""
    env = {**os.environ, **engine_env(), "EVALKIT_CACHE": str(workdir / "cache")}
    env["RAY_AUTH_MODE"] = "disabled"
    engine = [f"--engine-opt={k}={json.dumps(v)}" for k, v in ENGINE.items()]
    frames = [f"--frames-{k.replace('_', '-')}={v}" for k, v in FRAMES.items()]
    cmd = [sys.executable, "-m", "evalkit", "run", "--model", str(workdir / "model")]
    cmd += ["--data", str(workdir / "set.jsonl"), "--video-root", str(workdir / "videos")]
    cmd += [*engine, *frames, "--max-tokens", "8", "--runs-dir", str(workdir / "runs")]
    cmd += ["--run-id", run_id, "--no-progress", *extra]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=800)
    assert out.returncode == 0, out.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def two(workdir: Path) -> Path:
    """`evalkit run --replicas 2`, once for the module: its run directory."""
    out = evalkit_run(workdir, "two", "--replicas", "2", "--cpus-per-replica", "1")
    assert f"set: {len(all_ids())} done, 0 failed" in out.stdout
    return workdir / "runs" / "two"


@pytest.mark.timeout(1200)
def test_two_replicas_record_every_sample_once_with_the_scores_of_one(
    workdir: Path, two: Path
) -> None:
    got = records(two)
    assert sorted(r["id"] for r in got) == sorted(all_ids())  # each once
    assert {r["replica"] for r in got} == {"r0", "r1"}
    assert all(r["status"] == "ok" for r in got), [r for r in got if r["status"] != "ok"][:1]

    evalkit_run(workdir, "one")  # today's single-engine path, in process
    one = {r["id"]: r for r in records(workdir / "runs" / "one")}
    for r in got:  # greedy: the same text, hence the same verdict, on either path
        assert (r["prediction"], r["score"]) == (one[r["id"]]["prediction"], one[r["id"]]["score"])
    assert "replica" not in next(iter(one.values()))
    frames = json.loads((two / "frames.json").read_text())
    assert (
        frames["set"]["videos"]
        == json.loads((workdir / "runs" / "one" / "frames.json").read_text())["set"]["videos"]
    )


@pytest.mark.timeout(900)
def test_killing_a_replica_mid_run_still_records_every_sample_once(
    workdir: Path, ray_instance: Any
) -> None:
    import psutil

    orphans: list[psutil.Process] = []
    seen: list[Snapshot] = []

    def kill_r1(snap: Snapshot) -> None:
        seen.append(snap)
        r1 = snap.replicas["r1"]
        # while it holds samples: a replica killed with none left to do goes unnoticed
        # until the end (frame counts), and nobody has to take its work over
        if snap.accepted >= 2 and r1.alive and r1.leased and not orphans and r1.pid:
            orphans.extend(psutil.Process(r1.pid).children(recursive=True))
            orphans.append(psutil.Process(r1.pid))
            os.kill(r1.pid, signal.SIGKILL)

    try:
        result = run_replicas(config(workdir, 2, run_id="killed"), kill_r1, batch_size=BATCH)
    finally:
        for proc in orphans[:-1]:  # the killed actor's engine processes, if still there
            if proc.is_running() and not _is_tracker(proc):
                proc.kill()  # (its resource tracker unlinks their semaphores once they go)
    assert orphans, "the run ended before a replica could be killed"
    got = records(result.path)
    ids = [r["id"] for r in got]
    assert sorted(ids) == sorted(all_ids()) and len(ids) == len(set(ids))
    last = seen[-1].replicas
    assert not last["r1"].alive and last["r0"].alive
    after_kill = [r for r in got[2:] if r["replica"] == "r0"]
    assert after_kill, "the surviving replica should have taken over the work"


@pytest.mark.timeout(900)
def test_a_run_of_two_replicas_resumes_with_one_without_redoing_anything(
    workdir: Path, two: Path, ray_instance: Any
) -> None:
    # a run of two replicas stopped after 4 records: the store as a stop leaves it (how the
    # driver stops mid-run is tests/test_scale_driver.py's; a second start of two engines
    # here would only cost the suite a minute)
    run = workdir / "runs" / "resumed"
    shutil.copytree(two, run)
    kept = (run / "set.jsonl").read_text().splitlines()[:4]
    (run / "set.jsonl").write_text("\n".join(kept) + "\n")
    first = [r["id"] for r in records(run)]
    assert len(first) == 4 < len(all_ids())

    result = run_replicas(config(workdir, 1, resume=str(run)), batch_size=BATCH)
    got = records(run)
    ids = [r["id"] for r in got]
    assert ids[: len(first)] == first and len(ids) == len(set(ids)) == len(all_ids())
    assert set(ids[len(first) :]) == all_ids() - set(first)  # only the missing ones
    assert {r["replica"] for r in got[len(first) :]} == {"r0"}
    st = result.stats["set"]
    assert (st.skipped, st.completed) == (len(first), len(all_ids()) - len(first))
    amendments = (run / "config.amendments").read_text()
    assert "replicas" in amendments and "another configuration" not in amendments
