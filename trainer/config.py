"""The trainer's typed configuration: one YAML file onto these models, plus ``a.b=value`` overrides.

Unknown keys are errors (``extra="forbid"``); every field carries a docstring that doubles
as its help text. Algorithm names are checked against the registries when the config loads,
so a typo fails before any model is built. One module: the sections are parts of one model
tree (``TrainerConfig``) and its loader, most of the length being field docstrings.
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from evalkit.config import _explain
from evalkit.errors import ConfigError
from evalkit.registry import did_you_mean

__all__ = ["ActorConfig", "OptimizerConfig", "RunConfig", "TrainerConfig", "load_config"]

LossAggMode = Literal[
    "token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
    "seq-mean-token-sum-norm-mean",
]
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


class DataConfig(_Section):
    """Where training samples come from and how their media are budgeted."""

    train_path: str = ""
    """JSONL file of training samples in the unified schema (problem, problem_type, ...)."""
    val_path: str | None = None
    """Optional JSONL file of held-out samples."""
    video_root: str | None = None
    """Folder the rows' relative media paths start from (default: the data file's folder)."""
    cache_root: str | None = None
    """Frame cache folder (default: $EVALKIT_CACHE or ~/.cache/evalkit/frames)."""
    image_max_pixels: int = Field(default=262144, gt=0)
    """Pixel budget of one image (H*W after resizing)."""
    video_max_pixels: int = Field(default=65536, gt=0)
    """Pixel budget of one video frame (H*W after resizing)."""
    video_max_frames: int = Field(default=32, gt=0)
    """Most frames sampled from one video."""
    fps: float = Field(default=2.0, gt=0)
    """Frame sampling rate in frames per second (capped by video_max_frames)."""
    min_pixels: int | None = Field(default=None, gt=0)
    """Smallest H*W of a video frame or image after resizing (verl / EasyVideoR1
    data.min_pixels; capped by the max budgets). None: evalkit's FrameSpec / ImageSpec
    defaults (100352 per video frame, 3136 per image)."""
    max_prompt_tokens: int = Field(default=4096, gt=0)
    """Prompt budget (visual tokens included). With filter_overlong_prompts longer prompts are
    left out before training; otherwise one reaching rollout stops the run, naming it."""
    filter_overlong_prompts: bool = True
    """Leave prompts over max_prompt_tokens out before training, with a warning naming them and
    their count in ``data/filtered_overlong`` (verl filter_overlong_prompts)."""
    shuffle: bool = True
    """Shuffle the training samples each epoch (seeded)."""
    frame_source: Literal["cache", "decode"] = "cache"
    """Where rollout and the actor get frames: ``cache`` maps the entries (the product);
    ``decode`` decodes the video again in every stage, as the reference trainers do
    (``perf/train_step.py``'s comparison arm)."""


class KLControllerConfig(_Section):
    """How the in-reward KL coefficient moves (verl ``algorithm.kl_ctrl``)."""

    type: Literal["fixed", "adaptive"] = "fixed"
    """fixed: ``kl.coef`` throughout; adaptive: verl's ``AdaptiveKLController`` (Ziegler et
    al. 2019) from ``kl.coef``: after each step coef *= 1 + clip(KL / target_kl - 1, -0.2, 0.2)
    * rows / horizon, KL the batch mean of the rows' token-mean KL. Needs ``kl.in_reward``
    (verl drives only the in-reward KL with it)."""
    target_kl: float = Field(default=0.1, gt=0)
    """KL the adaptive controller steers to (verl default 0.1)."""
    horizon: int = Field(default=10000, gt=0)
    """Rows over which a full proportional correction applies (verl default 10000)."""


class KLConfig(_Section):
    """Optional KL regularisation against the frozen reference model."""

    estimator: str = "off"
    """KL estimator per token (trainer.algorithms.kl, verl's names): off, k1 / kl, abs,
    k2 / mse, k3 / low_var_kl (clamped to [-10, 10] as verl), k3_unclamped, and the
    straight-through ``+`` variants (k1+, k3+ / low_var_kl+, ...: the value of the named
    estimator, the gradient of k2)."""
    coef: float = Field(default=0.0, ge=0)
    """Weight of the KL term (the adaptive controller's starting value)."""
    in_reward: bool = False
    """Put -coef*KL into the token rewards instead of the loss (verl use_kl_in_reward /
    apply_kl_penalty): GRPO, RLOO and REINFORCE++-baseline sum them into the score,
    REINFORCE++ and ReMax give each token its reward-to-go (the KL from that token on)."""
    kl_ctrl: KLControllerConfig = Field(default_factory=KLControllerConfig)
    """The in-reward coefficient's controller (verl algorithm.kl_ctrl)."""

    @model_validator(mode="after")
    def _check(self) -> KLConfig:
        from .algorithms import KL_ESTIMATORS

        if self.estimator != "off" and self.estimator not in KL_ESTIMATORS:
            raise ValueError(KL_ESTIMATORS._unknown(self.estimator) + " or off")
        if self.kl_ctrl.type == "adaptive" and not (self.in_reward and self.estimator != "off"):
            raise ValueError(
                "kl.kl_ctrl.type=adaptive drives the in-reward KL (as verl): set kl.in_reward "
                "true and a kl.estimator"
            )
        return self


class DynamicSamplingConfig(_Section):
    """DAPO dynamic sampling: drop groups whose filter metric is all equal, refill (verl)."""

    enable: bool = False
    """Turn dynamic sampling on."""
    metric: Literal["acc", "score", "seq_reward"] = "acc"
    """Filter metric (verl filter_groups.metric): acc = accuracy, score = reward before the
    overlong penalty, seq_reward = overall reward."""
    keep_singletons: bool = True
    """Keep groups of one response (verl keeps them; False drops them)."""
    keep_rule: Literal["std", "range"] = "std"
    """When a group has signal: std = numpy's population std of its values > 0 (verl-recipe;
    equal floats whose mean rounds can pass), range = max > min (exact; a deviation)."""
    max_tries: int = Field(default=0, ge=0)
    """Most generation batches per step (verl max_num_gen_batches; 0 = no limit)."""
    on_shortfall: Literal["raise", "partial"] = "raise"
    """When tries run out: raise (verl) or train on the groups there are, with a warning."""


class RolloutCorrectionConfig(_Section):
    """Truncated importance sampling for the rollout engine's mismatch (verl's rollout_is).

    The mismatch between the engine's and the trainer's log-probs of the sampled tokens is
    logged every step (``rollout_corr/*``) whatever the mode.
    """

    mode: Literal["none", "token", "sequence"] = "none"
    """none: only measure; token: w_t = min(pi_old/pi_rollout, cap) per token; sequence:
    w = min(prod_t pi_old/pi_rollout, cap) per sequence. w multiplies the policy loss."""
    cap: float = Field(default=2.0, gt=0)
    """Upper bound C of the weights (verl rollout_is_threshold, default 2)."""
    rollout_is_batch_normalize: bool = False
    """Divide the truncated weights by their batch mean (verl rollout_is_batch_normalize):
    over the valid tokens (token mode) or the sequences (sequence mode)."""
    rollout_rs: str | None = None
    """Rejection sampling (verl rollout_rs): comma-separated options among token_k1/k2/k3,
    seq_sum_k1/k2/k3, seq_mean_k1/k2/k3, seq_max_k2/k3 (trainer.algorithms.rollout_correction
    RS_STATISTICS); rejected tokens / sequences leave the response mask. None: off."""
    rollout_rs_threshold: str | float | None = None
    """Bounds of rollout_rs (verl rollout_rs_threshold): one for all options or one per option,
    comma separated; k1 options take ``lower_upper`` ratio bounds (one value u: [1/u, u])."""

    @model_validator(mode="after")
    def _check(self) -> RolloutCorrectionConfig:
        from .algorithms.rollout_correction import RS_STATISTICS, parse_rs_thresholds

        if self.rollout_rs is None:
            return self
        names = [o.strip() for o in self.rollout_rs.split(",") if o.strip()]
        for name in names:
            if name not in RS_STATISTICS:
                raise ValueError(RS_STATISTICS._unknown(name))
        if self.rollout_rs_threshold is None:
            raise ValueError("rollout_correction.rollout_rs needs rollout_rs_threshold")
        parse_rs_thresholds(names, self.rollout_rs_threshold)
        return self


class AlgorithmConfig(_Section):
    """Advantage estimator, policy loss and their knobs."""

    advantage: str = "grpo"
    """Advantage estimator name (grpo, rloo, reinforce_plus_plus,
    reinforce_plus_plus_baseline, remax, gdpo)."""
    norm_by_std: bool = True
    """GRPO/GDPO: divide by the group std (False gives Dr. GRPO)."""
    adv_eps: float = Field(default=1e-6, gt=0)
    """Added to standard deviations before dividing."""
    gamma: float = Field(default=1.0, ge=0, le=1)
    """REINFORCE++ discount of token rewards."""
    singleton_groups: Literal["verl", "zero"] = "verl"
    """Groups of one response: verl = mean 0 / std 1 (GRPO r/(1+eps), RLOO r); zero = 0."""
    gdpo_whiten: Literal["tokens", "sequences", "off"] = "tokens"
    """GDPO: whiten the summed advantages over the batch's valid tokens (EasyVideoR1,
    rsqrt(var+1e-8)), over its sequences ((A-mean)/(std+adv_eps)), or not at all."""
    gdpo_reward_keys: list[str] | None = Field(default_factory=lambda: ["accuracy", "format"])
    """GDPO: reward keys normalised one by one then summed (None: every key but overall)."""
    gdpo_key_weights: dict[str, float] = Field(default_factory=dict)
    """GDPO: weight of each reward key in the sum (default 1)."""
    policy_loss: str = "ppo_clip"
    """Policy loss name (ppo_clip, gspo, cispo)."""
    clip_eps_low: float = Field(default=0.2, ge=0)
    """Lower clip range: the ratio is clipped below at 1 - clip_eps_low."""
    clip_eps_high: float = Field(default=0.2, ge=0)
    """Upper clip range: the ratio is clipped above at 1 + clip_eps_high (DAPO: 0.28)."""
    dual_clip_c: float | None = 3.0
    """Dual-clip bound c > 1 for negative advantages, ppo_clip only (verl: 3; None = off)."""
    loss_agg_mode: LossAggMode = "token-mean"
    """How per-token losses become one number (token-mean is global over micro-batches)."""
    gspo_force_seq_mean: bool = True
    """GSPO's policy term aggregates with seq-mean-token-mean whatever loss_agg_mode says; the
    KL and entropy terms keep loss_agg_mode (as verl's compute_policy_loss_gspo)."""
    loss_agg_max_len: int | None = None
    """Constant divisor of seq-mean-token-sum-norm (default: rollout.max_response_tokens)."""
    kl: KLConfig = Field(default_factory=KLConfig)
    """KL regularisation against the reference model."""
    dynamic_sampling: DynamicSamplingConfig = Field(default_factory=DynamicSamplingConfig)
    """DAPO dynamic sampling."""
    rollout_correction: RolloutCorrectionConfig = Field(default_factory=RolloutCorrectionConfig)
    """Rollout/trainer mismatch: always measured, optionally corrected (TIS)."""

    @model_validator(mode="after")
    def _check(self) -> AlgorithmConfig:
        from .algorithms import ADVANTAGES, POLICY_LOSSES

        for name, reg in ((self.advantage, ADVANTAGES), (self.policy_loss, POLICY_LOSSES)):
            if name not in reg:
                raise ValueError(reg._unknown(name))
        if self.dual_clip_c is not None and self.dual_clip_c <= 1.0:
            raise ValueError(f"dual_clip_c must be > 1, got {self.dual_clip_c}")
        if self.kl.in_reward and self.kl.estimator != "off" and self.advantage == "gdpo":
            # GDPO normalises the per-key scores; the KL penalty never reaches them
            raise ValueError("kl.in_reward does not reach gdpo's per-key rewards; use the loss")
        explicit_dual = "dual_clip_c" in self.model_fields_set and self.dual_clip_c is not None
        if explicit_dual and self.policy_loss not in ("ppo_clip", "vanilla"):
            raise ValueError(f"dual_clip_c applies to ppo_clip only, not {self.policy_loss!r}")
        if self.clip_eps_low > 1.0:
            raise ValueError(f"clip_eps_low must be <= 1 (ratio >= 0), got {self.clip_eps_low}")
        return self

    @property
    def policy_agg_mode(self) -> str | None:
        """The policy term's own aggregation where it differs (GSPO), else None."""
        if self.policy_loss == "gspo" and self.gspo_force_seq_mean:
            return "seq-mean-token-mean"
        return None


class OverlongConfig(_Section):
    """DAPO's soft overlong penalty: linear from 0 to -1 over the last ``buffer`` tokens."""

    enable: bool = False
    """Add the penalty to the overall reward."""
    buffer: int = Field(default=256, gt=0)
    """Length of the penalty ramp in tokens, ending at max_length."""
    max_length: int | None = None
    """Length at which the penalty reaches -1 (default: rollout.max_response_tokens)."""
    factor: float = Field(default=1.0, ge=0)
    """Scale of the penalty (1.0: from 0 to -1)."""


class RewardsConfig(_Section):
    """reward = w_acc * accuracy + w_fmt * format (+ overlong penalty)."""

    w_acc: float = 0.9
    """Weight of the accuracy reward (the evalkit scorer's value)."""
    w_fmt: float = 0.1
    """Weight of the format reward."""
    overlong: OverlongConfig = Field(default_factory=OverlongConfig)
    """Soft overlong penalty."""
    function: str | None = Field(default=None, pattern=r"^(.+\.py:[A-Za-z_]\w*|[\w.-]+)$")
    """``path/to/file.py:fn`` or a registered reward function's name (``trainer.reward_loader``),
    fn(sample, prediction, w_acc=, w_fmt=) -> {accuracy, format, overall}, loaded at startup
    (None: evalkit's scorers)."""

    @field_validator("function")
    @classmethod
    def _registered(cls, value: str | None) -> str | None:
        from .reward_loader import REWARD_FUNCTIONS

        if value is not None and ":" not in value and value not in REWARD_FUNCTIONS:
            raise ValueError(REWARD_FUNCTIONS._unknown(value))
        return value


class MixPolicyConfig(_Section):
    """Mixed groups: online responses plus the sample's offline trajectory in the last slot."""

    enable_mix_policy: bool = False
    """Put the offline trajectory (offline_output) in the n-th slot of its group."""
    mode: Literal["append", "replace_last"] = "append"
    """append (evalkit): generate n-1, append the offline slot (a closed gate leaves n-1);
    replace_last (EasyVideoR1): generate n, score them, replace the last one (always n)."""
    accuracy_gate: float | None = None
    """Gate on the online group's mean accuracy (None: always mix). append inserts when the
    mean <= this; replace_last replaces when the mean < this (EasyVideoR1's strict test)."""


class ScheduleConfig(_Section):
    """How long to train and how batches are cut."""

    steps: int = Field(default=100, ge=1)
    """Optimizer steps to run."""
    batch_size: int = Field(default=8, ge=1)
    """Prompts (groups) per step."""
    micro_batch_size: int = Field(default=4, ge=1)
    """Sequences per forward/backward pass; gradients accumulate over micro-batches."""
    # -- PPO-style update (verl's actor.ppo_mini_batch_size / actor.ppo_epochs) --
    ppo_mini_batch_size: int | None = Field(default=None, ge=1)
    """Prompts (whole groups) per optimizer step, as verl counts it before multiplying by n;
    the rollout batch is cut into batch_size / ppo_mini_batch_size mini-batches (None: one
    optimizer step on the whole batch)."""
    ppo_epochs: int = Field(default=1, ge=1)
    """Passes over the rollout batch; old log-probs are computed once, before the first."""
    eval_every: int = Field(default=0, ge=0)
    """Evaluate every N steps (0 = never)."""
    eval_benchmarks: list[str] = Field(default_factory=list)
    """Benchmarks evaluated by the periodic evaluation hook."""
    eval_data_root: str | None = None
    """Folder holding the evaluated benchmarks' local copies (evalkit run --data-root)."""
    eval_limit: int | None = Field(default=32, ge=1)
    """Samples per benchmark in each periodic evaluation (None: all)."""
    eval_engine: str = "hf"
    """evalkit engine of the periodic evaluation (hf on CPU, vllm on GPU). vllm stays warm
    from one due step to the next, each step's weights loaded into it in place."""
    eval_engine_options: dict[str, Any] = Field(default_factory=dict)
    """Its settings (``evalkit run --engine-opt``), e.g. ``{dtype: float32}``."""

    @model_validator(mode="after")
    def _check_ppo(self) -> ScheduleConfig:
        mini = self.ppo_mini_batch_size
        if mini is not None and (mini > self.batch_size or self.batch_size % mini):
            raise ValueError(
                f"schedule.ppo_mini_batch_size={mini} must divide schedule.batch_size="
                f"{self.batch_size} (verl's rule: equal mini-batches of whole groups)"
            )
        return self


class CheckpointConfig(_Section):
    """Where and how often checkpoints are written."""

    dir: str = "checkpoints"
    """Directory holding one sub-directory per saved step."""
    every: int = Field(default=50, ge=0)
    """Save every N steps (0 = only at the end)."""
    keep_last: int | None = Field(default=None, ge=1)
    """Keep only the newest N checkpoints (None = keep all)."""


class InputsConfig(_Section):
    """How a missing model or data file is made (trainer.inputs): built on demand, announced,
    or refused before anything loads with the command that makes it."""

    tiny_model: str | None = None
    """When ``model`` does not exist: build a tiny random checkpoint of this family there
    (``evalkit model tiny --family F MODEL``: qwen2_vl, qwen2_5_vl, qwen3_vl). None: refuse."""
    synthvideo_n: int | None = Field(default=None, ge=1)
    """When data.train_path / data.val_path does not exist and is named
    ``synthvideo_<train|test>.<unified|offline>.jsonl``: generate SynthVideo there with this
    many questions per family (``evalkit synth --split S --unified``; offline: with offline
    trajectories for mix-policy), seeded by ``seed``. None: refuse."""
    get_model: str | None = None
    """The command that makes ``model``, named when it is missing and not built here."""
    get_data: str | None = None
    """The command that makes the data files, named when one is missing and not built here."""

    @model_validator(mode="after")
    def _check(self) -> InputsConfig:
        # the trainer trains the Qwen families only (no torch at import)
        from evalkit.tiny_checkpoint import QWEN_FAMILIES as FAMILIES

        if self.tiny_model is not None and self.tiny_model not in FAMILIES:
            hint = did_you_mean(self.tiny_model, FAMILIES)
            raise ValueError(f"inputs.tiny_model {self.tiny_model!r}{hint} (one of {FAMILIES})")
        return self


class TrainerConfig(_Section):
    """The whole trainer configuration."""

    model: str = ""
    """Path of the policy model (a local HF checkpoint directory)."""
    output_dir: str = ""
    """Where metrics.jsonl and evaluation runs go (default: the parent of checkpoint.dir)."""
    seed: int = 0
    """Seed of python, numpy and torch random generators."""
    data: DataConfig = Field(default_factory=DataConfig)
    """Training data and media budgets."""
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    """Rollout sampling."""
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    """Advantage estimator, policy loss, KL, dynamic sampling."""
    rewards: RewardsConfig = Field(default_factory=RewardsConfig)
    """Reward weights and the overlong penalty."""
    mix_policy: MixPolicyConfig = Field(default_factory=MixPolicyConfig)
    """Mix-policy groups."""
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig)
    """Optimizer."""
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig)
    """Steps, batch sizes, periodic evaluation."""
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    """Checkpointing."""
    actor: ActorConfig = Field(default_factory=ActorConfig)
    """Frozen vision tower, entropy bonus, vision shared per group."""
    trainer: RunConfig = Field(default_factory=RunConfig)
    """Validation on data.val_path and metric loggers."""
    distributed: DistributedConfig = Field(default_factory=DistributedConfig)
    """Ray worker group (trainer.distributed); workers: 0 trains in this process."""
    inputs: InputsConfig = Field(default_factory=InputsConfig)
    """How a missing model or data file is built, or which command makes it."""

    @model_validator(mode="after")
    def _check(self) -> TrainerConfig:
        if self.mix_policy.enable_mix_policy and self.rollout.n < 2:
            raise ValueError("mix_policy.enable_mix_policy needs rollout.n >= 2 (n-1 online + 1)")
        run = self.trainer
        if (run.val_before_train or run.val_freq) and not self.data.val_path:
            raise ValueError("trainer.val_before_train / val_freq need data.val_path")
        over = self.rewards.overlong
        if over.enable and over.buffer > self.overlong_max_length:
            raise ValueError(  # a load-time error, not a traceback at the first reward
                f"rewards.overlong.buffer={over.buffer} exceeds its max_length "
                f"{self.overlong_max_length} (rewards.overlong.max_length or "
                "rollout.max_response_tokens): lower the buffer or raise the length"
            )
        return self

    @property
    def overlong_max_length(self) -> int:
        """Length at which the overlong penalty reaches its floor."""
        return self.rewards.overlong.max_length or self.rollout.max_response_tokens

    @property
    def agg_max_len(self) -> int:
        """Constant divisor of the seq-mean-token-sum-norm aggregation."""
        return self.algorithm.loss_agg_max_len or self.rollout.max_response_tokens


def shipped_configs() -> dict[str, Path]:
    """The configs shipped with evalkit (package data), by name (file name without .yaml)."""
    from evalkit._layout import package_folder

    folder = package_folder("evalkit.trainer") / "configs"
    return {p.stem: p for p in sorted(folder.glob("*.yaml"))}


def find_config(name: str | Path) -> Path:
    """A config file: ``name`` itself when it is a file, else the shipped config of that name
    (``grpo_synthvideo`` or ``grpo_synthvideo.yaml``, from any folder)."""
    path = Path(name)
    if path.is_file():
        return path
    shipped = shipped_configs()
    stem = path.name[: -len(".yaml")] if path.name.endswith(".yaml") else path.name
    if stem in shipped and (len(path.parts) == 1 or path.parts[-2] == "configs"):
        return shipped[stem]
    hint = did_you_mean(stem, list(shipped))
    raise ConfigError(
        f"--config {name}: no such file and no shipped config of that name{hint} "
        f"(shipped: {', '.join(shipped)}; python -m evalkit.trainer configs lists them)"
    )


def load_config(
    path: str | Path | None = None, overrides: list[str] | None = None
) -> TrainerConfig:
    """Load a YAML config (or defaults when ``path`` is None) and apply ``a.b=value`` overrides.

    Override values are parsed as YAML scalars/lists (``3``, ``0.28``, ``true``, ``null``,
    ``[a, b]``) and then checked against the field's type; a wrong key or value raises
    :class:`ConfigError` naming it.
    """
    where = str(path) if path is not None else "<defaults>"
    data: dict[str, Any] = {}
    if path is not None:
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"{path}: cannot read YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: the top level must be a mapping, got {type(data).__name__}")
    for item in overrides or []:
        _apply_override(data, item)
    try:
        return TrainerConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {_explain(exc)}") from exc


def _apply_override(data: dict[str, Any], item: str) -> None:
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(
            f"override {item!r}: expected key=value, e.g. algorithm.clip_eps_high=0.28"
        )
    parts = key.split(".")
    annotation = _field_annotation(parts, item)
    value: Any = raw
    if _is_str_field(annotation):
        if raw.strip() in ("null", "~") and _allows_none(annotation):
            value = None
    else:
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise ConfigError(f"override {item!r}: cannot parse value: {exc}") from exc
    node = data
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:  # absent, or an empty section in the YAML
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"override {item!r}: {'.'.join(parts[: i + 1])} is not a section")
        node = child
    node[parts[-1]] = value


def _field_annotation(parts: list[str], item: str) -> Any:
    """The type annotation of the field at ``parts``; unknown keys raise with a hint."""
    model: type[BaseModel] = TrainerConfig
    annotation: Any = None
    for i, part in enumerate(parts):
        fields = model.model_fields
        if part not in fields:
            where = ".".join(parts[:i]) or "top level"
            hint = did_you_mean(part, list(fields))
            raise ConfigError(f"override {item!r}: no key {part!r} in {where}{hint}")
        annotation = fields[part].annotation
        if i < len(parts) - 1:
            if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
                raise ConfigError(
                    f"override {item!r}: {'.'.join(parts[: i + 1])} is a value, not a section"
                )
            model = annotation
    return annotation


def _allows_none(annotation: Any) -> bool:
    return type(None) in typing.get_args(annotation)


def _is_str_field(annotation: Any) -> bool:
    """True for ``str`` and ``str | None`` fields, whose override values stay raw text."""
    if annotation is str:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args == [str]
    return False
