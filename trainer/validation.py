"""Validation on ``data.val_path``: the policy's greedy answers scored by the training rewards.

verl's ``_validate``: at ``trainer.val_before_train`` and every ``trainer.val_freq`` steps
(and after the last), one response per held-out prompt through the rollout engine (greedy
unless ``trainer.val_temperature`` > 0; sampled answers use a seed fixed per step),
scored by the same reward function as training; logged as ``val/...`` metrics in the run's
metrics.jsonl. The periodic evalkit evaluation (``schedule.eval_every``) is separate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from evalkit.engines.base import SamplingParams

from .data import TrainItem
from .greedy import one_response_each

Scorer = Callable[[TrainItem, list[str], list[int]], dict[str, Tensor]]
"""(item, texts, token lengths) -> per-key reward tensors (the recipe's reward path)."""


@dataclass
class Validator:
    """The held-out items and when to score them."""

    items: Sequence[TrainItem]
    build_request: Callable[[Any], Any]
    """Sample -> Request (the val data's own request builder)."""
    before_train: bool
    freq: int
    last_step: int
    filtered_overlong: int = 0
    """Val prompts left out for being over data.max_prompt_tokens (logged with each run)."""

    def due(self, step: int, start_step: int) -> bool:
        """Validate at ``step``? (``start_step`` is where this run starts: before training.)"""
        if step == start_step:
            return self.before_train
        return self.freq > 0 and (step % self.freq == 0 or step == self.last_step)

    def run(
        self,
        engine: Any,
        loop: Any,
        actor: Any,
        score: Scorer,
        sampling: SamplingParams,
        seed: int = 0,
    ) -> dict[str, float]:
        """One answer per val item, scored; ``val/<key>`` means and counts."""
        requests = [self.build_request(it.sample) for it in self.items]
        responses = one_response_each(engine, requests, actor, sampling, seed, loop)
        per_key: dict[str, list[float]] = {}
        by_type: dict[str, list[float]] = {}
        for item, resp in zip(self.items, responses, strict=True):
            rewards = score(item, [resp.text], [len(resp.token_ids)])
            for key, value in rewards.items():
                per_key.setdefault(key, []).append(float(value[0]))
            by_type.setdefault(item.sample.task_type, []).append(float(rewards["accuracy"][0]))
        out = {f"val/reward/{k}": sum(v) / len(v) for k, v in per_key.items()}
        out["val/response_length"] = sum(len(r.token_ids) for r in responses) / len(responses)
        out["val/n"] = float(len(responses))
        out["val/filtered_overlong"] = float(self.filtered_overlong)
        if len(by_type) > 1:
            out |= {f"val/accuracy/{t}": sum(v) / len(v) for t, v in sorted(by_type.items())}
        return out
