"""The replica simulation of perf/scale.py: dynamic longest-first hand-out vs static shards."""

from __future__ import annotations

import importlib.util
import itertools
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest


def _load() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "perf" / "_scalesim.py"
    spec = importlib.util.spec_from_file_location("_scalesim", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["_scalesim"] = mod  # dataclasses resolve their module by name
    spec.loader.exec_module(mod)
    return mod


sim = _load()
Job = sim.Job


def _jobs(costs: list[float], per_video: int = 1) -> list:
    return [Job(f"q{i}", f"v{i // per_video}", c) for i, c in enumerate(costs)]


def _opt(costs: list[float], m: int) -> float:
    """The best makespan over every assignment of jobs to m machines (brute force)."""
    best = float("inf")
    for assign in itertools.product(range(m), repeat=len(costs)):
        loads = [0.0] * m
        for c, r in zip(costs, assign, strict=True):
            loads[r] += c
        best = min(best, max(loads))
    return best


def test_one_replica_every_policy_takes_the_total_work() -> None:
    jobs = _jobs([5.0, 1.0, 3.0, 2.0, 8.0], per_video=2)
    walls = {sim.dynamic(jobs, 1).wall_s, sim.static_interleaved(jobs, 1).wall_s}
    walls.add(sim.static_chunks(jobs, 1).wall_s)
    assert walls == {19.0}


def test_equal_costs_dividing_evenly_make_the_policies_equal() -> None:
    jobs = _jobs([2.0] * 24, per_video=3)
    for world in (2, 4, 8):
        expected = 2.0 * 24 / world
        assert sim.dynamic(jobs, world, batch=3).wall_s == pytest.approx(expected)
        assert sim.static_interleaved(jobs, world).wall_s == pytest.approx(expected)
        assert sim.static_chunks(jobs, world).wall_s == pytest.approx(expected)
        assert sim.dynamic(jobs, world, batch=3).efficiency == pytest.approx(1.0)


def test_a_long_tail_makes_static_shards_slower() -> None:
    # one hour-long video's 8 questions (60 s each) sit together among 56 short ones (1 s)
    costs = [1.0] * 20 + [60.0] * 8 + [1.0] * 36
    jobs = _jobs(costs)
    dyn = sim.dynamic(jobs, 8, batch=1)
    assert dyn.wall_s == pytest.approx(60 + 7)  # 56 s of short work spread over 8 replicas
    # interleaved: jobs 20..27 land on ranks 4,5,6,7,0,1,2,3: each rank one long job, but
    # chunks of 8 put all eight long jobs on ranks 2 and 3 (jobs 16..23 and 24..31)
    assert sim.static_interleaved(jobs, 8).wall_s == pytest.approx(60 + 7)
    assert sim.static_chunks(jobs, 8).wall_s == pytest.approx(4 * 60 + 4)
    skew = _jobs([60.0 if i % 8 == 0 else 1.0 for i in range(64)])
    assert sim.static_interleaved(skew, 8).wall_s == pytest.approx(8 * 60)  # all on rank 0
    assert sim.dynamic(skew, 8, batch=1).wall_s == pytest.approx(67)  # 8 long + 56 s spread


def test_lmms_eval_shards_each_benchmark_and_pads_with_the_last_request() -> None:
    # benchmark a: 3 jobs -> rank 0 gets a0, a2; rank 1 gets a1 and one pad
    # benchmark b: 2 jobs -> one each; rank 1's pooled list ends with b1 (cost 4): its pad
    jobs = [Job("a0", "a/v0", 5.0), Job("a1", "a/v1", 1.0), Job("a2", "a/v2", 2.0)]
    jobs += [Job("b0", "b/v0", 1.0), Job("b1", "b/v1", 4.0)]
    out = sim.static_per_task(jobs, 2)
    assert out.busy_s == (5.0 + 2.0 + 1.0, 1.0 + 4.0 + 4.0)
    assert out.total_work_s == 13.0


def test_padding_repeats_the_head_like_distributed_sampler() -> None:
    # 5 jobs on 4 ranks: torch pads to 8 with jobs 0,1,2 -> rank 0 runs jobs 0 and 4 (1+5),
    # rank 1 jobs 1 and 0 (2+1), rank 2 jobs 2 and 1, rank 3 jobs 3 and 2
    jobs = _jobs([1.0, 2.0, 3.0, 4.0, 5.0])
    out = sim.static_interleaved(jobs, 4)
    assert out.busy_s == (6.0, 3.0, 5.0, 7.0)
    assert out.total_work_s == 15.0  # padding is not useful work
    assert sim.static_interleaved(jobs, 4, pad=False).busy_s == (6.0, 2.0, 3.0, 4.0)


@pytest.mark.parametrize("seed", range(12))
def test_dynamic_one_at_a_time_stays_within_the_lpt_bound(seed: int) -> None:
    rng = random.Random(seed)
    m = rng.choice([2, 3])
    costs = [float(rng.randint(1, 20)) for _ in range(rng.randint(m + 1, 8))]
    opt = _opt(costs, m)
    wall = sim.dynamic(_jobs(costs), m, batch=1).wall_s
    assert opt <= wall <= (4 / 3 - 1 / (3 * m)) * opt + 1e-9


def _recorded(jobs: list, replicas: int, batch: int, affinity: bool = True) -> list:
    """(replica, job ids) of every hand-out, in the order they happened."""
    order: list[tuple[int, list[str]]] = []
    base = sim.default_hand_out(affinity)

    def recording(jobs, batch):
        take = base(jobs, batch)

        def wrapped(replica, last):
            got = take(replica, last)
            order.append((replica, [j.id for j in got]))
            return got

        return wrapped

    sim.dynamic(jobs, replicas, batch=batch, hand_out=recording)
    return order


def test_the_longest_video_goes_first_and_no_replica_idles_while_work_remains() -> None:
    jobs = [Job("s0", "short", 1.0), Job("l0", "long", 5.0), Job("l1", "long", 4.0)]
    jobs += [Job("l2", "long", 3.0), Job("m0", "mid", 2.0)]
    order = _recorded(jobs, 2, batch=2)
    assert order[0] == (0, ["l0", "l1"])  # longest video first, its longest questions first
    assert order[1] == (1, ["m0"])  # the next unstarted video to the other replica
    assert order[2] == (1, ["s0"])  # replica 1 frees first (2 s)
    # at 3 s nothing is unstarted: replica 1 takes long's last question instead of idling
    # until replica 0 is done at 9 s
    assert order[3] == (1, ["l2"])


def test_a_replica_stays_on_its_video_while_it_has_questions_left() -> None:
    jobs = [Job(f"a{i}", "a", 2.0) for i in range(4)] + [Job(f"b{i}", "b", 1.5) for i in range(4)]
    jobs.append(Job("c0", "c", 1.0))
    # replica 1 frees first (3 s): with affinity it goes on with b, without it takes c
    assert _recorded(jobs, 2, batch=2)[2] == (1, ["b2", "b3"])
    assert _recorded(jobs, 2, batch=2, affinity=False)[2] == (1, ["c0"])


def test_a_free_replica_takes_from_the_open_video_with_most_work_left() -> None:
    assert sim.pick_video({"a": 3.0, "b": 9.0}, None, None) == "b"
    assert sim.pick_video({"a": 3.0, "b": 9.0}, None, "a") == "a"
    assert sim.pick_video({"a": 3.0}, "c", "x") == "c"
    assert sim.pick_video({}, None, "a") is None


def test_the_workload_keeps_each_videos_questions_together() -> None:
    vids = sim.videos(seed=1)
    jobs = sim.question_jobs(vids, lambda s: s)
    assert len(jobs) == sum(f.videos * f.questions for f in sim.MIX)
    runs = [k for k, _ in itertools.groupby(j.video for j in jobs)]
    assert len(runs) == len(vids)  # one contiguous run per video
    lv = [v for v in vids if v.id.startswith("lvbench/")]
    assert all(30 * 60 <= v.seconds <= 120 * 60 for v in lv)


def _load_script() -> ModuleType:
    perf = Path(__file__).resolve().parents[1] / "perf"
    sys.path.insert(0, str(perf))  # the script imports its helper modules by name
    try:
        spec = importlib.util.spec_from_file_location("perf_scale", perf / "scale.py")
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(perf))
    return mod


MODEL = {  # a cost model of the shape perf/scale.py measures (seconds)
    "cost_model_fixed_s": 0.0003,
    "cost_model_s_per_frame": 0.00024,
    "cache_cost_model_fixed_s": 0.04,
    "cache_cost_model_s_per_video_minute": 5.7,
}


def test_the_script_reports_every_policy_at_8_and_64_replicas() -> None:
    res = _load_script().simulate(MODEL, counts=(8, 64), batch=4, handout_s=0.0, seed=0)
    for prefix in ("sim", "cache_sim"):
        for n in (8, 64):
            dyn, static = res[f"{prefix}_{n}_dynamic_wall_s"], res[f"{prefix}_{n}_static_wall_s"]
            assert res[f"{prefix}_{n}_dynamic_over_static_ratio"] == pytest.approx(
                static / dyn, rel=1e-3
            )
            ideal = res[f"{prefix}_{n}_ideal_wall_s"]
            assert ideal <= dyn <= static  # the simulated hand-out beats torchrun's shards
            assert res[f"{prefix}_{n}_dynamic_efficiency_ratio"] == pytest.approx(
                ideal / dyn, rel=1e-3
            )
    # an LVBench-like video's cache build alone (2 h at most) bounds the 64-worker build
    assert res["cache_sim_64_dynamic_wall_s"] >= res["cache_sim_longest_video_s"]


def _has_queue() -> bool:
    try:
        return importlib.util.find_spec("evalkit.scale.queue") is not None
    except ModuleNotFoundError:  # no evalkit.scale at all
        return False


@pytest.mark.skipif(not _has_queue(), reason="evalkit.scale.queue not merged yet")
def test_the_simulation_can_drive_the_real_work_queue() -> None:
    script = _load_script()
    hand_out = script.real_queue()
    assert hand_out is not None
    jobs = sim.question_jobs(sim.videos(seed=3)[:300], lambda s: 1 + s / 600)
    seen: list[str] = []

    def recording(jobs_, batch):  # every job handed out exactly once
        take = hand_out(jobs_, batch)

        def wrapped(replica, last):
            got = take(replica, last)
            seen.extend(j.id for j in got)
            return got

        return wrapped

    out = sim.dynamic(jobs, 8, batch=4, hand_out=recording)
    assert sorted(seen) == sorted(j.id for j in jobs)
    assert out.wall_s <= sim.static_interleaved(jobs, 8).wall_s


@pytest.mark.heavy
@pytest.mark.timeout(300)
def test_perf_scale_quick_prints_the_figures_as_json(tmp_path: Path) -> None:
    import json
    import os
    import subprocess

    script = Path(__file__).resolve().parents[1] / "perf" / "scale.py"
    argv = [sys.executable, str(script), "--quick", "--no-replicas", "--out", str(tmp_path)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=os.environ, check=True)
    res = json.loads(proc.stdout)
    assert res["replicas_status"] == "skipped (--no-replicas)"
    assert res["cost_model_s_per_frame"] > 0
    assert res["sim_64_dynamic_over_static_ratio"] >= 1.0
