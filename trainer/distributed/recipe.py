"""The GRPO recipe with its actor update on a Ray worker group (``distributed.workers > 0``).

What runs where: rewards and advantages stay in the driver. Old log-probs and the PPO
updates run on the workers, each rank on its share of the rows (token-balanced). Rollout:

- ``rollout.engine: hf``: in the driver (the HF engine over the driver's copy of the
  policy); after each training step the driver's copy is refreshed from the workers'
  gathered weights through Ray's object store (no file).
- ``rollout.engine: vllm``: colocated in the workers (:mod:`.rollout_worker`: rank 0, or
  every rank with ``distributed.rollout_ranks: all``); the driver sends prompt refs and
  gets token ids back; weights go from the shards into the engine inside the worker. The
  driver keeps its copy for encoding prompts and for its checkpoint files: it is refreshed
  from the workers only when a checkpoint is written (or every step when the eval hook is
  on, which evaluates that copy).

Checkpoints: the driver's usual files (gathered weights in ``model.pt``, so ``export``
works; step, data position, RNG) plus ``sharded/``, every rank's shards of weights and
AdamW state (:mod:`.sharded`), which the workers load on resume.

``actor.padding_free``, ``actor.use_dynamic_bsz`` (token budget per rank, the micro-batch
count agreed across ranks) and ``actor.share_vision_per_group`` (old log-probs encode each
prompt's vision once, tower calls agreed across ranks) apply on the workers as on one
process (:mod:`.lockstep`).

KL: the workers hold the frozen reference (:mod:`.reference`) and compute its log-probs;
the driver builds none. Learning-rate schedules: the workers' optimizers carry the
schedule (stepped per optimizer step on the workers, or per training step when the driver
says so) and save it in ``sharded/``; the driver's optimizer never steps, its scheduler
only mirrors the workers' state, for the ``lr`` metric and the driver's checkpoint (so
stepping it here would warn "lr_scheduler.step() before optimizer.step()").
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from evalkit.errors import ConfigError
from evalkit.scale.cluster import ray_session

from ..checkpoint import latest_checkpoint
from ..config import TrainerConfig
from ..lr_schedule import schedule_length
from ..recipe import GRPORecipe
from ..reward_loader import RewardFn
from ..step import StepInputs, StepResult
from ..vllm_memory import preflight
from .colocate import ColocatedRollout, WorkerRolloutEngine
from .group import GroupSpec, WorkerGroup
from .rollout_worker import RolloutSpec, colocated, rollout_spec
from .worker import WorkerSpec

log = logging.getLogger(__name__)
SHARDED = "sharded"
"""Folder of a step's checkpoint holding the workers' DCP shards (weights + AdamW state)."""


@dataclass(frozen=True)
class DistributedPlan:
    """What a distributed run will start, resolved from the config alone (no Ray, no GPU)."""

    group: GroupSpec
    """Ranks and what each reserves (Ray resources per worker)."""
    backend: str
    """The process group's backend: nccl with GPUs, gloo on CPU."""
    rollout: RolloutSpec | None
    """The colocated engines (hosting ranks, options), None when rollouts stay on the driver."""
    engine_args: dict[str, Any]
    """The vLLM engine arguments each hosting rank passes (empty without colocated vLLM)."""


def distributed_plan(cfg: TrainerConfig) -> DistributedPlan:
    """The run's :class:`DistributedPlan`; a setting that cannot run raises ConfigError."""
    dist = cfg.distributed
    if dist.workers < 1:
        raise ConfigError("distributed.workers is 0: the run trains in one process")
    group = GroupSpec(dist.workers, dist.cpus_per_worker, dist.gpus_per_worker)
    spec = rollout_spec(cfg) if colocated(cfg) else None
    args: dict[str, Any] = {}
    if spec is not None:
        from evalkit.engines import engine_config

        engine = engine_config(
            spec.engine, cfg.model, spec.options, where="rollout.engine_options for engine"
        )
        args = engine.engine_args()  # type: ignore[attr-defined]  # a colocated one's (vLLM's)
    return DistributedPlan(group, "nccl" if dist.gpus_per_worker > 0 else "gloo", spec, args)


class DistributedGRPORecipe(GRPORecipe):
    """:class:`GRPORecipe` whose old log-probs and updates run on a :class:`WorkerGroup`."""

    ref_on_driver = False

    def __init__(self, cfg: TrainerConfig, reward_fn: RewardFn | None = None) -> None:
        self.rollout_spec = rollout_spec(cfg) if colocated(cfg) else None
        super().__init__(cfg, reward_fn)
        self._stack = contextlib.ExitStack()
        self.group: WorkerGroup | None = None
        self.rollout: ColocatedRollout | None = None
        self._driver_stale = False
        """Colocated mode: the driver's copy lags the workers' weights (see _save_checkpoint)."""

    def setup(self, resume: bool = True) -> None:
        """The single-process setup (driver copy, data, engine, the driver's checkpoint
        files), then the worker group, which loads the checkpoint's shards."""
        cfg, dist = self.cfg, self.cfg.distributed
        latest = latest_checkpoint(cfg.checkpoint.dir) if resume else None
        if latest is not None and not (latest / SHARDED / ".metadata").is_file():
            raise ConfigError(
                f"{latest} has no sharded worker state ({SHARDED}/): not written by a "
                "distributed run, or cut short while saving; remove that step directory "
                "to resume from the one before, or pass --no-resume"
            )
        spec_ro = self.rollout_spec
        if spec_ro is not None and dist.gpus_per_worker == 0 and dist.ray_address is None:
            preflight(spec_ro.options, engines=len(spec_ro.hosts))  # this machine's engines
        super().setup(resume=resume)
        cpus = dist.workers * dist.cpus_per_worker
        self._stack.enter_context(ray_session(dist.ray_address, num_cpus=int(cpus) or None))
        spec = WorkerSpec(
            model_dir=cfg.model,
            optimizer=cfg.optimizer,
            world_size=dist.workers,
            timeout_s=dist.timeout_s,
            threads=max(1, int(dist.cpus_per_worker)),
            freeze_vision=cfg.actor.freeze_vision_tower,
            loader=self.loader,
            padding_free=cfg.actor.padding_free,
            logprob_chunk_tokens=cfg.actor.logprob_chunk_tokens,
            share_vision=cfg.actor.share_vision_per_group,
            reference=cfg.algorithm.kl.estimator != "off",
            ref_offload=dist.ref_offload,
            gradient_checkpointing=cfg.actor.gradient_checkpointing,
            init=dist.init,
            schedule_steps=schedule_length(cfg),
            lr_step_per=cfg.optimizer.lr_step_per,
            rollout=self.rollout_spec,
        )
        self.group = WorkerGroup(distributed_plan(cfg).group, spec).start()
        if self.rollout_spec is not None:
            self.rollout = ColocatedRollout(self.group, self.rollout_spec.hosts)
        if latest is not None:
            self.group.load(latest / SHARDED)
        log.info("distributed: %d workers, FSDP units %s", dist.workers, self.group.units)

    def _save_checkpoint(self, step: int) -> Path:
        """The driver's files (atomic), then every rank's shards into ``<step>/sharded``.

        A crash between the two leaves a step directory without ``sharded/.metadata``,
        which :meth:`setup` refuses to resume from, naming it.
        """
        if self._driver_stale:  # the driver's model.pt holds the workers' weights
            self.actor.load_state_dict(self._workers().full_state())
            self._driver_stale = False
        path = super()._save_checkpoint(step)
        self._workers().save(path / SHARDED)
        return path

    def _workers(self) -> WorkerGroup:
        if self.group is None:
            raise RuntimeError("DistributedGRPORecipe.setup() must run first")
        return self.group

    def _logprobs(self, batch: Any, rows: list[Any]) -> torch.Tensor:
        mbs, temp = self.settings.micro_batch_size, self.settings.temperature
        return self._workers().logprobs(batch, rows, mbs, temp, self.settings.max_token_len)

    def _ref_logprobs(self, batch: Any, rows: list[Any]) -> torch.Tensor:
        mbs, temp = self.settings.micro_batch_size, self.settings.temperature
        return self._workers().logprobs(
            batch, rows, mbs, temp, self.settings.max_token_len, ref=True
        )

    def _step_schedule(self) -> None:
        self._workers().step_schedule()
        self._mirror_schedule()

    def _mirror_schedule(self) -> None:
        """The driver's scheduler and optimizer lr set to the workers' (no step here)."""
        self.scheduler.load_state_dict(self._workers().schedule_state())
        for group, lr in zip(
            self.optimizer.param_groups, self.scheduler.get_last_lr(), strict=True
        ):
            group["lr"] = lr

    def _policy_update(self, inputs: StepInputs, rows: list[Any], sched: Any) -> list[Any]:
        # the workers step their own schedules per optimizer step (sched is the driver's)
        results: list[StepResult] = self._workers().ppo_update(inputs, rows, self.settings)
        self._mirror_schedule()
        if self.rollout is not None and not self.eval_hook.enabled:
            self._driver_stale = True  # the workers' engines sync inside the workers
            return results
        # the next rollout (HF engine over the driver's copy) samples from the new weights;
        # timed apart as timing_s/sync (it also counts within timing_s/update)
        with self.timer("sync"):
            state = self._workers().full_state()
            self.actor.load_state_dict(state)
        return results

    # -- colocated rollouts (rollout.engine: vllm): the engines live in the workers --------

    def _engine_here(self) -> bool:
        return self.rollout_spec is None

    def _make_engine(self) -> Any:
        if self.rollout_spec is not None:
            return WorkerRolloutEngine()  # built by the workers in setup()
        return super()._make_engine()

    def _sample(
        self, prompts: list[Any], requests: list[Any], counts: list[int], sampling: Any, seed: int
    ) -> list[list[Any]]:
        if self.rollout is None:
            return super()._sample(prompts, requests, counts, sampling, seed)
        return self.rollout.sample(prompts, counts, sampling, seed)  # refs, not pixels

    def _sync(self) -> None:
        if self.rollout is None:
            super()._sync()
        else:
            self.rollout.sync()

    def _sleep(self) -> None:
        if self.rollout is None:
            super()._sleep()
        else:
            self.rollout.sleep()

    def cleanup(self) -> None:
        """Close the engine and metrics, end the workers, leave Ray."""
        try:
            super().cleanup()
        finally:
            if self.group is not None:
                self.group.shutdown()
            self._stack.close()
