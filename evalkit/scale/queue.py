"""The driver's work queue: leased batches, longest expected cost first, video affinity.

Pure Python (no Ray), so the scheduling decisions are unit-tested on their own. Every
hand-out is a :class:`Lease` with an id; a record is accepted only under a lease that
still holds its sample, and only once per sample (:meth:`WorkQueue.complete`). A replica
presumed dead (:meth:`WorkQueue.fail_replica`) loses its leases: its samples go back to
the queue and are handed out again under new leases, and a late record from the old
lease is refused. Exactly-once is decided here and nowhere else.

Order: groups (samples sharing a video) are handed out longest expected cost first. A
replica that asks gets more of the groups it already holds (its prefix and encoder
caches then help), then the longest group nobody holds, then (so no replica idles while
work is left) the longest item of a group another replica holds.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from dataclasses import dataclass, field

Key = tuple[str, str]
"""(benchmark, sample id): ids are unique within a benchmark only."""


@dataclass(frozen=True)
class WorkItem:
    """One sample to run, with its expected cost and its affinity group (its video)."""

    key: Key
    cost: float = 1.0
    group: str = ""
    """Samples with the same group share a video; "" = a group of its own."""


@dataclass
class Lease:
    """A batch handed to one replica; valid until completed or its replica fails."""

    id: int
    replica: str
    items: list[WorkItem]

    @property
    def keys(self) -> list[Key]:
        """The keys of the leased samples, in hand-out order."""
        return [it.key for it in self.items]


@dataclass
class _Group:
    name: str
    cost: float
    pending: deque[WorkItem] = field(default_factory=deque)
    owner: str | None = None


class WorkQueue:
    """Leases samples to replicas in small batches; accepts each sample's record once."""

    def __init__(self, items: list[WorkItem], batch_size: int = 4) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size
        self._groups: dict[str, _Group] = {}
        self._free: list[tuple[float, int, str]] = []  # heap of unowned groups, longest first
        self._owned: dict[str, deque[str]] = {}  # replica -> its groups (may be exhausted)
        self._leases: dict[int, Lease] = {}
        self._open: dict[int, set[Key]] = {}  # lease id -> keys not yet completed
        self._accepted: set[Key] = set()
        self._keys: set[Key] = set()
        self._ids = itertools.count(1)
        self._seq = itertools.count()
        self.add(items)

    # -- filling ---------------------------------------------------------------------

    def add(self, items: list[WorkItem]) -> None:
        """Queue more samples (a key queued twice is an error: ids are unique)."""
        by_group: dict[str, list[WorkItem]] = {}
        for it in items:
            if it.key in self._keys:
                raise ValueError(f"sample {it.key[1]!r} of {it.key[0]!r} is queued twice")
            self._keys.add(it.key)
            group = it.group or f"\0{it.key[0]}\0{it.key[1]}"
            by_group.setdefault(group, []).append(it)
        for name, members in by_group.items():
            self._requeue(name, members)

    def _requeue(self, name: str, members: list[WorkItem]) -> None:
        g = self._groups.get(name)
        if g is None:
            g = self._groups[name] = _Group(name, 0.0)
        merged = sorted([*g.pending, *members], key=lambda it: -it.cost)
        g.pending = deque(merged)
        g.cost = max(g.cost, max(it.cost for it in members))
        if g.owner is None:
            heapq.heappush(self._free, (-g.cost, next(self._seq), name))

    # -- hand-out --------------------------------------------------------------------

    def lease(self, replica: str, n: int | None = None) -> Lease | None:
        """Up to ``n`` (default ``batch_size``) samples for ``replica``; None when nothing
        is pending (work may still be leased to others)."""
        want = n or self.batch_size
        items: list[WorkItem] = []
        while len(items) < want:
            group = self._next_group(replica)
            if group is None:
                break
            while group.pending and len(items) < want:
                items.append(group.pending.popleft())
        if not items:
            return None
        lease = Lease(next(self._ids), replica, items)
        self._leases[lease.id] = lease
        self._open[lease.id] = set(lease.keys)
        return lease

    def _next_group(self, replica: str) -> _Group | None:
        mine = self._owned.setdefault(replica, deque())
        while mine and not self._groups[mine[0]].pending:
            mine.popleft()  # exhausted: its remaining samples are leased or done
        if mine:
            return self._groups[mine[0]]
        while self._free:
            _, _, name = heapq.heappop(self._free)
            g = self._groups[name]
            if g.owner is None and g.pending:
                g.owner = replica
                mine.append(name)
                return g
        return self._steal()

    def _steal(self) -> _Group | None:
        """The group (held by another replica) with the longest pending item: a replica
        never idles while work is left, affinity notwithstanding."""
        best: _Group | None = None
        for g in self._groups.values():
            if g.pending and (best is None or g.pending[0].cost > best.pending[0].cost):
                best = g
        return best

    # -- completion and failure ---------------------------------------------------------

    def complete(self, lease_id: int, key: Key) -> bool:
        """Accept ``key``'s record from lease ``lease_id``: True once; False for a stale
        lease, a key not in it, or a sample already accepted (the caller drops the record)."""
        open_keys = self._open.get(lease_id)
        if open_keys is None or key not in open_keys or key in self._accepted:
            return False
        open_keys.discard(key)
        self._accepted.add(key)
        if not open_keys:
            del self._open[lease_id]
            del self._leases[lease_id]
        return True

    def release(self, lease_id: int) -> list[WorkItem]:
        """End a lease: its samples without a record go back to the queue (a batch call
        that returned without some of its records); returns them."""
        lease = self._leases.pop(lease_id, None)
        open_keys = self._open.pop(lease_id, set())
        if lease is None:
            return []
        back = [it for it in lease.items if it.key in open_keys and it.key not in self._accepted]
        by_group: dict[str, list[WorkItem]] = {}
        for it in back:
            by_group.setdefault(it.group or f"\0{it.key[0]}\0{it.key[1]}", []).append(it)
        for name, members in by_group.items():
            self._requeue(name, members)
        return back

    def fail_replica(self, replica: str) -> list[WorkItem]:
        """``replica`` is gone: every lease it holds ends (late records from them are
        refused), its samples are queued again and its groups are free for others."""
        back: list[WorkItem] = []
        for name in self._owned.pop(replica, deque()):
            g = self._groups[name]
            g.owner = None
            if g.pending:
                heapq.heappush(self._free, (-g.cost, next(self._seq), name))
        for lease_id in [i for i, ls in self._leases.items() if ls.replica == replica]:
            back += self.release(lease_id)
        return back

    # -- state ---------------------------------------------------------------------------

    def is_open(self, lease_id: int) -> bool:
        """Whether the lease still holds samples (not completed, released or failed)."""
        return lease_id in self._leases

    def leased(self, replica: str | None = None) -> list[Lease]:
        """Leases still open (of ``replica``, or of all)."""
        return [ls for ls in self._leases.values() if replica in (None, ls.replica)]

    @property
    def pending(self) -> int:
        """Samples waiting for a replica."""
        return sum(len(g.pending) for g in self._groups.values())

    @property
    def accepted(self) -> int:
        """Samples whose record was accepted."""
        return len(self._accepted)

    @property
    def total(self) -> int:
        """Every sample ever queued."""
        return len(self._keys)

    def finished(self) -> bool:
        """Every queued sample has its record."""
        return len(self._accepted) == len(self._keys)
