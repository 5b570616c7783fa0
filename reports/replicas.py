"""The per-replica timeline of a run made by several replicas (``evalkit run --replicas N``).

Each record names the replica that produced it (``replica``). Per replica: its samples
(and how many failed), when it first started and last finished a sample (seconds since
the run's first IO start), how long it was busy (the union of its samples' intervals,
first stamp to last stamp: several samples are in flight at once), and its idle tail: the
run's last finish minus the replica's, i.e. how long it had nothing left to do while
another replica still worked. A short idle tail everywhere is what the longest-first
hand-out is for. Runs whose records name no replica have no such section.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .sections import Section, num
from .timeline import Span, spans

if TYPE_CHECKING:
    from .model import RunReport

NO_REPLICA = "(none)"
"""The lane of records without a replica (e.g. a single-engine run resumed with replicas)."""


@dataclass
class Lane:
    """One replica's share of the run."""

    replica: str
    samples: int
    failed: int
    start_s: float | None = None
    """First IO start, seconds since the run's first IO start (None without timings)."""
    end_s: float | None = None
    """Last stamp of its samples, seconds since the run's first IO start."""
    busy_s: float | None = None
    """Length of the union of its samples' [first stamp, last stamp] intervals."""
    idle_tail_s: float | None = None
    """The run's last stamp minus this replica's."""
    segments: list[tuple[float, float]] = field(default_factory=list, repr=False)
    """The busy union as (start, end) pairs since the run's first IO start (for the plot)."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form (without the plot's segments)."""
        return {
            "replica": self.replica,
            "samples": self.samples,
            "failed": self.failed,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "busy_s": self.busy_s,
            "idle_tail_s": self.idle_tail_s,
        }


def _natural(name: str) -> list[Any]:
    """Sort key: replica-2 before replica-10."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def lanes(run: RunReport) -> list[Lane]:
    """One lane per replica, in natural name order; [] when no record names a replica."""
    records = [r for b in run.benchmarks.values() for r in b.records]
    if not any(r.replica is not None for r in records):
        return []
    out: dict[str, Lane] = {}
    for rec in records:
        name = rec.replica or NO_REPLICA
        lane = out.setdefault(name, Lane(name, 0, 0))
        lane.samples += 1
        lane.failed += rec.status == "failed"
    timed = [s for b in run.benchmarks.values() for s in spans(b.records, b.name)]
    if timed:
        _place(out, timed)
    return sorted(out.values(), key=lambda ln: _natural(ln.replica))


def _place(out: dict[str, Lane], timed: list[Span]) -> None:
    """Fill each lane's times from the spans of its samples."""
    t0 = min(s.io_start for s in timed if s.io_start is not None)
    run_end = max(e for s in timed if (e := s.end) is not None) - t0
    by_replica: dict[str, list[tuple[float, float]]] = {}
    for s in timed:
        if s.io_start is not None and (end := s.end) is not None:
            interval = (s.io_start - t0, end - t0)
            by_replica.setdefault(s.replica or NO_REPLICA, []).append(interval)
    for name, intervals in by_replica.items():
        lane = out[name]
        lane.segments = _union(intervals)
        lane.start_s = lane.segments[0][0]
        lane.end_s = max(b for _, b in lane.segments)
        lane.busy_s = sum(b - a for a, b in lane.segments)
        lane.idle_tail_s = run_end - lane.end_s


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def section(run_lanes: list[Lane]) -> Section:
    """Samples, busy time and idle tail per replica."""
    wall = max((ln.end_s for ln in run_lanes if ln.end_s is not None), default=None)
    rows = [
        [
            ln.replica,
            str(ln.samples),
            str(ln.failed),
            num(ln.start_s, 1),
            num(ln.end_s, 1),
            num(ln.busy_s, 1),
            num(100 * ln.busy_s / wall if wall and ln.busy_s is not None else None, 1),
            num(ln.idle_tail_s, 1),
        ]
        for ln in run_lanes
    ]
    headers = ["replica", "samples", "failed", "first start s", "last end s", "busy s"]
    headers += ["busy %", "idle tail s"]
    tails = [ln.idle_tail_s for ln in run_lanes if ln.idle_tail_s is not None]
    notes = [
        "seconds since the run's first IO start; busy = time with at least one of the "
        "replica's samples in progress; idle tail = the run's last finish minus the "
        "replica's (nothing left for it to do)"
    ]
    if tails and wall:
        notes.append(
            f"{len(run_lanes)} replicas over {wall:.1f} s: idle tail mean "
            f"{sum(tails) / len(tails):.1f} s, longest {max(tails):.1f} s"
        )
    return Section("Per-replica timeline", headers, rows, notes)
