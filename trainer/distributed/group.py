"""The driver's side of data parallelism: start N policy workers on Ray, feed them, gather.

Only small things travel: token tensors, masks, advantages and, per row, its prompt (an
:class:`~trainer.actor.Encoded` or a :class:`~trainer.frames.PromptRef` of cache paths).
Rows are split across ranks by :func:`.balance.balanced_partitions` on their token counts;
the shorter parts get filler rows (a copy of one of the rank's rows with its response mask
zeroed: it runs the forward, so every rank makes the same collectives, and weighs nothing).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from evalkit.scale.cluster import require_ray

from ..algorithms.aggregation import AggNorm
from ..step import StepInputs, StepResult, StepSettings, mini_batches
from .balance import balanced_partitions, even_out
from .worker import PolicyWorker, RankInputs, WorkerSpec

if TYPE_CHECKING:
    from ..batch import TrainBatch
    from ..frames import PromptRef
    from ..visual_inputs import Encoded

log = logging.getLogger(__name__)


@dataclass
class Shard:
    """One rank's rows: their positions in the batch (None: a filler) and the row data."""

    index: list[int | None]
    inputs: StepInputs
    rows: list[Encoded | PromptRef]


def _select(inputs: StepInputs, index: Tensor) -> StepInputs:
    pick = [inputs.ref_logp, inputs.rollout_weights]
    return StepInputs(
        inputs.batch.select(index),
        inputs.old_logp[index],
        inputs.advantages[index],
        *(t[index] if t is not None else None for t in pick),
    )


def split_for_ranks(
    inputs: StepInputs,
    rows: list[Encoded | PromptRef],
    world: int,
    parts: list[list[int]] | None = None,
) -> list[Shard]:
    """``inputs`` cut into ``world`` equal-length shards balanced by tokens (rows = the
    prompt of each batch position, as :meth:`ActorPolicy.set_rows` takes them); ``parts``
    gives the rows of each rank explicitly instead (tests place modalities on ranks)."""
    batch = inputs.batch
    if parts is None:
        parts = balanced_partitions(batch.attention_mask.sum(1).tolist(), world)
    if len(parts) != world or sorted(i for p in parts for i in p) != list(range(len(batch))):
        raise ValueError(f"parts must split the {len(batch)} rows over {world} ranks: {parts}")
    shards = []
    for part in even_out(parts):
        real = [i for i in part if i is not None]
        index = torch.tensor([i if i is not None else real[0] for i in part])
        sub = _select(inputs, index)
        filler = torch.tensor([i is None for i in part])
        sub.batch.response_mask = sub.batch.response_mask.masked_fill(filler[:, None], 0)
        positions = batch.row_index if batch.row_index is not None else torch.arange(len(batch))
        shard_rows = [rows[int(positions[int(i)])] for i in index]
        sub.batch.row_index = torch.arange(len(index))
        shards.append(Shard(part, sub, shard_rows))
    return shards


@dataclass(frozen=True)
class GroupSpec:
    """How many workers, and what each may use."""

    world_size: int = 2
    cpus_per_worker: float = 1.0
    gpus_per_worker: float = 0.0
    call_timeout_s: float = 600.0
    """Driver-side bound on one call to the workers (a hang fails instead of blocking)."""


class WorkerGroup:
    """N :class:`PolicyWorker` Ray actors forming one torch.distributed group."""

    def __init__(self, spec: GroupSpec, worker: WorkerSpec) -> None:
        self.spec = spec
        self.worker_spec = worker
        self.workers: list[Any] = []
        self.units: list[str] = []

    def start(self) -> WorkerGroup:
        """Create the actors, pick the rendezvous on rank 0's node, build every rank."""
        ray = require_ray()
        spec = self.spec
        remote = ray.remote(PolicyWorker)
        self.workers = [
            remote.options(num_cpus=spec.cpus_per_worker, num_gpus=spec.gpus_per_worker).remote()
            for _ in range(spec.world_size)
        ]
        addr, port = self._get([self.workers[0].address.remote()])[0]
        backend = "nccl" if spec.gpus_per_worker > 0 else "gloo"
        wspec = replace(
            self.worker_spec,
            world_size=spec.world_size,
            master_addr=addr,
            master_port=port,
            backend=backend,
        )
        futures = [w.setup.remote(rank, wspec) for rank, w in enumerate(self.workers)]
        self.units = self._get(futures)[0]
        log.info("workers: %d ranks, %s, %d FSDP units", spec.world_size, backend, len(self.units))
        return self

    def _get(self, futures: list[Any]) -> list[Any]:
        return list(require_ray().get(futures, timeout=self.spec.call_timeout_s))

    def update(
        self,
        inputs: StepInputs,
        rows: list[Encoded | PromptRef],
        settings: StepSettings,
        parts: list[list[int]] | None = None,
    ) -> StepResult:
        """One optimizer step on the mini-batch ``inputs`` across the ranks (``parts``: the
        rows of each rank; default balanced by tokens)."""
        world = self.spec.world_size
        norm = AggNorm.of(inputs.batch.response_mask, settings.agg_max_len, dp_size=world)
        shards = split_for_ranks(inputs, rows, world, parts)
        futures = [
            w.update.remote(RankInputs(s.inputs, s.rows, norm), settings)
            for w, s in zip(self.workers, shards, strict=True)
        ]
        return self._get(futures)[0]  # identical on every rank after the all-reduce

    def ppo_update(
        self, inputs: StepInputs, rows: list[Encoded | PromptRef], settings: StepSettings
    ) -> list[StepResult]:
        """``ppo_epochs`` x mini-batches of whole groups, as :func:`trainer.step.ppo_update`."""
        parts = mini_batches(inputs, settings.ppo_mini_batch_size)
        return [
            self.update(part, rows, settings) for _ in range(settings.ppo_epochs) for part in parts
        ]

    def logprobs(
        self,
        batch: TrainBatch,
        rows: list[Encoded | PromptRef],
        micro_batch_size: int,
        temperature: float = 1.0,
        max_token_len: int | None = None,
        parts: list[list[int]] | None = None,
        ref: bool = False,
    ) -> Tensor:
        """Response log-probs (B, T) of ``batch``, each rank computing its share (micro-batches
        of ``micro_batch_size`` rows, or by ``max_token_len`` tokens; ``parts`` as in
        :meth:`update`); with ``ref``: the workers' frozen reference policy's."""
        zeros = torch.zeros(batch.response_ids.shape)
        probe = StepInputs(batch, zeros, zeros)
        shards = split_for_ranks(probe, rows, self.spec.world_size, parts)
        futures = [
            w.logprobs.remote(
                s.inputs.batch, s.rows, micro_batch_size, temperature, max_token_len, ref
            )
            for w, s in zip(self.workers, shards, strict=True)
        ]
        out = torch.zeros(batch.response_ids.shape)
        for shard, part in zip(shards, self._get(futures), strict=True):
            for j, i in enumerate(shard.index):
                if i is not None:
                    out[i] = part[j]
        return out

    def step_schedule(self) -> None:
        """Advance every rank's learning-rate schedule once."""
        self._get([w.step_schedule.remote() for w in self.workers])

    def schedule_state(self) -> dict[str, Any]:
        """Rank 0's scheduler state (every rank's is the same)."""
        return dict(self._get([self.workers[0].schedule_state.remote()])[0])

    def state_dicts(self) -> list[dict[str, Tensor]]:
        """Every rank's gathered full state dict (to compare ranks, or to export)."""
        return self._get([w.state_dict.remote() for w in self.workers])

    def full_state(self) -> dict[str, Tensor]:
        """The gathered full weights, once (rank 0's copy; the other ranks return {})."""
        return self._get([w.state_dict.remote(True) for w in self.workers])[0]

    def save(self, path: str | Path) -> None:
        """A sharded checkpoint of weights and optimizer state (every rank writes its part)."""
        self._get([w.save.remote(str(path)) for w in self.workers])

    def load(self, path: str | Path) -> None:
        """Load a sharded checkpoint into every rank (resharded to this group's size)."""
        self._get([w.load.remote(str(path)) for w in self.workers])

    def grads(self) -> list[dict[str, Tensor]]:
        """Every rank's full gradients of the last update (workers built with keep_grads)."""
        return self._get([w.grads.remote() for w in self.workers])

    def traces(self) -> list[list[str]]:
        """Each rank's vision-tower calls during the last update."""
        return self._get([w.trace.remote() for w in self.workers])

    def shutdown(self) -> None:
        """Leave the process group (best effort) and end the actors."""
        ray = require_ray()
        try:
            ray.get([w.close.remote() for w in self.workers], timeout=30)
        except Exception as exc:  # a broken group (the negative control) cannot close cleanly
            log.warning("worker group: close failed (%s); killing the actors", exc)
        for w in self.workers:
            ray.kill(w)
        self.workers = []
