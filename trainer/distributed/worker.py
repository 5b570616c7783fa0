"""One data-parallel rank: a Ray actor holding an FSDP2-sharded policy and its optimizer.

The driver (:mod:`.group`) sends each rank its rows as token tensors plus, per row, its
prompt: an :class:`~trainer.actor.Encoded` (ids + visual tensors) or a
:class:`~trainer.frames.PromptRef` (cache paths, loaded here through the worker's
:class:`~trainer.frames.PromptLoader`). The loss of a rank's rows is computed by the same
:func:`trainer.step.accumulate_loss` as on one process, with the WHOLE batch's denominators
and verl's ``dp_size`` factor (:class:`~trainer.algorithms.aggregation.AggNorm`): FSDP
averages gradients over ranks, so ``dp * local_sum / N_global`` averaged over ``dp`` ranks is
the single-process ``sum / N_global``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields, replace
from datetime import timedelta
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from ..algorithms.aggregation import DP_SCALED, AggNorm
from ..step import StepInputs, StepResult, StepSettings, accumulate_loss, compute_logprobs
from .fsdp import full_state_dict, local_tensor
from .init import InitMode, load_policy, prepare_policies
from .lockstep import agreed_micro_batches, lockstep_vision
from .rollout_worker import RolloutHost, RolloutSpec

if TYPE_CHECKING:
    from ..actor import ActorPolicy, DummyMode
    from ..batch import TrainBatch
    from ..config import OptimizerConfig
    from ..frames import PromptLoader, PromptRef
    from ..visual_inputs import Encoded

"""Aggregation modes whose per-rank loss carries the dp_size factor (see aggregation.py);
their reported loss is the ranks' sum over dp, the others' the plain sum."""


@dataclass
class WorkerSpec:
    """What every rank is built from (the same on each; the rank comes separately)."""

    model_dir: str
    optimizer: OptimizerConfig
    world_size: int
    master_addr: str = "127.0.0.1"
    master_port: int = 29500
    backend: str = "gloo"
    """gloo on CPU, nccl on GPU."""
    timeout_s: float = 120.0
    """Process-group timeout: a collective that does not pair up fails after this long."""
    dummy_mode: DummyMode = "per_kind"
    threads: int = 1
    """torch CPU threads per rank (its --cpus-per-worker)."""
    freeze_vision: bool = False
    loader: PromptLoader | None = None
    """Turns PromptRef rows into model inputs on this rank (frames read from the cache)."""
    keep_grads: bool = False
    """Keep the last update's full (clipped) gradients for :meth:`PolicyWorker.grads`."""
    padding_free: bool = False
    """``actor.padding_free``: packed sequences (:mod:`trainer.packing`), through the root."""
    logprob_chunk_tokens: int = 1024
    share_vision: bool = False
    """Log-prob passes encode each prompt's vision once (:func:`.lockstep.lockstep_vision`)."""
    reference: bool = False
    """Hold a frozen sharded copy of the starting policy for reference log-probs (KL)."""
    ref_offload: bool = False
    """GPU only: the reference's shards wait in CPU memory between uses."""
    gradient_checkpointing: bool = False
    """Recompute each block's activations in the backward (HF, non-reentrant)."""
    init: InitMode = "all_load"
    """all_load: every rank reads the weights; rank0: rank 0 reads and broadcasts (.init)."""
    schedule_steps: int = 1
    """Length of the learning-rate schedule (:func:`trainer.lr_schedule.schedule_length`)."""
    lr_step_per: str = "train_step"
    """optimizer_step: the schedule advances after every update here; train_step: when
    the driver calls :meth:`PolicyWorker.step_schedule`."""
    rollout: RolloutSpec | None = None
    """A colocated rollout engine on some ranks (:mod:`.rollout_worker`); None: none."""


@dataclass
class RankInputs:
    """One rank's share of a mini-batch: its rows and the whole mini-batch's denominators."""

    inputs: StepInputs
    rows: list[Encoded | PromptRef]
    """The prompt of each row, in row order (``inputs.batch.row_index`` is 0..n-1)."""
    norm: AggNorm


class PolicyWorker(RolloutHost):
    """The body of a Ray actor (wrapped with ``ray.remote`` by the group); the rollout
    methods (``rollout_*``) come from :class:`~.rollout_worker.RolloutHost`."""

    def address(self) -> tuple[str, int]:
        """This node's IP and a free port on it (rank 0's: the process group's rendezvous)."""
        import ray

        return ray.util.get_node_ip_address(), _free_port()

    def setup(self, rank: int, spec: WorkerSpec) -> list[str]:
        """Join the process group, load and shard the policy, build the optimizer."""
        import torch.distributed as dist

        from ..lr_schedule import build_scheduler
        from ..model_parts import freeze_vision_tower, trainable_parameters
        from ..step import build_optimizer

        torch.set_num_threads(spec.threads)
        self.rank, self.world = rank, spec.world_size
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = (
            spec.master_addr,
            str(spec.master_port),
        )
        dist.init_process_group(
            spec.backend,
            rank=rank,
            world_size=spec.world_size,
            timeout=timedelta(seconds=spec.timeout_s),
        )
        device = "cuda" if spec.backend == "nccl" else "cpu"
        actor = load_policy(spec.model_dir, rank, spec.init)
        if device == "cuda":
            torch.cuda.set_device(0)  # Ray gives each actor its own visible GPU
            if spec.init == "all_load":  # rank0: fully_shard moves the shards to the GPU
                actor.to("cuda")
        actor.loader = spec.loader
        actor.dummy_mode = spec.dummy_mode
        actor.padding_free, actor.logprob_chunk_tokens = (
            spec.padding_free,
            spec.logprob_chunk_tokens,
        )
        # a per-prompt cache makes a data-dependent number of tower calls: lockstep_vision
        # agrees on the count across ranks first (logprobs below)
        actor.share_vision_per_group = spec.share_vision
        if spec.freeze_vision:
            freeze_vision_tower(actor.model)
        self.device = torch.device(device)
        units, self.ref = prepare_policies(
            actor,
            rank,
            self.device,
            init=spec.init,
            reference=spec.reference,
            ref_offload=spec.ref_offload,
            gradient_checkpointing=spec.gradient_checkpointing,
        )
        self.actor: ActorPolicy = actor
        self.keep_grads = spec.keep_grads
        self.last_grads: dict[str, Tensor] = {}
        self.optimizer = build_optimizer(trainable_parameters(actor), spec.optimizer)
        self.scheduler = build_scheduler(self.optimizer, spec.optimizer, spec.schedule_steps)
        self.lr_step_per = spec.lr_step_per
        self.start_rollout(spec.rollout, spec.model_dir)
        return units

    def update(self, part: RankInputs, settings: StepSettings) -> StepResult:
        """One optimizer step on this rank's rows; loss and metrics reduced over the ranks."""
        actor = self.actor
        actor.train()
        actor.set_rows(part.rows)
        actor.vision_trace.clear()
        self.optimizer.zero_grad(set_to_none=True)
        inputs = _to_device(part.inputs, self.device)
        size, budget = settings.micro_batch_size, settings.max_token_len
        count = agreed_micro_batches(inputs.batch, size, budget, self.device)
        result = accumulate_loss(actor, inputs, settings, norm=part.norm, min_micro_batches=count)
        params = [p for p in actor.parameters() if p.grad is not None]
        max_norm = settings.grad_clip if settings.grad_clip is not None else math.inf
        grad_norm = float(local_tensor(torch.nn.utils.clip_grad_norm_(params, max_norm)))
        skipped = not math.isfinite(grad_norm)
        if self.keep_grads:  # full_tensor is a collective: every rank, same order
            self.last_grads = {
                n: local_tensor(p.grad).detach().clone()
                for n, p in actor.named_parameters()
                if p.grad is not None
            }
        if not skipped:
            self.optimizer.step()
        if self.lr_step_per == "optimizer_step":  # as trainer.step.ppo_update, skip or not
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        out = self._reduce(result, settings.policy_agg_mode or settings.loss_agg_mode)
        out.metrics["grad_norm"] = grad_norm  # already global: the norm of the full gradient
        if skipped:
            out.metrics["skipped_nonfinite_grad"] = 1.0
        return out

    def _reduce(self, result: StepResult, mode: str) -> StepResult:
        """Sum loss and token-weighted metrics over the ranks (their weights are global)."""
        import torch.distributed as dist

        keys = sorted(result.metrics)
        values = [result.loss] + [result.metrics[k] for k in keys]
        vec = torch.tensor(values, dtype=torch.float64, device=self.device)  # NCCL: on GPU
        dist.all_reduce(vec)
        loss = float(vec[0]) / (self.world if mode in DP_SCALED else 1)
        return StepResult(loss, {k: float(v) for k, v in zip(keys, vec[1:], strict=True)})

    def logprobs(
        self,
        batch: TrainBatch,
        rows: list[Encoded | PromptRef],
        mbs: int,
        temperature: float,
        max_token_len: int | None = None,
        ref: bool = False,
    ) -> Tensor:
        """Response log-probs of this rank's rows, no gradient: the actor's (old), or with
        ``ref`` the frozen reference's."""
        policy = self.actor if not ref else self.ref
        if policy is None:
            raise RuntimeError("reference log-probs asked of workers built without reference")
        policy.eval()
        policy.set_rows(rows)
        policy.vision_trace.clear()
        mask = batch.response_mask
        moved = _to_device(StepInputs(batch, mask, mask), self.device).batch
        count = agreed_micro_batches(moved, mbs, max_token_len, self.device)
        with torch.no_grad(), lockstep_vision(policy, moved):
            out = compute_logprobs(policy, moved, mbs, temperature, max_token_len, count)
        return out.cpu()

    def step_schedule(self) -> None:
        """Advance the learning-rate schedule once (``lr_step_per: train_step``)."""
        self.scheduler.step()

    def schedule_state(self) -> dict[str, object]:
        """The scheduler's state (the same on every rank): the driver mirrors it."""
        return dict(self.scheduler.state_dict())

    def state_dict(self, rank0_only: bool = False) -> dict[str, Tensor]:
        """The full (unsharded) policy weights (a collective: every rank calls it); with
        ``rank0_only`` the other ranks return {} (nothing extra crosses Ray)."""
        return full_state_dict(self.actor, rank0_only)

    def save(self, path: str) -> None:
        """Write this rank's shards of weights and optimizer state (:mod:`.sharded`)."""
        from .sharded import save_sharded

        save_sharded(path, self.actor, self.optimizer, self.scheduler)

    def load(self, path: str) -> None:
        """Load weights and optimizer state from a sharded checkpoint."""
        from .sharded import load_sharded

        load_sharded(path, self.actor, self.optimizer, self.scheduler)

    def grads(self) -> dict[str, Tensor]:
        """The full gradients of the last update (``keep_grads``), after clipping."""
        return self.last_grads

    def trace(self) -> list[str]:
        """The vision-tower calls of the last update, in order."""
        return list(self.actor.vision_trace)

    def close(self) -> None:
        """Close the rollout engine, leave the process group."""
        import torch.distributed as dist

        self.close_rollout()
        if dist.is_initialized():
            dist.destroy_process_group()


def _to_device(inputs: StepInputs, device: torch.device) -> StepInputs:
    """Every tensor of ``inputs`` (and of its batch) on ``device``; a no-op on CPU."""
    if device.type == "cpu":
        return inputs
    moved = {f.name: getattr(inputs.batch, f.name) for f in fields(inputs.batch)}
    batch = replace(inputs.batch, **{k: v.to(device) for k, v in moved.items() if v is not None})
    extra = {f.name: getattr(inputs, f.name) for f in fields(inputs) if f.name != "batch"}
    return replace(
        inputs, batch=batch, **{k: v.to(device) for k, v in extra.items() if v is not None}
    )


def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])
