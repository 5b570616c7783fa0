"""One policy update: micro-batched forward/backward, global loss aggregation, clip, AdamW step.

The step knows nothing about rollouts, engines or rewards: it receives token ids, old
log-probs, advantages and masks (a :class:`StepInputs`) and a policy callable, so the HF
actor, FSDP wrapping and the Ray workers can plug in around it later.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from .algorithms.aggregation import AggNorm, aggregate
from .algorithms.kl import token_kl
from .algorithms.losses import POLICY_LOSSES, LossOptions
from .batch import PolicyFn, TrainBatch, response_logprobs
from .dynamic_batch import micro_batch_slices
from .entropy import logprobs_and_entropy, masked_mean

if TYPE_CHECKING:
    from .config import OptimizerConfig, TrainerConfig


@dataclass
class StepInputs:
    """Everything one update needs; tensors are (B, T) aligned with ``batch.response_ids``."""

    batch: TrainBatch
    old_logp: Tensor
    advantages: Tensor
    ref_logp: Tensor | None = None
    rollout_weights: Tensor | None = None
    """Rollout-correction (TIS) weights, detached, multiplying the per-token policy loss."""


@dataclass(frozen=True)
class StepSettings:
    """The knobs of an update, normally taken from the trainer config."""

    policy_loss: str = "ppo_clip"
    loss_options: LossOptions = field(default_factory=LossOptions)
    loss_agg_mode: str = "token-mean"
    """Aggregation of every term: policy (unless ``policy_agg_mode``), KL and entropy."""
    policy_agg_mode: str | None = None
    """Aggregation of the policy term alone (GSPO: seq-mean-token-mean, as verl); None: the
    same as ``loss_agg_mode``."""
    agg_max_len: int = 1
    kl_estimator: str = "off"
    kl_coef: float = 0.0
    micro_batch_size: int = 4
    max_token_len: int | None = None
    """Micro-batches by this token budget instead of ``micro_batch_size`` rows (dynamic bsz)."""
    grad_clip: float | None = 1.0
    temperature: float = 1.0
    ppo_epochs: int = 1
    """Passes over the rollout batch (see :func:`ppo_update`)."""
    ppo_mini_batch_size: int | None = None
    """Groups (prompts) per optimizer step; None: the whole batch in one step."""
    entropy_coeff: float = 0.0
    """Entropy bonus: per-token loss -= entropy_coeff * entropy (verl's entropy_coeff)."""

    @classmethod
    def from_config(cls, cfg: TrainerConfig) -> StepSettings:
        """Build from a :class:`trainer.config.TrainerConfig`."""
        algo = cfg.algorithm
        kl_in_loss = algo.kl.estimator != "off" and not algo.kl.in_reward
        return cls(
            policy_loss=algo.policy_loss,
            loss_options=LossOptions.from_config(algo),
            loss_agg_mode=algo.loss_agg_mode,
            policy_agg_mode=algo.policy_agg_mode,
            agg_max_len=cfg.agg_max_len,
            kl_estimator=algo.kl.estimator if kl_in_loss else "off",
            kl_coef=algo.kl.coef if kl_in_loss else 0.0,
            micro_batch_size=cfg.schedule.micro_batch_size,
            max_token_len=cfg.actor.max_token_len_per_gpu if cfg.actor.use_dynamic_bsz else None,
            grad_clip=cfg.optimizer.grad_clip,
            temperature=cfg.rollout.temperature or 1.0,
            ppo_epochs=cfg.schedule.ppo_epochs,
            ppo_mini_batch_size=cfg.schedule.ppo_mini_batch_size,
            entropy_coeff=cfg.actor.entropy_coeff,
        )


@dataclass
class StepResult:
    """The mini-batch loss (the number whose gradient was applied) and metrics."""

    loss: float
    metrics: dict[str, float]


def build_optimizer(params: Iterable[nn.Parameter], cfg: OptimizerConfig) -> torch.optim.AdamW:
    """AdamW from an :class:`trainer.config.OptimizerConfig`."""
    return torch.optim.AdamW(
        params, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay
    )


def _rows(inputs: StepInputs, index: Tensor | slice) -> StepInputs:
    ref = inputs.ref_logp[index] if inputs.ref_logp is not None else None
    weights = inputs.rollout_weights
    return StepInputs(
        inputs.batch.select(index),
        inputs.old_logp[index],
        inputs.advantages[index],
        ref,
        weights[index] if weights is not None else None,
    )


@torch.no_grad()
def compute_logprobs(
    policy: PolicyFn,
    batch: TrainBatch,
    micro_batch_size: int,
    temperature: float = 1.0,
    max_token_len: int | None = None,
    min_micro_batches: int = 0,
) -> Tensor:
    """Response log-probs (B, T) without gradient, micro-batched: old or reference log-probs.

    Micro-batches hold ``micro_batch_size`` rows, or as many consecutive rows as fit in
    ``max_token_len`` tokens when it is given (:mod:`.dynamic_batch`), at least
    ``min_micro_batches`` of them (data-parallel ranks agree on one count).

    A policy with a ``vision_cache`` (the HF actor) encodes each prompt's visual inputs once
    for the whole pass, however its group is cut into micro-batches.
    """
    cache = getattr(policy, "vision_cache", None)
    with cache.scope() if cache is not None else contextlib.nullcontext():
        parts = [
            response_logprobs(policy, batch.select(part), temperature)
            for part in micro_batch_slices(
                batch, micro_batch_size, max_token_len, min_micro_batches
            )
        ]
    return torch.cat(parts)


def _ratio_metrics(logp: Tensor, old_logp: Tensor, mask: Tensor) -> dict[str, Tensor]:
    """Token means of the importance ratio pi/pi_old and of |ratio - 1| (1 and 0 on-policy)."""
    ratio = torch.exp(logp - old_logp)
    count = mask.sum().clamp(min=1)
    return {
        "ratio_mean": (ratio * mask).sum() / count,
        "ratio_abs_dev": ((ratio - 1).abs() * mask).sum() / count,
    }


def accumulate_loss(
    policy: PolicyFn,
    inputs: StepInputs,
    settings: StepSettings,
    backward: bool = True,
    norm: AggNorm | None = None,
    min_micro_batches: int = 0,
) -> StepResult:
    """Sum of micro-batch losses with mini-batch-wide denominators; backward per micro-batch.

    Because every denominator is global (:class:`AggNorm`), the sum equals the loss of the
    whole mini-batch in one pass and the accumulated gradient equals its gradient. ``norm``
    defaults to this mini-batch's own counts; a data-parallel caller passes counts reduced
    over its ranks instead, and with a token budget ``min_micro_batches``: the count its
    ranks agreed on (each micro-batch is a sequence of FSDP collectives).
    """
    mask = inputs.batch.response_mask
    norm = norm or AggNorm.of(mask, settings.agg_max_len)
    loss_fn = POLICY_LOSSES.get(settings.policy_loss)
    total = 0.0
    sums: dict[str, float] = {}
    size, budget = settings.micro_batch_size, settings.max_token_len
    mode = settings.loss_agg_mode
    for part in micro_batch_slices(inputs.batch, size, budget, min_micro_batches):
        mb = _rows(inputs, part)
        mb_mask = mb.batch.response_mask
        bonus = settings.entropy_coeff != 0.0
        logp, entropy = logprobs_and_entropy(policy, mb.batch, settings.temperature, bonus)
        out = loss_fn(logp, mb.old_logp, mb.advantages, mb_mask, settings.loss_options)
        per_token = out.loss
        if mb.rollout_weights is not None:  # TIS reweights the policy term only (as verl)
            per_token = per_token * mb.rollout_weights
        loss = aggregate(settings.policy_agg_mode or mode, per_token, mb_mask, norm)
        if bonus:  # verl: policy loss - entropy_coeff * agg(entropy), agg by loss_agg_mode
            loss = loss - settings.entropy_coeff * aggregate(mode, entropy, mb_mask, norm)
        out.metrics["entropy"] = masked_mean(entropy.detach(), mb_mask)
        if settings.kl_estimator != "off":
            if mb.ref_logp is None:
                raise ValueError("KL in the loss needs StepInputs.ref_logp")
            kl = token_kl(settings.kl_estimator, logp, mb.ref_logp)
            loss = loss + settings.kl_coef * aggregate(mode, kl, mb_mask, norm)
            out.metrics["kl"] = (kl.detach() * mb_mask).sum() / mb_mask.sum().clamp(min=1)
        out.metrics |= _ratio_metrics(logp.detach(), mb.old_logp, mb_mask)
        if backward:
            loss.backward()
        total += float(loss.detach())
        share = float(mb_mask.sum()) / max(norm.total_tokens, 1.0)
        for key, value in out.metrics.items():  # token-weighted means over the mini-batch
            sums[key] = sums.get(key, 0.0) + share * float(value)
    return StepResult(total, sums)


def policy_step(
    policy: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: StepInputs,
    settings: StepSettings,
    norm: AggNorm | None = None,
) -> StepResult:
    """One optimizer step on the mini-batch ``inputs`` (gradients clipped to ``grad_clip``)."""
    policy.train()
    optimizer.zero_grad(set_to_none=True)
    result = accumulate_loss(policy, inputs, settings, norm=norm)
    params = [p for p in policy.parameters() if p.grad is not None]
    max_norm = settings.grad_clip if settings.grad_clip is not None else math.inf
    grad_norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm))
    result.metrics["grad_norm"] = grad_norm
    if math.isfinite(grad_norm):
        optimizer.step()
    else:  # one bad batch must not poison the weights
        result.metrics["skipped_nonfinite_grad"] = 1.0
    optimizer.zero_grad(set_to_none=True)
    return result


def mini_batches(inputs: StepInputs, groups_per_mini_batch: int | None) -> list[StepInputs]:
    """Split the rollout batch into consecutive mini-batches of whole groups (verl's split).

    ``None`` (or a size covering every group) returns ``[inputs]`` itself, untouched. Groups
    are never cut, so group-relative quantities stay within one mini-batch; the last
    mini-batch may hold fewer groups (dynamic sampling can deliver a partial batch).
    """
    gids = inputs.batch.group_ids
    order = list(dict.fromkeys(gids.tolist()))  # group ids in order of first appearance
    if groups_per_mini_batch is None or groups_per_mini_batch >= len(order):
        return [inputs]
    parts = []
    for start in range(0, len(order), groups_per_mini_batch):
        chosen = torch.tensor(order[start : start + groups_per_mini_batch], dtype=gids.dtype)
        parts.append(_rows(inputs, torch.isin(gids, chosen).nonzero().squeeze(1)))
    return parts


def ppo_update(
    policy: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: StepInputs,
    settings: StepSettings,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
) -> list[StepResult]:
    """verl's actor update: ``ppo_epochs`` passes x mini-batches, one optimizer step each.

    ``inputs.old_logp`` must be computed once, before this call, by the weights that
    produced the rollout (as verl's ``compute_log_prob``); it stays fixed through every
    update, so from the second optimizer step on the ratio departs from 1 and clipping acts.
    Mini-batches run in a fixed order (no shuffling, no RNG drawn), so resuming from a
    checkpoint taken between steps repeats the same updates. With one epoch and one
    mini-batch this is exactly one :func:`policy_step` on the whole batch. A ``scheduler``
    given here advances after every optimizer step (``optimizer.lr_step_per``).
    """
    parts = mini_batches(inputs, settings.ppo_mini_batch_size)
    results = []
    for _ in range(settings.ppo_epochs):
        for part in parts:
            results.append(policy_step(policy, optimizer, part, settings))
            if scheduler is not None:
                scheduler.step()
    return results


def summarize_updates(results: list[StepResult]) -> dict[str, float]:
    """Step metrics: the mean of each update's loss and metrics, and ``ppo/updates``."""
    keys = dict.fromkeys(k for r in results for k in r.metrics)
    out = {"loss": sum(r.loss for r in results) / len(results)}
    for key in keys:
        values = [r.metrics[key] for r in results if key in r.metrics]
        # a skip flag counts the skipped updates; everything else is a mean over updates
        out[key] = sum(values) if key.startswith("skipped") else sum(values) / len(values)
    if results[-1].metrics.get("ratio_abs_dev") is not None:
        out["ppo/last_ratio_abs_dev"] = results[-1].metrics["ratio_abs_dev"]
    out["ppo/updates"] = float(len(results))
    return out
