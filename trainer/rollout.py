"""Rollouts: n responses per prompt through an evalkit Engine, grouped by prompt.

The engine only samples tokens; log-probs are recomputed by the training model
(:func:`trainer.step.compute_logprobs`), so the engine's numerics never enter the loss.

Weight sync. The HF rollout engine (:class:`SharedHFEngine`) generates with the actor's own
in-memory module, so after each optimizer step it already samples from the current weights:
sync is free and exact. A vLLM rollout engine holds its own copy of the weights loaded from
``model`` at start; pushing the actor's weights into it after each step (e.g. through
``collective_rpc`` + ``load_weights`` on its workers) is NOT implemented yet, so with
``rollout.engine=vllm`` rollouts come from the initial weights; :func:`sync_weights` warns once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from evalkit.engines.base import Completion, Engine, Request, SamplingParams
from evalkit.engines.family import VISION_END, VISION_START
from evalkit.engines.hf_engine import HFConfig, HFEngine
from evalkit.errors import EvalkitError
from trainer.batch import Response

log = logging.getLogger(__name__)


class SharedHFEngine(HFEngine):
    """:class:`HFEngine` over an in-memory model (the actor's): weight sync is free."""

    def __init__(self, model: Any, processor: Any, family: Any) -> None:
        # deliberately no super().__init__(): that would load a second copy from disk
        self.config = HFConfig(model="<actor in memory>")
        self.family = family
        self.processor = processor
        self.model = model
        self.start_s = 0.0
        self._pool = ThreadPoolExecutor(1, "trainer-rollout")
        # A response must never contain visual placeholders: the training forward would
        # take them for media slots (an untrained policy does sample them). Their logits
        # are set to -inf during sampling; log-probs are recomputed by the actor anyway.
        tok = processor.tokenizer
        names = (family.image_pad, family.video_pad, VISION_START, VISION_END)
        banned = [int(tok.convert_tokens_to_ids(t)) for t in names]
        model.generation_config.suppress_tokens = sorted(set(banned))


def make_rollout_engine(name: str, model_dir: str, actor: Any, options: dict[str, Any]) -> Engine:
    """The rollout engine: ``hf`` shares the actor's module, others load ``model_dir``."""
    if name == "hf":
        return SharedHFEngine(actor.model, actor.processor, actor.family)
    from evalkit.engines import ENGINE_CONFIGS, ENGINES

    config = ENGINE_CONFIGS.get(name).model_validate({"model": model_dir, **options})
    engine: Engine = ENGINES.get(name)(config)
    return engine


_warned: set[int] = set()


def sync_weights(engine: Engine, actor: Any) -> None:
    """Make the rollout engine sample from the actor's current weights (see module docstring)."""
    if isinstance(engine, SharedHFEngine):
        if engine.model is not actor.model:
            raise EvalkitError("SharedHFEngine must hold the actor's own module")
        return
    if id(engine) not in _warned:
        _warned.add(id(engine))
        log.warning(
            "%s: weight sync is not implemented; rollouts come from the initial weights",
            type(engine).__name__,
        )


async def _generate_all(
    engine: Engine, requests: Sequence[Request], limit: int
) -> list[Completion]:
    gate = asyncio.Semaphore(limit)

    async def one(req: Request) -> Completion:
        async with gate:
            return await engine.generate(req)

    return list(await asyncio.gather(*(one(r) for r in requests)))


def sample_responses(
    engine: Engine,
    requests: Sequence[Request],
    counts: Sequence[int],
    sampling: SamplingParams,
    seed: int,
    concurrency: int = 8,
) -> list[list[Response]]:
    """``counts[i]`` sampled responses to ``requests[i]`` (one engine call with n each).

    Each prompt gets its own seed (``seed + i``), so a step's rollouts depend only on the
    weights and the step's seed: a resumed run samples the same tokens.
    """
    reqs = [
        replace(r, sampling=replace(sampling, n=k, seed=seed + i))
        for i, (r, k) in enumerate(zip(requests, counts, strict=True))
    ]
    completions = asyncio.run(_generate_all(engine, reqs, concurrency))
    groups: list[list[Response]] = []
    for req, comp, k in zip(reqs, completions, counts, strict=True):
        if comp.token_ids is None or len(comp.token_ids) != k or len(comp.texts) != k:
            raise EvalkitError(
                f"request {req.id}: the rollout engine returned "
                f"{0 if comp.token_ids is None else len(comp.token_ids)} token-id lists and "
                f"{len(comp.texts)} texts for n={k}; rollouts need token ids (hf or vllm)"
            )
        groups.append(
            [
                Response(list(ids), text)
                for ids, text in zip(comp.token_ids, comp.texts, strict=True)
            ]
        )
    return groups
