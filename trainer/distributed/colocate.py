"""The driver's side of colocated rollouts: the engines live in the workers
(:mod:`.rollout_worker`); the driver syncs them, sends them prompt refs, puts them to sleep.

With several hosting ranks (``distributed.rollout_ranks: all``) a batch's prompts are cut
into contiguous slices, one per engine, each seeded from its offset in the whole batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalkit.engines.base import SamplingParams

    from ..batch import Response
    from ..frames import PromptRef
    from ..weight_sync import SyncStats
    from .group import WorkerGroup


def slices(n: int, parts: int) -> list[tuple[int, int]]:
    """``n`` prompts cut into at most ``parts`` contiguous, near-equal (start, stop) slices."""
    parts = max(1, min(parts, n))
    size, extra = divmod(n, parts)
    out, start = [], 0
    for p in range(parts):
        stop = start + size + (1 if p < extra else 0)
        out.append((start, stop))
        start = stop
    return out


class ColocatedRollout:
    """The driver's handle on the workers' engines: sync, sample, sleep."""

    def __init__(self, group: WorkerGroup, hosts: tuple[int, ...]) -> None:
        self.group = group
        self.hosts = hosts

    def sync(self) -> list[SyncStats | None]:
        """Every rank gathers the new weights, the hosting ranks load them (see module)."""
        return self.group._get([w.rollout_sync.remote() for w in self.group.workers])

    def sleep(self) -> None:
        """Put the hosting ranks' engines to sleep (a no-op on CPU)."""
        workers = [self.group.workers[r] for r in self.hosts]
        self.group._get([w.rollout_sleep.remote() for w in workers])

    def sample(
        self,
        prompts: list[PromptRef],
        counts: list[int],
        sampling: SamplingParams,
        seed: int,
    ) -> list[list[Response]]:
        """Responses per prompt, the prompts split over the hosting ranks in order."""
        cuts = slices(len(prompts), len(self.hosts))
        futures = [
            self.group.workers[r].rollout_generate.remote(
                prompts[a:b], counts[a:b], sampling, seed + a
            )
            for r, (a, b) in zip(self.hosts, cuts, strict=False)
        ]
        return [group for part in self.group._get(futures) for group in part]


class WorkerRolloutEngine:
    """The driver's ``engine`` in colocated mode: a placeholder, generation runs on workers."""

    async def generate(self, request: Any) -> Any:
        """Never used: the distributed recipe sends its prompts to the workers."""
        raise RuntimeError("colocated rollouts run in the workers (ColocatedRollout.sample)")

    async def close(self) -> None:
        """Nothing to release here (the workers close their engines)."""
