"""Rollouts: n responses per prompt through an evalkit Engine, grouped by prompt.

The engine samples tokens; log-probs are recomputed by the training model
(:func:`trainer.step.compute_logprobs`). The engine's own log-probs of the sampled tokens
(``Response.logprobs``) only measure the mismatch and weight the loss when asked
(:mod:`trainer.algorithms.rollout_correction`).

Weight sync. The HF rollout engine (:class:`SharedHFEngine`) generates with the actor's own
in-memory module, so after each optimizer step it already samples from the current weights:
sync is free and exact. A vLLM engine holds its own copy in its worker processes; it is
started with :class:`~trainer.weight_sync.WeightSyncExtension` as vLLM's worker extension,
and :func:`sync_weights` sends the actor's tensors in memory, in buckets, through
``collective_rpc`` (shared memory on CPU, CUDA IPC on GPU: :mod:`trainer.weight_sync`);
then the prefix and encoder caches (old weights) are dropped.

Colocation. On a GPU shared with training, :func:`sleep_engine` puts vLLM to sleep after
the rollout (weights offloaded or dropped, KV cache freed) and :func:`sync_weights` wakes
it in two stages, weights then KV cache, as verl's hybrid engine does. vLLM offers sleep
mode on CUDA/ROCm/XPU only (``Platform.is_sleep_mode_available``; ``enable_sleep_mode``
raises on CPU, whose ``CPUWorker.sleep`` / ``wake_up`` only log "not supported"), so on
CPU both are no-ops with a logged reason.

vLLM's ``AsyncLLM`` is bound to the event loop it was created in, so all engine calls go
through one persistent :class:`EngineLoop` for the whole run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, TypeVar

from evalkit.engines.base import Completion, Engine, Request, SamplingParams
from evalkit.engines.family import VISION_END, VISION_START
from evalkit.engines.hf_engine import HFConfig, HFEngine
from evalkit.errors import EvalkitError
from evalkit.registry import Registry

from .batch import Response
from .weight_sync import (
    EngineWeightSync,
    NamedTensors,
    SyncStats,
    WeightSyncExtension,
    resolve_transport,
)

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


SYNC_EXTENSION = f"{WeightSyncExtension.__module__}.WeightSyncExtension"


def _shared_hf(actor: Any) -> Engine:
    """An HF engine generating with the actor's own module (weight sync is free)."""
    return SharedHFEngine(actor.model, actor.processor, actor.family)


def _vllm_options(options: dict[str, Any], sleep_level: int) -> dict[str, Any]:
    """vLLM's workers load new weights through the sync extension (and sleep while the
    actor trains where the platform has sleep mode)."""
    extra = dict(options.get("engine_kwargs") or {})
    extra.setdefault("worker_extension_cls", SYNC_EXTENSION)
    # log-probs of what was sampled (after temperature/top-p), as verl's rollout asks
    extra.setdefault("logprobs_mode", "processed_logprobs")
    if sleep_level > 0:
        ok, why = sleep_mode_available()
        if ok:
            extra.setdefault("enable_sleep_mode", True)
        else:
            log.info("rollout.sleep_level=%d ignored: %s", sleep_level, why)
    return {**options, "engine_kwargs": extra}


# How the trainer adapts a registered backend (evalkit.engines) for rollouts, by name: one
# built around the actor's own module (weights always current), or extra options that let
# it take new weights. Any other backend is built as registered, loading ``model_dir``.
SHARED_ROLLOUT: Registry[Callable[[Any], Engine]] = Registry("shared rollout engine")
SHARED_ROLLOUT.register("hf", _shared_hf)
ROLLOUT_OPTIONS: Registry[Callable[[dict[str, Any], int], dict[str, Any]]] = Registry(
    "rollout options"
)
ROLLOUT_OPTIONS.register("vllm", _vllm_options)


def make_rollout_engine(
    name: str,
    model_dir: str,
    actor: Any,
    options: dict[str, Any],
    loop: EngineLoop,
    sleep_level: int = 0,
) -> Engine:
    """The rollout engine: ``hf`` shares the actor's module, others load ``model_dir``
    (vLLM with sleep mode when ``sleep_level > 0`` and the platform has it)."""
    if name in SHARED_ROLLOUT:
        return SHARED_ROLLOUT.get(name)(actor)
    from evalkit.engines import build

    adapt = ROLLOUT_OPTIONS.get(name) if name in ROLLOUT_OPTIONS else None
    opts = adapt(dict(options), sleep_level) if adapt is not None else dict(options)

    async def start() -> Engine:  # on the run's loop: vLLM's AsyncLLM is bound to it
        return build(name, model_dir, opts)

    return loop.run(start())


def sync_weights(
    engine: Engine,
    actor: Any,
    loop: EngineLoop,
    bucket_mb: float = 512.0,
    transport: str = "auto",
    named: NamedTensors | None = None,
) -> SyncStats | None:
    """Make the rollout engine sample from the actor's current weights (module docstring):
    wake the weights, send them in buckets, wake the KV cache, drop stale caches.
    ``named``: the tensors to send instead of the actor's state dict, tied ones given once
    (a distributed rank passes its full weights, gathered one at a time)."""
    if isinstance(engine, SharedHFEngine):
        if engine.model is not actor.model:
            raise EvalkitError("SharedHFEngine must hold the actor's own module")
        return None
    core = _vllm_core(engine)
    asleep = _sleep_enabled(core) and loop.run(core.is_sleeping())
    if asleep:  # weights first: the KV cache would only crowd the sync's buckets
        loop.run(core.wake_up(tags=["weights"]))
    sync = _engine_sync(engine, loop, resolve_transport(transport, _device(core)), bucket_mb)
    if named is None:
        stats = sync.send(actor.model.state_dict().items())
    else:
        stats = sync.send(named, unique=False)
    if asleep:
        loop.run(core.wake_up(tags=["kv_cache"]))
    # computed with the old weights: cached prefixes and vision-encoder outputs (the
    # scheduler's bookkeeping too, or it would expect entries the worker dropped)
    loop.run(core.reset_prefix_cache())
    loop.run(core.reset_encoder_cache())
    log.debug("weight sync: %s", stats)
    return stats


def sleep_engine(engine: Engine, loop: EngineLoop, level: int = 1) -> bool:
    """Free the rollout engine's memory for training (vLLM sleep: level 1 offloads the
    weights to host memory, 2 discards them; the KV cache is discarded at both). A no-op
    (False, reason logged once) where the engine was started without sleep mode: the HF
    engine, vLLM on CPU, ``rollout.sleep_level=0``. The next :func:`sync_weights` wakes it."""
    if level <= 0 or isinstance(engine, SharedHFEngine):
        return False
    core = _vllm_core(engine)
    if not _sleep_enabled(core):
        _log_once(
            "rollout engine has no sleep mode (vLLM supports it on CUDA/ROCm/XPU only; "
            "its CPU worker ignores sleep): it keeps its memory during training"
        )
        return False
    if not loop.run(core.is_sleeping()):
        loop.run(core.sleep(level))
    return True


def sleep_mode_available() -> tuple[bool, str]:
    """Whether vLLM offers sleep mode on this machine's platform, and why not."""
    from vllm.platforms import current_platform

    if current_platform.is_sleep_mode_available():
        return True, ""
    return False, f"vLLM has no sleep mode on platform {current_platform.device_type!r}"


def _engine_sync(engine: Any, loop: EngineLoop, transport: str, bucket_mb: float) -> Any:
    """The engine's :class:`EngineWeightSync`, kept from step to step (its shared-memory
    segments are reused: see ``trainer.weight_sync.ShmPool``)."""
    sync = getattr(engine, "_trainer_weight_sync", None)
    if sync is None or (sync.transport, sync.bucket_mb) != (transport, bucket_mb):
        release_weight_sync(engine)  # the old buckets go now, not at garbage collection
        core = engine._engine

        def rpc(method: str, *args: Any) -> list[Any]:
            return loop.run(core.collective_rpc(method, args=args))

        dtype = core.model_config.dtype
        sync = EngineWeightSync(rpc, transport=transport, bucket_mb=bucket_mb, dtype=dtype)
        engine._trainer_weight_sync = sync
    return sync


def release_weight_sync(engine: Any) -> None:
    """Unlink the shared-memory buckets of ``engine``'s weight sync now (a no-op where it
    has none, or they are gone already): a worker killed after closing its engine never
    runs the finaliser that would otherwise unlink them."""
    sync = getattr(engine, "_trainer_weight_sync", None)
    if sync is not None:
        engine._trainer_weight_sync = None
        sync.close()


def _device(core: Any) -> str:
    return str(core.vllm_config.device_config.device_type)


def per_request_seeds(engine: Engine) -> bool:
    """Whether ``engine`` takes a seed per request (see :func:`sample_responses`)."""
    if isinstance(engine, SharedHFEngine):
        return True
    core = getattr(engine, "_engine", None)
    return getattr(core, "vllm_config", None) is not None and _device(core) != "cpu"


def _vllm_core(engine: Engine) -> Any:
    core = getattr(engine, "_engine", None)  # VLLMEngine's AsyncLLM
    if core is None or not hasattr(core, "collective_rpc"):
        raise EvalkitError(
            f"{type(engine).__name__}: no way to load new weights into this rollout engine; "
            "use rollout.engine=hf or vllm"
        )
    return core


def _sleep_enabled(core: Any) -> bool:
    return bool(getattr(core.model_config, "enable_sleep_mode", False))


_LOGGED: set[str] = set()


def _log_once(message: str) -> None:
    if message not in _LOGGED:
        _LOGGED.add(message)
        log.info(message)


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

    Requests are seeded per prompt (``seed + i``, in vLLM's SamplingParams.seed), so a
    step's rollouts depend only on the weights and the step's seed: a resumed run samples
    the same tokens. Except vLLM on CPU: a seeded request whose prefill is split into
    chunks fails there (``GPUModelRunner`` rewinds the request's generator with
    ``set_offset``, which a CPU generator lacks: "CPU Generator does not use offset"), so
    those are unseeded and the engine's own seed applies.
    """
    seeded = per_request_seeds(engine)
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
