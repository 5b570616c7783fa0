"""Rollouts: n responses per prompt through an evalkit Engine, grouped by prompt.

The engine samples tokens; log-probs are recomputed by the training model
(:func:`trainer.step.compute_logprobs`). The engine's own log-probs of the sampled tokens
(``Response.logprobs``) only measure the mismatch and weight the loss when asked
(:mod:`trainer.algorithms.rollout_correction`).

Weight sync. The HF rollout engine (:class:`SharedHFEngine`) generates with the actor's own
in-memory module, so after each optimizer step it already samples from the current weights:
sync is free and exact. A vLLM engine holds its own copy in its worker processes; it is
started with :class:`WeightSyncExtension` as vLLM's worker extension, and
:func:`sync_weights` writes the actor's state dict to a safetensors file and
tells every worker its PATH through ``collective_rpc``; each loads it with vLLM's in-place
``reload_weights``; then the prefix and encoder caches (old weights) are dropped. A file
round trip per step is fine for small models on one machine; large models want CUDA IPC or
an NCCL broadcast (not implemented).

vLLM's ``AsyncLLM`` is bound to the event loop it was created in, so all engine calls go
through one persistent :class:`EngineLoop` for the whole run.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from evalkit.engines.base import Completion, Engine, Request, SamplingParams
from evalkit.engines.family import VISION_END, VISION_START
from evalkit.engines.hf_engine import HFConfig, HFEngine
from evalkit.errors import EvalkitError
from evalkit.registry import Registry

from .batch import Response

log = logging.getLogger(__name__)
T = TypeVar("T")


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
        model.generation_config.suppress_tokens = visual_token_ids(processor.tokenizer, family)


def visual_token_ids(tokenizer: Any, family: Any) -> list[int]:
    """Ids of the tokens that mark media in a prompt (never valid in a response)."""
    names = (family.image_pad, family.video_pad, VISION_START, VISION_END)
    return sorted({int(tokenizer.convert_tokens_to_ids(t)) for t in names})


def cut_at_visual_tokens(response: Response, banned: set[int], tokenizer: Any) -> Response:
    """The response up to its first visual placeholder token (engines that cannot suppress
    them, e.g. vLLM through evalkit's SamplingParams, may sample one); text re-decoded."""
    for i, t in enumerate(response.token_ids):
        if t in banned:
            ids = response.token_ids[:i]
            lps = None if response.logprobs is None else response.logprobs[:i]
            return Response(ids, tokenizer.decode(ids, skip_special_tokens=True), logprobs=lps)
    return response


class EngineLoop:
    """One event loop for the run: engines are created and called on it, step after step."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` to completion on the run's loop."""
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        """Close the loop (after the engine was closed on it)."""
        self.loop.close()


class WeightSyncExtension:
    """vLLM worker extension (``worker_extension_cls``): load weights sent by the trainer."""

    reload_weights: Any  # provided by the vLLM worker class this extends

    def trainer_load_weights(self, path: str) -> int:
        """Load a safetensors file of HF-named weights into the worker's model."""
        from safetensors.torch import load_file

        weights = load_file(path)
        # vLLM's in-place reload: it also redoes the kernel-format processing done after the
        # first load (e.g. packed CPU linears), which a plain load_weights would miss
        self.reload_weights(weights_iterator=iter(weights.items()), is_checkpoint_format=True)
        return len(weights)


SYNC_EXTENSION = f"{__name__}.WeightSyncExtension"


def _shared_hf(actor: Any) -> Engine:
    """An HF engine generating with the actor's own module (weight sync is free)."""
    return SharedHFEngine(actor.model, actor.processor, actor.family)


def _vllm_options(options: dict[str, Any]) -> dict[str, Any]:
    """vLLM's workers load new weights through the sync extension."""
    extra = dict(options.get("engine_kwargs") or {})
    extra.setdefault("worker_extension_cls", SYNC_EXTENSION)
    # log-probs of what was sampled (after temperature/top-p), as verl's rollout asks
    extra.setdefault("logprobs_mode", "processed_logprobs")
    return {**options, "engine_kwargs": extra}


# How the trainer adapts a registered backend (evalkit.engines) for rollouts, by name: one
# built around the actor's own module (weights always current), or extra options that let
# it take new weights. Any other backend is built as registered, loading ``model_dir``.
SHARED_ROLLOUT: Registry[Callable[[Any], Engine]] = Registry("shared rollout engine")
SHARED_ROLLOUT.register("hf", _shared_hf)
ROLLOUT_OPTIONS: Registry[Callable[[dict[str, Any]], dict[str, Any]]] = Registry("rollout options")
ROLLOUT_OPTIONS.register("vllm", _vllm_options)


def make_rollout_engine(
    name: str, model_dir: str, actor: Any, options: dict[str, Any], loop: EngineLoop
) -> Engine:
    """The rollout engine: ``hf`` shares the actor's module, others load ``model_dir``."""
    if name in SHARED_ROLLOUT:
        return SHARED_ROLLOUT.get(name)(actor)
    from evalkit.engines import ENGINE_CONFIGS, ENGINES

    opts = ROLLOUT_OPTIONS.get(name)(dict(options)) if name in ROLLOUT_OPTIONS else dict(options)
    config = ENGINE_CONFIGS.get(name).model_validate({"model": model_dir, **opts})

    async def build() -> Engine:
        engine: Engine = ENGINES.get(name)(config)
        return engine

    return loop.run(build())


def sync_weights(engine: Engine, actor: Any, loop: EngineLoop) -> None:
    """Make the rollout engine sample from the actor's current weights (see module docstring)."""
    if isinstance(engine, SharedHFEngine):
        if engine.model is not actor.model:
            raise EvalkitError("SharedHFEngine must hold the actor's own module")
        return
    core = getattr(engine, "_engine", None)  # VLLMEngine's AsyncLLM
    if core is None or not hasattr(core, "collective_rpc"):
        raise EvalkitError(
            f"{type(engine).__name__}: no way to load new weights into this rollout engine; "
            "use rollout.engine=hf or vllm"
        )
    with tempfile.TemporaryDirectory(prefix="trainer-sync-") as tmp:
        path = _write_weights(actor.model, Path(tmp) / "weights.safetensors")
        loop.run(core.collective_rpc("trainer_load_weights", args=(str(path),)))
    # computed with the old weights: cached prefixes and vision-encoder outputs (the
    # scheduler's bookkeeping too, or it would expect entries the worker dropped)
    loop.run(core.reset_prefix_cache())
    loop.run(core.reset_encoder_cache())


def _write_weights(model: Any, path: Path) -> Path:
    """The model's state dict as one safetensors file (tied tensors written once each)."""
    from safetensors.torch import save_file

    seen: set[int] = set()
    tensors = {}
    for name, value in model.state_dict().items():
        t = value.detach().cpu().contiguous()
        if t.data_ptr() in seen:  # a tied weight: safetensors refuses shared storage
            t = t.clone()
        seen.add(t.data_ptr())
        tensors[name] = t
    save_file(tensors, str(path))
    return path


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
    loop: EngineLoop,
    concurrency: int = 8,
) -> list[list[Response]]:
    """``counts[i]`` sampled responses to ``requests[i]``: one request with ``n=counts[i]``
    per prompt, so the engine encodes each prompt's video and prefills it once per group.

    HF requests are seeded from ``seed``, so a step's rollouts depend only on the weights
    and the step's seed: a resumed run samples the same tokens. vLLM's are unseeded: its
    CPU sampler rejects per-request seeds ("CPU Generator does not use offset"); the
    engine's own seed applies, so those rollouts are not replayed bit for bit on resume.
    """
    seeded = isinstance(engine, SharedHFEngine)
    reqs, owner = [], []
    for i, (r, k) in enumerate(zip(requests, counts, strict=True)):
        if k > 0:  # a group filled offline (mix policy) needs no rollout
            reqs.append(
                replace(r, sampling=replace(sampling, n=k, seed=seed + i if seeded else None))
            )
            owner.append(i)
    completions = loop.run(_generate_all(engine, reqs, concurrency))
    groups: list[list[Response]] = [[] for _ in requests]
    for req, comp, i in zip(reqs, completions, owner, strict=True):
        n = req.sampling.n
        if comp.token_ids is None or len(comp.token_ids) != n or len(comp.texts) != n:
            got = 0 if comp.token_ids is None else len(comp.token_ids)
            raise EvalkitError(
                f"request {req.id}: the rollout engine returned {got} token-id lists and "
                f"{len(comp.texts)} texts for n={n}; rollouts need token ids (hf or vllm)"
            )
        lps: list[list[float] | None] = [*comp.logprobs] if comp.logprobs else [None] * n
        pairs = zip(comp.token_ids, comp.texts, lps, strict=True)
        groups[i] = [Response(list(ids), text, logprobs=lp) for ids, text, lp in pairs]
    return groups
