"""Config sections of the recipe pieces: optimizer + LR schedule, actor options, run options,
rollout.

Split from :mod:`trainer.config` (which re-exports them) to keep each module small; the
YAML keys are ``optimizer``, ``actor``, ``trainer`` and ``rollout`` (verl's names for the
same knobs).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

LoggerName = Literal["jsonl", "tensorboard", "wandb"]
DEFAULT_LOGGERS: tuple[LoggerName, ...] = ("jsonl", "tensorboard")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class OptimizerConfig(_Section):
    """AdamW, gradient clipping and the learning-rate schedule."""

    lr: float = Field(default=1e-6, gt=0)
    """Learning rate (the peak of the schedule)."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW betas."""
    eps: float = Field(default=1e-8, gt=0)
    """AdamW epsilon."""
    weight_decay: float = Field(default=0.01, ge=0)
    """AdamW decoupled weight decay."""
    grad_clip: float | None = Field(default=1.0, gt=0)
    """Clip the global gradient norm to this (None = no clipping)."""
    lr_schedule: Literal["constant", "cosine"] = "constant"
    """After warmup: constant, or cosine decay to min_lr_ratio * lr at the last step (verl's
    warmup_style / get_cosine_schedule_with_warmup, half a cosine)."""
    warmup_steps: int | None = Field(default=None, ge=0)
    """Linear warmup from 0 over this many schedule steps (verl lr_warmup_steps; None: use
    warmup_ratio). As in verl, the k-th schedule step (from 0) uses lr * k / warmup_steps."""
    warmup_ratio: float = Field(default=0.0, ge=0, lt=1)
    """Warmup as a share of the schedule's steps, used when warmup_steps is None (verl
    lr_warmup_steps_ratio)."""
    min_lr_ratio: float = Field(default=0.0, ge=0, le=1)
    """Cosine only: the floor of the decay as a fraction of lr."""
    lr_step_per: Literal["train_step", "optimizer_step"] = "train_step"
    """When the schedule advances: once per training step, after all its mini-batch x epoch
    updates (verl's update_actor), or once per optimizer step (schedule length then
    schedule.steps x updates per step)."""


class ActorConfig(_Section):
    """What of the policy is trained, the actor's extra loss terms and forward options."""

    freeze_vision_tower: bool = False
    """Keep the vision encoder fixed: requires_grad False, left out of the optimizer."""
    entropy_coeff: float = Field(default=0.0, ge=0)
    """Entropy bonus: loss -= entropy_coeff * aggregated token entropy (verl entropy_coeff).
    The mean token entropy is logged as ``entropy`` whatever the coefficient."""
    share_vision_per_group: bool = True
    """Old/ref log-prob forwards (no gradient) encode each prompt's images/video once and
    reuse the features for the group's n responses (the update forward keeps per-row vision)."""
    padding_free: bool = False
    """Pack each micro-batch's sequences into one row with per-sequence M-RoPE positions and
    a block-diagonal causal mask, no padding (trainer.packing); log-probs and entropy from
    hidden states projected in chunks of logprob_chunk_tokens. Equal to the padded path
    within float rounding (tests/test_trainer_packing.py). Not for linear-attention models."""
    logprob_chunk_tokens: int = Field(default=1024, ge=1)
    """padding_free: tokens per vocabulary projection (memory: chunk x vocab floats)."""
    use_dynamic_bsz: bool = False
    """Micro-batches by token budget (max_token_len_per_gpu) instead of
    schedule.micro_batch_size rows (verl's use_dynamic_bsz); results are unchanged."""
    max_token_len_per_gpu: int | None = Field(default=None, ge=1)
    """Token budget of one micro-batch (prompt + response tokens of its rows, unpadded)."""
    gradient_checkpointing: bool = False
    """Recompute each decoder/vision block's activations in the backward instead of keeping
    them (HF gradient_checkpointing_enable, non-reentrant): less memory, ~1/3 more compute."""

    @model_validator(mode="after")
    def _check(self) -> ActorConfig:
        if self.use_dynamic_bsz and self.max_token_len_per_gpu is None:
            raise ValueError("actor.use_dynamic_bsz needs actor.max_token_len_per_gpu")
        return self


class RunConfig(_Section):
    """Validation and logging of a run (YAML key ``trainer``, as verl's trainer section)."""

    val_before_train: bool = False
    """Score the policy on data.val_path before the first step (logged at the start step)."""
    val_freq: int = Field(default=0, ge=0)
    """Score the policy on data.val_path every N steps and after the last one (0 = never)."""
    val_limit: int | None = Field(default=None, ge=1)
    """Validate on the first N rows of the val set (None: all)."""
    val_temperature: float = Field(default=0.0, ge=0)
    """Sampling temperature of the validation answers (0: greedy, verl's default;
    EasyVideoR1's video_rl.yaml samples at 0.7, top_p 0.95)."""
    val_top_p: float = Field(default=1.0, gt=0, le=1)
    """Nucleus threshold of the validation answers."""
    loggers: list[LoggerName] = Field(default_factory=lambda: list(DEFAULT_LOGGERS))
    """Metric sinks: jsonl (metrics.jsonl, always needed), tensorboard (when installed),
    wandb (imported only when listed; WANDB_MODE / wandb_mode=offline work without network)."""
    project: str = "evalkit-trainer"
    """wandb project name."""
    experiment: str | None = None
    """wandb run name (default: the output folder's name)."""
    wandb_mode: Literal["online", "offline", "disabled"] | None = None
    """wandb mode (None: wandb's own default, which honours WANDB_MODE)."""

    @model_validator(mode="after")
    def _check(self) -> RunConfig:
        if "jsonl" not in self.loggers:
            raise ValueError(
                "trainer.loggers must include jsonl: metrics.jsonl is the run's record "
                "(resume, reports and the eval hook write to it)"
            )
        return self


class DistributedConfig(_Section):
    """Data-parallel training on Ray (``trainer.distributed``); 0 workers: one process."""

    workers: int = Field(default=0, ge=0)
    """Policy workers (FSDP2 ranks): one per GPU, or per ``cpus_per_worker`` CPUs."""
    cpus_per_worker: float = Field(default=1.0, gt=0)
    """CPUs each worker reserves (its torch thread count, rounded down, at least 1)."""
    gpus_per_worker: float = Field(default=0.0, ge=0)
    """GPUs each worker reserves; above 0 the group runs NCCL, else gloo on CPU."""
    ray_address: str | None = None
    """An existing Ray cluster (``auto``, ``HOST:6379``); None: a local instance of our own."""
    timeout_s: float = Field(default=600.0, gt=0)
    """Process-group timeout: unmatched collectives fail after this, instead of hanging."""
    init: Literal["all_load", "rank0"] = "all_load"
    """How the workers get the weights: every rank reads the checkpoint (all_load), or only
    rank 0 does and broadcasts while the others start from the meta device (rank0: one
    reader, no N full copies in host memory; for large models)."""
    ref_offload: bool = False
    """GPU only: the workers' reference policy (KL) keeps its shards in CPU memory."""
    rollout_ranks: Literal["first", "all"] = "first"
    """With ``rollout.engine: vllm``, which ranks host a colocated engine: ``first`` (rank 0),
    ``all`` (one per rank, the prompts split across them); see trainer.distributed.colocate."""


class RolloutConfig(_Section):
    """How responses are sampled for each prompt."""

    n: int = Field(default=8, ge=1)
    """Responses per prompt (the group size)."""
    temperature: float = Field(default=1.0, ge=0)
    """Sampling temperature of online responses."""
    top_p: float = Field(default=1.0, gt=0, le=1)
    """Nucleus sampling threshold."""
    max_response_tokens: int = Field(default=1024, gt=0)
    """Response budget in tokens; longer responses are cut (and offline ones truncated)."""
    engine: str = "hf"
    """Name of the evalkit engine that generates rollouts (hf, vllm, ...)."""
    engine_options: dict[str, Any] = Field(default_factory=dict)
    """Settings of a non-hf rollout engine (its evalkit engine config), e.g. max_num_seqs."""
    sync_bucket_mb: float = Field(default=512.0, gt=0)
    """Weight sync into a vLLM engine: most MB per bucket (one RPC each; trainer.weight_sync)."""
    sync_transport: Literal["auto", "shm", "cuda_ipc", "file"] = "auto"
    """How buckets travel: auto = CUDA IPC on GPU, shared memory on CPU; file = the old
    safetensors round trip (a baseline for perf/weight_sync.py, not for runs)."""
    sleep_level: int = Field(default=1, ge=0, le=2)
    """vLLM sleep during training (0 off, 1 offload weights, 2 drop them: they are synced
    on wake anyway); a no-op where vLLM has no sleep mode (CPU)."""
