"""Rows of a batch across data-parallel ranks, balanced by token count.

Every rank must run the same number of micro-batch forwards (each one is a sequence of FSDP
collectives), so the partitions have equal sizes: a batch that does not divide evenly is
evened out with zero-weight filler rows (:func:`even_out`), never by cutting a row.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence


def balanced_partitions(weights: Sequence[int | float], k: int) -> list[list[int]]:
    """Indices of ``weights`` in ``k`` parts whose sizes differ by at most one and whose
    weight sums are close (greedy longest-processing-time with a size cap).

    Rows go heaviest first to the lightest part that still has room (ties: the lower
    rank), so the result is deterministic. Within a part the indices are ascending (the
    batch's own order). verl's ``get_seqlen_balanced_partitions`` does the same job with
    Karmarkar-Karp; greedy is within 4/3 of the optimum and enough for a few rows a rank.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    n = len(weights)
    if n < k:
        raise ValueError(f"{n} rows cannot fill {k} ranks (each rank needs at least one)")
    caps = [n // k + (1 if r < n % k else 0) for r in range(k)]
    heap = [(0.0, r) for r in range(k)]
    parts: list[list[int]] = [[] for _ in range(k)]
    order = sorted(range(n), key=lambda i: (-float(weights[i]), i))
    for i in order:
        skipped = []
        while True:
            load, r = heapq.heappop(heap)
            if len(parts[r]) < caps[r]:
                break
            skipped.append((load, r))
        parts[r].append(i)
        heapq.heappush(heap, (load + float(weights[i]), r))
        for item in skipped:
            heapq.heappush(heap, item)
    return [sorted(p) for p in parts]


def even_out(parts: list[list[int]]) -> list[list[int | None]]:
    """Each part padded to the longest with ``None`` (a zero-weight filler row goes there)."""
    size = max(len(p) for p in parts)
    return [list(p) + [None] * (size - len(p)) for p in parts]
