"""Scale-out figures: replica throughput, and simulated 8/64-replica evaluation and cache build.

Prints progress on stderr and ONE JSON object last on stdout.

(a) ``evalkit run`` with 1 engine and with ``--replicas 2`` (the tiny random Qwen2.5-VL on
    vLLM's CPU engine, the same ad-hoc data set and a cache built beforehand), throughput
    from the records' own stamps (first IO start to last finish, engine start-up
    excluded), the cores' utilisation over each run (psutil), and the Ray start-up and
    driver overhead (``evalkit.testing.echo_replica.measure_overhead``). Needs
    ``evalkit.scale``; without it the JSON says ``"replicas_status": "evalkit.scale not
    available"``.
(b) A discrete-event simulation (perf/_scalesim.py) of 8 and 64 replicas on a
    benchmark-shaped workload (LVBench-like hour-long videos among many short clips),
    each question costing what the measured cost model (perf/_scalecost.py) says for its
    frame count: dynamic longest-first hand-out in small batches with video affinity vs
    torchrun-style static shards (DistributedSampler, i % world over the pooled data set;
    and lmms-eval's: each benchmark i % world, pooled per rank) and contiguous chunks.
    ``*_dynamic_over_static_ratio`` = static wall / dynamic wall (> 1: dynamic is faster);
    efficiency = total work / (replicas x wall).
(c) The same for the cache build: one task per video, costing the measured decode
    seconds per video-minute, handed out longest first vs static shards of the videos.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

PERF = Path(__file__).resolve().parent
sys.path.insert(0, str(PERF))

import _scalecost as cost  # noqa: E402
import _scalesim as sim  # noqa: E402
from _scalecost import log  # noqa: E402


def real_queue() -> sim.HandOut | None:
    """``evalkit.scale.queue.WorkQueue`` as the simulation's hand-out, when it exists."""
    try:
        from evalkit.scale.queue import WorkItem, WorkQueue
    except ImportError:
        return None

    def make(jobs: Any, batch: int) -> Any:
        by_key = {("sim", j.id): j for j in jobs}
        queue = WorkQueue([WorkItem(k, j.cost_s, j.video) for k, j in by_key.items()], batch)

        def take(replica: int, _last: str | None) -> list[sim.Job]:
            lease = queue.lease(f"r{replica}")
            if lease is None:
                return []
            for key in lease.keys:  # the simulation runs the batch to the end at once
                queue.complete(lease.id, key)
            return [by_key[k] for k in lease.keys]

        return take

    return make


def _policies(
    jobs: list[sim.Job], n: int, batch: int, handout_s: float, hand_out: Any
) -> dict[str, sim.Outcome]:
    return {
        "dynamic": sim.dynamic(jobs, n, batch=batch, handout_s=handout_s, hand_out=hand_out),
        "static": sim.static_interleaved(jobs, n),
        "static_per_task": sim.static_per_task(jobs, n),
        "chunks": sim.static_chunks(jobs, n),
    }


def _figures(prefix: str, n: int, out: dict[str, sim.Outcome]) -> dict[str, Any]:
    dyn, static, chunks = out["dynamic"], out["static"], out["chunks"]
    per_task = out["static_per_task"]
    return {
        f"{prefix}_{n}_dynamic_wall_s": round(dyn.wall_s, 5),
        f"{prefix}_{n}_static_wall_s": round(static.wall_s, 5),
        f"{prefix}_{n}_chunks_wall_s": round(chunks.wall_s, 5),
        f"{prefix}_{n}_static_per_task_wall_s": round(per_task.wall_s, 5),
        f"{prefix}_{n}_ideal_wall_s": round(dyn.total_work_s / n, 5),
        f"{prefix}_{n}_dynamic_over_static_ratio": round(static.wall_s / dyn.wall_s, 4),
        f"{prefix}_{n}_dynamic_over_chunks_ratio": round(chunks.wall_s / dyn.wall_s, 4),
        f"{prefix}_{n}_dynamic_over_static_per_task_ratio": round(per_task.wall_s / dyn.wall_s, 4),
        f"{prefix}_{n}_dynamic_efficiency_ratio": round(dyn.efficiency, 4),
        f"{prefix}_{n}_static_efficiency_ratio": round(static.efficiency, 4),
        f"{prefix}_{n}_chunks_efficiency_ratio": round(chunks.efficiency, 4),
        f"{prefix}_{n}_static_per_task_efficiency_ratio": round(per_task.efficiency, 4),
    }


def simulate(
    model: dict[str, Any], *, counts: tuple[int, ...], batch: int, handout_s: float, seed: int
) -> dict[str, Any]:
    """(b) and (c): every policy at every replica count, on the seeded workload."""
    vids = sim.videos(seed=seed)
    questions = sim.question_jobs(vids, cost.sample_cost(model))
    builds = sim.video_jobs(vids, cost.video_cost(model))
    hand_out = real_queue()
    res: dict[str, Any] = {
        "sim_queue": "evalkit.scale.queue.WorkQueue" if hand_out else "perf/_scalesim.py",
        "sim_workload": {f.name: [f.videos, f.questions, list(f.minutes)] for f in sim.MIX},
        "sim_workload_note": "family: [videos, questions per video, minutes range]",
        "sim_videos": len(vids),
        "sim_questions": len(questions),
        "sim_video_hours": round(sum(v.seconds for v in vids) / 3600, 1),
        "sim_batch_size": batch,
        "sim_handout_s_per_batch": handout_s,
        # seconds of the measured per-question cost (cache load); only ratios carry over
        # to a GPU engine, whose per-question cost also grows with the frames
        "sim_total_work_s": round(sum(j.cost_s for j in questions), 4),
        "sim_longest_question_s": round(max(j.cost_s for j in questions), 4),
        "cache_sim_total_work_s": round(sum(j.cost_s for j in builds), 1),
        "cache_sim_longest_video_s": round(max(j.cost_s for j in builds), 1),
    }
    # A bracket, not a measurement: a GPU engine's per-question cost is mostly prefill,
    # which grows with the visual tokens, i.e. the frames; with no fixed part at all the
    # spread between a 20-frame clip and a 768-frame hour is widest.
    by_frames = sim.question_jobs(vids, lambda secs: float(cost.frames_for(secs)))
    for n in counts:
        res |= _figures("sim", n, _policies(questions, n, batch, handout_s, hand_out))
        bracket = _figures("sim_frames_only", n, _policies(by_frames, n, batch, 0.0, hand_out))
        res |= {k: v for k, v in bracket.items() if k.endswith("_ratio")}
        # the cache build hands out one video per Ray task: affinity is moot
        res |= _figures("cache_sim", n, _policies(builds, n, 1, 0.0, None))
    return res


def parse() -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="short clips, few samples (a test)")
    p.add_argument("--out", type=Path, default=PERF / "out", help="generated clips go here")
    p.add_argument("--batch", type=int, default=4, help="questions per hand-out (dynamic)")
    p.add_argument("--seed", type=int, default=0, help="workload seed")
    p.add_argument(
        "--clip-seconds", default="15,60,120", help="clip lengths the cost model is fitted on"
    )
    p.add_argument("--no-replicas", action="store_true", help="skip (a), the real replicas")
    p.add_argument(
        "--handout-s",
        type=float,
        default=0.0,
        # The measured per-question cost is the cache load (milliseconds), a GPU engine's
        # is seconds: charging the driver's real round trip against the first would
        # compare seconds with milliseconds. The driver's capacity is reported apart.
        help="driver round trip charged per hand-out in the simulation (default 0)",
    )
    args = p.parse_args()
    if args.quick:
        args.clip_seconds = "4,8,16"
    return args


def main() -> None:
    """Measure, simulate, run the replicas, print the JSON."""
    args = parse()
    seconds = [float(x) for x in args.clip_seconds.split(",")]
    res: dict[str, Any] = {"quick": args.quick}
    log("measuring the cost model")
    res |= cost.measure(seconds, (640, 360), args.out, repeats=1 if args.quick else 2)
    replicas: dict[str, Any] = {"replicas_status": "skipped (--no-replicas)"}
    if not args.no_replicas:
        from _scalereplicas import replicas_figures

        replicas = replicas_figures(args.out, quick=args.quick)
    res |= replicas
    log("simulating 8 and 64 replicas")
    res |= simulate(res, counts=(8, 64), batch=args.batch, handout_s=args.handout_s, seed=args.seed)
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
