"""The pipeline's stage timeline and engine utilisation, from the recorded timings.

Each record holds wall-clock stamps (``time.time()``): ``io_start``/``io_end`` (cache load
and prompt rendering), ``submitted`` (handed to the engine), ``first_token``, ``finished``.
Stages: IO = io_start..io_end, queued = io_end..submitted (waiting for an engine slot),
prefill = submitted..first_token, decode = first_token..finished. A request is "in the
engine" from submitted to finished.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalkit.records import SampleRecord


@dataclass
class Span:
    """The stamps of one sample (None where the sample never reached that point)."""

    benchmark: str
    id: str
    status: str
    io_start: float | None
    io_end: float | None
    submitted: float | None
    first_token: float | None
    finished: float | None
    output_tokens: int = 0
    replica: str | None = None
    """The replica that ran the sample (runs with ``--replicas``)."""

    @property
    def end(self) -> float | None:
        """The last stamp the sample has."""
        stamps = [self.io_start, self.io_end, self.submitted, self.first_token, self.finished]
        present = [t for t in stamps if t is not None]
        return max(present) if present else None


@dataclass
class Utilisation:
    """How busy the engine was over the wall time of the recorded samples."""

    samples: int
    wall_s: float
    busy_fraction: float
    """Fraction of wall time with at least one request in the engine."""
    mean_in_flight: float
    """Time-averaged number of requests in the engine over the wall time."""
    max_in_flight: int
    samples_per_s: float
    output_tokens_per_s: float
    median_io_s: float | None
    median_queued_s: float | None
    median_prefill_s: float | None
    """Median submitted -> first token (time to first token inside the engine)."""
    median_decode_s: float | None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form."""
        return asdict(self)


def spans(records: list[SampleRecord], benchmark: str) -> list[Span]:
    """Spans of a benchmark's records that have at least a start stamp."""
    out = []
    for rec in records:
        t = rec.timings
        if t.get("io_start") is None:
            continue
        out.append(
            Span(
                benchmark=benchmark,
                id=rec.id,
                status=rec.status,
                io_start=_f(t.get("io_start")),
                io_end=_f(t.get("io_end")),
                submitted=_f(t.get("submitted")),
                first_token=_f(t.get("first_token")),
                finished=_f(t.get("finished")),
                output_tokens=(rec.tokens.output if rec.tokens else None) or 0,
                replica=rec.replica,
            )
        )
    return out


def _f(v: float | None) -> float | None:
    return None if v is None else float(v)


def in_engine(spans_: list[Span]) -> list[tuple[float, float]]:
    """(submitted, finished) intervals of requests that reached the engine and finished."""
    return [
        (s.submitted, s.finished)
        for s in spans_
        if s.submitted is not None and s.finished is not None and s.finished >= s.submitted
    ]


def occupancy(intervals: list[tuple[float, float]]) -> list[tuple[float, int]]:
    """Step function (time, requests in the engine from then on), in time order."""
    events = sorted(
        [(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals], key=lambda e: (e[0], e[1])
    )
    out: list[tuple[float, int]] = []
    level = 0
    for t, step in events:
        level += step
        # Stamps a microsecond apart are one instant: keep only its final level, so a
        # request finishing as the next starts shows no spurious spike or dip.
        if out and t - out[-1][0] < 1e-6:
            out[-1] = (out[-1][0], level)
        else:
            out.append((t, level))
    return out


def utilisation(spans_: list[Span]) -> Utilisation | None:
    """Engine utilisation over the wall time of the spans (None without timings)."""
    starts = [s.io_start for s in spans_ if s.io_start is not None]
    ends = [e for s in spans_ if (e := s.end) is not None]
    if not starts or not ends:
        return None
    wall = max(max(ends) - min(starts), 1e-9)
    intervals = in_engine(spans_)
    busy = _union_length(intervals)
    steps = occupancy(intervals)
    return Utilisation(
        samples=len(spans_),
        wall_s=wall,
        busy_fraction=min(busy / wall, 1.0),
        mean_in_flight=sum(b - a for a, b in intervals) / wall,
        max_in_flight=max((lvl for _, lvl in steps), default=0),
        samples_per_s=len(spans_) / wall,
        output_tokens_per_s=sum(s.output_tokens for s in spans_) / wall,
        median_io_s=_median([(s.io_start, s.io_end) for s in spans_]),
        median_queued_s=_median([(s.io_end, s.submitted) for s in spans_]),
        median_prefill_s=_median([(s.submitted, s.first_token) for s in spans_]),
        median_decode_s=_median([(s.first_token, s.finished) for s in spans_]),
    )


def _union_length(intervals: list[tuple[float, float]]) -> float:
    total, cur_a, cur_b = 0.0, None, None
    for a, b in sorted(intervals):
        if cur_b is None or a > cur_b:
            if cur_a is not None and cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_a is not None and cur_b is not None:
        total += cur_b - cur_a
    return total


def _median(pairs: list[tuple[float | None, float | None]]) -> float | None:
    vals = [b - a for a, b in pairs if a is not None and b is not None]
    return statistics.median(vals) if vals else None
