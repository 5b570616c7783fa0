"""Colocated vLLM rollouts: the engine lives inside the policy workers (verl's hybrid engine).

With ``rollout.engine: vllm`` and ``distributed.workers > 0`` the rollout engine is built in
the worker actors, next to the actor's FSDP2 shard, instead of in the driver:

- ``distributed.rollout_ranks: first`` puts one engine on rank 0; ``all`` one per rank, the
  driver splitting each batch's prompts into contiguous slices, one per engine.
- Weight sync after an update (:meth:`RolloutHost.rollout_sync`): every rank walks the
  policy's parameters in the same order and gathers each full tensor (``full_tensor`` is a
  collective, so every rank must take part); the engine-hosting ranks stream the gathered
  tensors into their local engine through :mod:`trainer.weight_sync` (shared-memory buckets
  on CPU, CUDA IPC on GPU), the others drop them: "all gather, one sends". No state dict
  crosses Ray, no file is written. Sleep and wake as in the single-process recipe
  (:func:`trainer.rollout.sleep_engine`): a logged no-op where vLLM has no sleep mode (CPU).
- The driver sends :class:`~trainer.frames.PromptRef` rows (cache paths, no pixels); the
  hosting rank renders them with its own :class:`~trainer.frames.PromptLoader` (frames read
  from the cache by path) and returns token ids, texts and the engine's log-probs.
  Per-request seeds are ``seed + i`` with ``i`` the prompt's index in the WHOLE batch, as
  :func:`trainer.rollout.sample_responses` gives them on one engine.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalkit.engines import engine_spec
from evalkit.errors import ConfigError

from ..vllm_memory import cpu_options
from .fsdp import local_tensor

if TYPE_CHECKING:
    from torch import Tensor, nn

    from evalkit.engines.base import SamplingParams

    from ..actor import ActorPolicy
    from ..batch import Response
    from ..config import TrainerConfig
    from ..frames import PromptRef
    from ..weight_sync import SyncStats

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RolloutSpec:
    """The colocated engine a worker builds (the same on every hosting rank)."""

    engine: str
    options: dict[str, Any] = field(default_factory=dict)
    sleep_level: int = 1
    bucket_mb: float = 512.0
    transport: str = "auto"
    hosts: tuple[int, ...] = (0,)
    """Ranks that host an engine."""


def colocated(cfg: TrainerConfig) -> bool:
    """Whether the run's rollouts happen in the workers: distributed, with an engine that can
    live in a worker and take weights in memory (``EngineSpec.weight_sync``: vLLM)."""
    return cfg.distributed.workers > 0 and engine_spec(cfg.rollout.engine).weight_sync


def rollout_spec(cfg: TrainerConfig) -> RolloutSpec:
    """The workers' engine settings from the config; refuses what cannot run, saying why."""
    dist, ro = cfg.distributed, cfg.rollout
    tp = int(ro.engine_options.get("tensor_parallel_size", 1))
    if tp > 1 and dist.gpus_per_worker == 0:
        raise ConfigError(
            f"rollout.engine_options.tensor_parallel_size={tp}: tensor parallelism needs GPUs "
            "(distributed.gpus_per_worker > 0); on CPU use tensor_parallel_size=1"
        )
    if tp > dist.gpus_per_worker > 0:
        raise ConfigError(
            f"rollout.engine_options.tensor_parallel_size={tp} but each worker holds "
            f"{dist.gpus_per_worker} GPU(s): set distributed.gpus_per_worker >= {tp}"
        )
    if _validates(cfg):
        raise ConfigError(
            "rollout.engine=vllm with distributed.workers > 0: validation "
            "(trainer.val_before_train / trainer.val_freq) is not supported with colocated "
            "rollouts yet; turn it off or use rollout.engine=hf"
        )
    if cfg.algorithm.advantage == "remax":
        raise ConfigError(
            "algorithm.advantage=remax with colocated vLLM rollouts (distributed.workers > 0, "
            "rollout.engine=vllm) is not supported yet; use rollout.engine=hf"
        )
    hosts = tuple(range(dist.workers)) if dist.rollout_ranks == "all" else (0,)
    options = dict(ro.engine_options)
    if dist.gpus_per_worker > 0:  # the GPU is shared with the actor shard and its optimizer
        options.setdefault("gpu_memory_utilization", 0.5)
    else:  # vLLM reads it as a share of the CPU memory node (trainer.vllm_memory)
        options = cpu_options(options)
    return RolloutSpec(
        ro.engine, options, ro.sleep_level, ro.sync_bucket_mb, ro.sync_transport, hosts
    )


def _validates(cfg: TrainerConfig) -> bool:
    run = cfg.trainer
    return bool(cfg.data.val_path) and bool(run.val_before_train or run.val_freq)


def gathered_weights(model: nn.Module) -> Iterator[tuple[str, Tensor]]:
    """The model's full tensors, one at a time, gathered from the FSDP2 shards (a collective
    per tensor: every rank must consume the whole iterator). Tied parameters are given once:
    ``keep_vars`` yields the Parameter objects, so a tied one is the same object under both
    names on every rank (a key on shard storage could differ between ranks, e.g. for empty
    shards, and the ranks would then gather different tensors and hang)."""
    seen: set[int] = set()
    for name, t in model.state_dict(keep_vars=True).items():
        if id(t) in seen:
            continue
        seen.add(id(t))
        yield name, local_tensor(t).detach()


class RolloutHost:
    """What a :class:`~.worker.PolicyWorker` adds to host a colocated engine (a mixin)."""

    actor: ActorPolicy
    rank: int

    def start_rollout(self, spec: RolloutSpec | None, model_dir: str) -> None:
        """Build this rank's engine when it is one of ``spec.hosts`` (else nothing)."""
        from ..rollout import EngineLoop, make_rollout_engine

        self.rollout_spec = spec
        self.rollout_engine: Any = None
        if spec is None or self.rank not in spec.hosts:
            return
        options = dict(spec.options)
        self.rollout_loop = EngineLoop()
        self.rollout_engine = make_rollout_engine(
            spec.engine, model_dir, self.actor, options, self.rollout_loop, spec.sleep_level
        )
        log.info("rank %d: colocated %s rollout engine started", self.rank, spec.engine)

    def rollout_sync(self) -> SyncStats | None:
        """Gather the full weights on every rank; the hosting ranks load them into their
        engine (waking it first). A collective: every rank must be called."""
        from ..rollout import sync_weights

        named = gathered_weights(self.actor.model)
        spec = self.rollout_spec
        if self.rollout_engine is None or spec is None:
            for _ in named:  # take part in every gather, keep nothing
                pass
            return None
        return sync_weights(
            self.rollout_engine, self.actor, self.rollout_loop, spec.bucket_mb, spec.transport,
            named=named,
        )  # fmt: skip

    def rollout_generate(
        self,
        prompts: list[PromptRef],
        counts: list[int],
        sampling: SamplingParams,
        seed: int,
    ) -> list[list[Response]]:
        """``counts[i]`` responses to each prompt, frames read from the cache here; request
        ``i`` is seeded ``seed + i`` (the driver passes the slice's offset in ``seed``)."""
        from ..rollout import sample_responses

        engine = self._engine()
        loader = self.actor.loader
        if loader is None:
            raise RuntimeError("colocated rollout: the worker has no PromptLoader (WorkerSpec)")
        requests = [loader.request(p) for p in prompts]
        return sample_responses(engine, requests, counts, sampling, seed, self.rollout_loop)

    def rollout_sleep(self) -> bool:
        """Put this rank's engine to sleep for training (False: none here, or no sleep mode)."""
        from ..rollout import sleep_engine

        if self.rollout_engine is None or self.rollout_spec is None:
            return False
        return sleep_engine(self.rollout_engine, self.rollout_loop, self.rollout_spec.sleep_level)

    def close_rollout(self) -> None:
        """Shut this rank's engine down (its processes and memory), its weight-sync
        buckets in /dev/shm first: ``WorkerGroup.shutdown`` kills the actor right after."""
        from ..rollout import release_weight_sync

        engine = getattr(self, "rollout_engine", None)
        if engine is not None:
            self.rollout_engine = None
            try:
                release_weight_sync(engine)
            finally:
                self.rollout_loop.run(engine.close())
                self.rollout_loop.close()

    def _engine(self) -> Any:
        if self.rollout_engine is None:
            raise RuntimeError(
                f"rank {self.rank} hosts no rollout engine (hosts: "
                f"{getattr(self.rollout_spec, 'hosts', ())})"
            )
        return self.rollout_engine
