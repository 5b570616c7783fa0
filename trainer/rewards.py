"""Rewards are evalkit's scorers: reward = w_acc * accuracy + w_fmt * format (+ overlong penalty).

The per-sample work is :func:`evalkit.scoring.reward` (the same scorer that evaluation uses,
routed by task type), so a reward hack cannot show up as an evaluation gain nowhere. The
per-key rewards (accuracy, format, overlong, overall) are kept as tensors for logging and
for GDPO.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from evalkit.sample import Sample

from .config import RewardsConfig
from .reward_loader import RewardFn

REQUIRED_KEYS = ("accuracy", "format", "overall")


def overlong_penalty(length: int, max_length: int, buffer: int, factor: float = 1.0) -> float:
    """DAPO's soft overlong penalty of a response of ``length`` tokens.

    0 while length <= max_length - buffer; then linear down to -factor at max_length:
    factor * (max_length - buffer - length) / buffer; -factor beyond max_length.
    """
    if buffer <= 0 or buffer > max_length:
        raise ValueError(f"overlong buffer must be in (0, max_length={max_length}], got {buffer}")
    start = max_length - buffer
    if length <= start:
        return 0.0
    if length > max_length:
        return -factor
    return factor * (start - length) / buffer


@dataclass
class RewardBatch:
    """Per-key rewards of B responses, each a float tensor (B,)."""

    per_key: dict[str, Tensor]
    scorer_failed: list[str] = field(default_factory=list)
    """Ids of the samples whose scorer raised (rewarded 0, logged): kept out of
    ``per_key`` so that GDPO, which normalises every key, never trains on it."""

    @property
    def overall(self) -> Tensor:
        """The scalar reward each response is trained on."""
        return self.per_key["overall"]

    def metrics(self) -> dict[str, float]:
        """Batch means per key, for the metrics log."""
        out = {f"reward/{k}": float(v.mean()) for k, v in self.per_key.items()}
        return out | {"reward/scorer_failed": float(len(self.scorer_failed))}


def _evalkit_reward() -> RewardFn:
    # looked up at call time: evalkit.scoring grows its reward() independently of the trainer
    fn = getattr(importlib.import_module("evalkit.scoring"), "reward", None)
    if fn is None:
        raise RuntimeError(
            "evalkit.scoring.reward is not available in this checkout; pass reward_fn= "
            "explicitly or update evalkit"
        )
    reward_fn: RewardFn = fn
    return reward_fn


def compute_rewards(
    samples: Sequence[Sample],
    predictions: Sequence[str],
    response_lengths: Sequence[int],
    cfg: RewardsConfig,
    max_length: int,
    reward_fn: RewardFn | None = None,
) -> RewardBatch:
    """Score each (sample, prediction) and assemble the per-key reward tensors.

    ``max_length`` is the response budget
    the overlong penalty ramps towards (unless ``cfg.overlong.max_length`` is set).
    """
    if not len(samples) == len(predictions) == len(response_lengths):
        raise ValueError(
            f"samples ({len(samples)}), predictions ({len(predictions)}) and response_lengths "
            f"({len(response_lengths)}) must have the same length"
        )
    fn = reward_fn or _evalkit_reward()
    rows: dict[str, list[float]] = {k: [] for k in REQUIRED_KEYS}
    failed: list[str] = []
    for sample, prediction in zip(samples, predictions, strict=True):
        got = fn(sample, prediction, w_acc=cfg.w_acc, w_fmt=cfg.w_fmt)
        if got.get("scorer_failed"):  # a scorer bug: rewarded 0 and logged by the reward fn
            failed.append(str(sample.id))
        missing = [k for k in REQUIRED_KEYS if k not in got]
        if missing:
            raise ValueError(f"reward for sample {sample.id!r} lacks keys {missing}")
        if got["accuracy"] is None or got["overall"] is None:
            # scoring 0 instead would teach the policy from a fake signal
            raise ValueError(
                f"sample {sample.id!r} (task type {sample.task_type!r}) could not be scored; "
                "configure its scorer (e.g. an LLM judge) or drop such samples from the data"
            )
        for k in REQUIRED_KEYS:
            rows[k].append(float(got[k] or 0.0))
    per_key = {k: torch.tensor(v, dtype=torch.float32) for k, v in rows.items()}
    if cfg.overlong.enable:
        limit = cfg.overlong.max_length or max_length
        penalty = [
            overlong_penalty(n, limit, cfg.overlong.buffer, cfg.overlong.factor)
            for n in response_lengths
        ]
        per_key["overlong"] = torch.tensor(penalty, dtype=torch.float32)
        per_key["overall"] = per_key["overall"] + per_key["overlong"]
    return RewardBatch(per_key, failed)
