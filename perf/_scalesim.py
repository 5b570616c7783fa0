"""A discrete-event simulation of N replicas working through a list of jobs.

Three policies, each returning the wall time and every replica's busy time:

- ``dynamic``: the driver hands out small batches as replicas free up, videos in order of
  expected cost (longest first), a replica staying on the video it was given while that
  video has questions left (video affinity), and a replica with nothing unstarted left
  taking from the open video with most work remaining (nobody starves). The choice of
  video is the pure function :func:`pick_video`.
- ``static_interleaved``: torchrun with ``DistributedSampler(shuffle=False)``: sample i
  goes to rank ``i % world`` in dataset order; the sampler pads the list by repeating its
  head until it divides by the world size (``drop_last=False``), so the padded samples are
  real extra work (torch/utils/data/distributed.py, ``DistributedSampler.__iter__``).
- ``static_chunks``: contiguous equal chunks of the dataset, one per rank.
- ``static_per_task``: lmms-eval's sharding: each benchmark interleaved on its own, the
  shares pooled per rank, short ranks padded with their last request.

A job's cost is in seconds; total work counts every job once (padding excluded), so
efficiency = total work / (replicas x wall) is comparable across policies.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Job:
    """One unit of work: a question (evaluation) or a video (cache build)."""

    id: str
    video: str
    cost_s: float


@dataclass(frozen=True)
class Outcome:
    """What one policy did with one replica count."""

    policy: str
    replicas: int
    wall_s: float
    busy_s: tuple[float, ...]
    total_work_s: float

    @property
    def efficiency(self) -> float:
        """Useful work over replica-time (1.0 = every replica busy with new work to the end)."""
        return self.total_work_s / (self.replicas * self.wall_s) if self.wall_s > 0 else 1.0


def _outcome(policy: str, loads: Sequence[float], jobs: Sequence[Job]) -> Outcome:
    total = sum(j.cost_s for j in jobs)
    return Outcome(policy, len(loads), max(loads, default=0.0), tuple(loads), total)


def static_interleaved(jobs: Sequence[Job], world: int, *, pad: bool = True) -> Outcome:
    """DistributedSampler-style shards: rank r runs jobs r, r+world, ... (padded like torch)."""
    order = list(jobs)
    if pad and order and len(order) % world:
        extra = world - len(order) % world
        order += (order * (extra // len(order) + 1))[:extra]
    loads = [0.0] * world
    for i, job in enumerate(order):
        loads[i % world] += job.cost_s
    return _outcome("static_interleaved", loads, jobs)


def static_chunks(jobs: Sequence[Job], world: int) -> Outcome:
    """Contiguous chunks of ceil(n / world) jobs, one per rank, in dataset order."""
    size = -(-len(jobs) // world) if jobs else 0
    loads = [sum(j.cost_s for j in jobs[r * size : (r + 1) * size]) for r in range(world)]
    return _outcome("static_chunks", loads, jobs)


def static_per_task(jobs: Sequence[Job], world: int) -> Outcome:
    """lmms-eval under torchrun/accelerate: each benchmark sharded ``i % world``, every
    benchmark's share pooled on its rank, short ranks padded with copies of their last
    request up to the longest rank's count (lmms_eval/utils.py ``create_iterator``,
    lmms_eval/evaluator.py ``evaluate``: ``padding_requests``). The benchmark is the part
    of a job's video id before the first ``/``."""
    per: dict[str, list[Job]] = {}
    for j in jobs:
        per.setdefault(j.video.split("/", 1)[0], []).append(j)
    ranks: list[list[Job]] = [[] for _ in range(world)]
    pads = [0] * world
    for part in per.values():
        shares = [part[r::world] for r in range(world)]
        for r, share in enumerate(shares):
            ranks[r] += share
            pads[r] += max(len(x) for x in shares) - len(share)
    loads = [
        sum(j.cost_s for j in mine) + (pad * mine[-1].cost_s if mine else 0.0)
        for mine, pad in zip(ranks, pads, strict=True)
    ]
    return _outcome("static_per_task", loads, jobs)


def pick_video(
    remaining: Mapping[str, float], unstarted: str | None, last_video: str | None
) -> str | None:
    """The video a free replica takes its next batch from.

    ``remaining``: work left per video already started (videos with nothing left absent);
    ``unstarted``: the costliest video nobody has started; ``last_video``: the replica's
    previous video. Affinity first, then the longest unstarted video, then the open video
    with most work left (so a replica never idles while work remains).
    """
    if last_video is not None and last_video in remaining:
        return last_video
    if unstarted is not None:
        return unstarted
    if remaining:
        return max(remaining, key=lambda v: (remaining[v], v))
    return None


@dataclass
class _Queue:
    """The driver's pending work: videos longest first, each video's jobs longest first."""

    order: deque[str]
    jobs: dict[str, deque[Job]]
    remaining: dict[str, float]  # started videos with jobs left

    @classmethod
    def of(cls, jobs: Sequence[Job]) -> _Queue:
        per: dict[str, list[Job]] = {}
        for j in jobs:
            per.setdefault(j.video, []).append(j)
        cost = {v: sum(j.cost_s for j in js) for v, js in per.items()}
        order = deque(sorted(per, key=lambda v: (-cost[v], v)))
        return cls(
            order, {v: deque(sorted(js, key=lambda j: -j.cost_s)) for v, js in per.items()}, {}
        )

    def take(self, last_video: str | None, batch: int, affinity: bool) -> list[Job]:
        video = pick_video(
            self.remaining, self.order[0] if self.order else None, last_video if affinity else None
        )
        if video is None:
            return []
        if self.order and video == self.order[0]:
            self.order.popleft()
            self.remaining[video] = sum(j.cost_s for j in self.jobs[video])
        pending = self.jobs[video]
        out = [pending.popleft() for _ in range(min(batch, len(pending)))]
        self.remaining[video] -= sum(j.cost_s for j in out)
        if not pending:
            del self.remaining[video]
        return out


HandOut = Callable[[Sequence[Job], int], Callable[[int, str | None], list[Job]]]
"""A queue factory: (jobs, batch) -> take(replica, last_video) -> next batch ([] = done).
Lets the simulation drive another queue implementation (e.g. ``evalkit.scale.queue``)."""


def default_hand_out(affinity: bool = True) -> HandOut:
    """The reference queue of this module as a :data:`HandOut`."""

    def make(jobs: Sequence[Job], batch: int) -> Callable[[int, str | None], list[Job]]:
        q = _Queue.of(jobs)
        return lambda _replica, last: q.take(last, batch, affinity)

    return make


def dynamic(
    jobs: Sequence[Job],
    replicas: int,
    *,
    batch: int = 4,
    handout_s: float = 0.0,
    hand_out: HandOut | None = None,
) -> Outcome:
    """Replicas ask for a batch whenever they are free; ``handout_s`` is the driver's
    round-trip per batch (the replica waits for it, so it counts in the wall time)."""
    take = (hand_out or default_hand_out())(jobs, batch)
    free: list[tuple[float, int]] = [(0.0, r) for r in range(replicas)]
    last: list[str | None] = [None] * replicas
    busy = [0.0] * replicas
    end = [0.0] * replicas
    while free:
        now, r = heapq.heappop(free)
        got = take(r, last[r])
        if not got:
            end[r] = now
            continue
        work = sum(j.cost_s for j in got)
        busy[r] += work
        last[r] = got[-1].video
        heapq.heappush(free, (now + handout_s + work, r))
    wall = max(end, default=0.0)
    return Outcome("dynamic", replicas, wall, tuple(busy), sum(j.cost_s for j in jobs))


# -- the workload ---------------------------------------------------------------------


@dataclass(frozen=True)
class Family:
    """Videos like one benchmark's: how many, questions per video, duration range."""

    benchmark: str
    name: str
    videos: int
    questions: int
    minutes: tuple[float, float]


# Shaped on the benchmarks' published statistics (their papers / dataset cards):
# LVBench: 103 videos averaging 68 min (we draw 30-120 min), 1,549 questions (~15 each);
# Video-MME: 900 videos, 3 questions each, 300 short (< 2 min), 300 medium (4-15 min),
# 300 long (30-60 min); MVBench: 4,000 questions, one per clip, clips of seconds to tens
# of seconds (we draw 10 s - 3 min). The datasets follow one another in that order, each
# video's questions contiguous, as evaluation sets are stored.
MIX = (
    Family("lvbench", "lvbench_like", 103, 15, (30.0, 120.0)),
    Family("videomme", "videomme_short_like", 300, 3, (10 / 60, 2.0)),
    Family("videomme", "videomme_medium_like", 300, 3, (4.0, 15.0)),
    Family("videomme", "videomme_long_like", 300, 3, (30.0, 60.0)),
    Family("mvbench", "mvbench_like", 4000, 1, (10 / 60, 3.0)),
)


@dataclass(frozen=True)
class Video:
    """One video of the workload."""

    id: str
    seconds: float
    questions: int


def videos(mix: Sequence[Family] = MIX, seed: int = 0) -> list[Video]:
    """The workload's videos in dataset order (durations drawn uniformly per family)."""
    rng = random.Random(seed)
    return [
        Video(f"{f.benchmark}/{f.name}/{i}", 60 * rng.uniform(*f.minutes), f.questions)
        for f in mix
        for i in range(f.videos)
    ]


def question_jobs(vids: Sequence[Video], cost: Callable[[float], float]) -> list[Job]:
    """One job per question, in dataset order; ``cost(video seconds)`` per question."""
    return [Job(f"{v.id}#{q}", v.id, cost(v.seconds)) for v in vids for q in range(v.questions)]


def video_jobs(vids: Sequence[Video], cost: Callable[[float], float]) -> list[Job]:
    """One job per video (the cache build), in dataset order."""
    return [Job(v.id, v.id, cost(v.seconds)) for v in vids]
