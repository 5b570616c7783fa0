"""vLLM backends: the async engine (chunked prefill, many requests in flight) and the
vanilla batch engine (``LLM.generate`` on a batch, the way lmms-eval runs vLLM).

Frames reach vLLM exactly as the frame cache holds them: ``(uint8 T x H x W x 3, source
metadata)`` with ``do_sample_frames=False, do_resize=False``. Scripts that start these
engines need an ``if __name__ == "__main__"`` guard (vLLM spawns its engine processes).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evalkit.config import throughput_only
from evalkit.engines.base import Completion, Request, SamplingParams, Timings
from evalkit.engines.family import NO_RESAMPLE, ModelFamily, detect_family, require_trust
from evalkit.engines.lifecycle import Reaper, engine_shm, release_engine_shm
from evalkit.engines.prompting import media_images, render_prompt
from evalkit.errors import EvalkitError

log = logging.getLogger(__name__)


class VLLMConfig(BaseModel):
    """Settings of a vLLM engine (both the async and the vanilla batch one)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    model: str
    """Checkpoint directory (or hub id, if that checkpoint is already in the local cache)."""
    tensor_parallel_size: int = 1
    """GPUs per engine (tensor parallelism)."""
    dtype: str = "auto"
    """Weights/activation dtype: auto, bfloat16, float16, float32 (float32 on CPU tests)."""
    max_model_len: int | None = None
    """Longest prompt + output in tokens; None takes the checkpoint's."""
    enable_chunked_prefill: bool = True
    """Split long (video) prompts into chunks interleaved with other requests' decode steps."""
    max_num_batched_tokens: int = throughput_only(8192)
    """Token budget of one engine step (the prefill chunk size)."""
    max_num_seqs: int = throughput_only(64)
    """Most requests running in one engine step."""
    limit_mm_per_prompt: dict[str, int] = Field(default_factory=lambda: {"video": 1, "image": 1})
    """Most videos/images per prompt (vLLM reserves memory for this many)."""
    gpu_memory_utilization: float = throughput_only(0.9)
    """Fraction of GPU memory vLLM may use (on CPU: of the machine's memory; evalkit sizes
    the KV cache there instead unless this is given: evalkit.engines.cpu_memory)."""
    kv_cache_memory_bytes: int | None = throughput_only(None)
    """KV cache size in bytes, instead of a share of the memory (None: vLLM's share; on CPU
    evalkit sets it when neither this, the share nor VLLM_CPU_KVCACHE_SPACE is given)."""
    enforce_eager: bool = throughput_only(False)
    """Skip torch.compile / CUDA graphs (faster start, slower steps)."""
    seed: int = 0
    """Engine seed (sampling with temperature > 0)."""
    enable_prefix_caching: bool | None = None
    """Prefix caching (None = vLLM's default, on). Benchmarks must say when it was on."""
    trust_remote_code: bool = False
    """Allow code shipped with the checkpoint."""
    record_steps: bool = throughput_only(False)
    """Record per-step scheduler details (prefill/decode tokens per step) in ``steps``."""
    close_grace_s: float = throughput_only(1.0, gt=0, allow_inf_nan=False)
    """Seconds vLLM's engine processes get to exit by themselves on close before vLLM
    kills them (its own shutdown timeout; its default is 5). Every record is durable by
    then: a graceful exit (~4.6 s for the tiny model on 2 cores, mostly two interpreters
    holding torch winding down) only delays the end of the run."""
    engine_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Further vLLM engine arguments, passed through unchanged."""

    def engine_args(self) -> dict[str, Any]:
        """Keyword arguments for ``AsyncEngineArgs`` / ``LLM``."""
        kw: dict[str, Any] = {
            "model": self.model,
            "tensor_parallel_size": self.tensor_parallel_size,
            "dtype": self.dtype,
            "enable_chunked_prefill": self.enable_chunked_prefill,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "max_num_seqs": self.max_num_seqs,
            "limit_mm_per_prompt": dict(self.limit_mm_per_prompt),
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "enforce_eager": self.enforce_eager,
            "seed": self.seed,
            "trust_remote_code": self.trust_remote_code,
        }
        if self.max_model_len is not None:
            kw["max_model_len"] = self.max_model_len
        if self.kv_cache_memory_bytes is not None:
            kw["kv_cache_memory_bytes"] = self.kv_cache_memory_bytes
        if self.enable_prefix_caching is not None:
            kw["enable_prefix_caching"] = self.enable_prefix_caching
        if self.record_steps:
            kw["enable_logging_iteration_details"] = True
        kw.update(self.engine_kwargs)
        return kw


@dataclass(frozen=True)
class StepRecord:
    """One engine step as the scheduler reported it (``VLLMConfig.record_steps``)."""

    time: float
    prefill_requests: int
    prefill_tokens: int
    decode_requests: int
    decode_tokens: int
    encoder_inputs: int


def to_vllm_sampling(sampling: SamplingParams) -> Any:
    """evalkit's SamplingParams as vLLM's."""
    from vllm import SamplingParams as VSamplingParams

    return VSamplingParams(
        n=sampling.n,
        max_tokens=sampling.max_tokens,
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        top_k=0 if sampling.top_k < 0 else sampling.top_k,  # vLLM: 0 disables top-k
        seed=sampling.seed,
        stop=list(sampling.stop) or None,
        logprobs=0 if sampling.logprobs else None,  # 0: the sampled token's only
    )


def vllm_prompt(request: Request, prompt: str, family: ModelFamily | None = None) -> dict[str, Any]:
    """The vLLM input dict: prompt text + frames with their source metadata (as the model's
    family takes them: its processor settings, its metadata keys, or frames as images)."""
    fam = family.family if family is not None else None
    mm: dict[str, Any] = {}
    if request.videos and (fam is None or fam.feed == "video"):
        extra = fam.video_metadata if fam is not None else {}
        mm["video"] = [
            (fam.processor_frames(v.array) if fam else v.array, {**v.meta.to_vllm(), **extra})
            for v in request.videos
        ]
    images = media_images(request, family)
    if images:
        mm["image"] = images
    out: dict[str, Any] = {"prompt": prompt}
    if mm:
        out["multi_modal_data"] = mm
        out["mm_processor_kwargs"] = fam.vllm_processor_kwargs if fam else dict(NO_RESAMPLE)
    return out


def frame_counts(request: Request) -> tuple[int, ...]:
    """The frame count of each of a request's videos."""
    return tuple(len(v.array) for v in request.videos)


class FrameCountGate:
    """Admits a request only while every request in flight has its videos' frame counts
    (a family whose vLLM module encodes videos of one frame count per step); the others
    wait until those in flight are done. Open (admits all) for any other family."""

    def __init__(self, family: ModelFamily | None) -> None:
        self.on = family is not None and family.family.one_frame_count_per_step
        self._counts: tuple[int, ...] | None = None
        self._inflight = 0
        self._changed: asyncio.Condition | None = None  # made in the engine's event loop

    @contextlib.asynccontextmanager
    async def admit(self, request: Request) -> AsyncIterator[None]:
        """Hold a place for ``request`` while it runs."""
        counts = frame_counts(request)
        if not self.on or not counts:
            yield
            return
        changed = self._changed = self._changed or asyncio.Condition()
        async with changed:
            await changed.wait_for(lambda: self._inflight == 0 or self._counts == counts)
            self._counts, self._inflight = counts, self._inflight + 1
        try:
            yield
        finally:
            async with changed:
                self._inflight -= 1
                changed.notify_all()


def engine_model(config: VLLMConfig) -> tuple[ModelFamily | None, dict[str, Any]]:
    """The family of ``config.model`` (a local checkpoint) and the engine arguments that
    load it: a view of it with the weight names vLLM expects where it needs one
    (:mod:`evalkit.engines.checkpoint`); a family shipping its own code needs
    ``trust_remote_code`` said explicitly; a family vLLM 0.32 cannot serve is refused."""
    from evalkit.engines.checkpoint import loadable

    family = detect_family(config.model) if os.path.isdir(config.model) else None
    require_trust(family, config.model, config.trust_remote_code)
    if family is not None and family.family.vllm_refusal:
        raise EvalkitError(f"{config.model}: {family.family.vllm_refusal}")
    args = config.engine_args()
    args["model"] = loadable(config.model, family)
    return family, args


def completion_from_output(
    request: Request, output: Any, timings: Timings, outputs: list[Any] | None = None
) -> Completion:
    """A vLLM RequestOutput as a Completion (``outputs``: its completions, when collected
    from a stream, in index order)."""
    outputs = output.outputs if outputs is None else outputs
    texts = [o.text for o in outputs]
    token_ids = [list(o.token_ids) for o in outputs]
    logprobs = None
    if request.sampling.logprobs and all(o.logprobs is not None for o in outputs):
        # one {token id: Logprob} per position; which log-prob depends on the engine's
        # logprobs_mode (the trainer asks for processed_logprobs: what was sampled from)
        logprobs = [
            [float(pos[t].logprob) for t, pos in zip(o.token_ids, o.logprobs, strict=True)]
            for o in outputs
        ]
    return Completion(
        request_id=request.id,
        texts=texts,
        prompt_tokens=len(output.prompt_token_ids or []),
        output_tokens=sum(len(t) for t in token_ids),
        timings=timings,
        token_ids=token_ids,
        logprobs=logprobs,
    )


def _request_errors() -> tuple[type[BaseException], ...]:
    """vLLM's exception types that mean "this request is bad", not "the engine is broken"."""
    from vllm.exceptions import VLLMClientError
    from vllm.v1.engine.exceptions import EngineGenerateError

    return (ValueError, VLLMClientError, EngineGenerateError)


class _StepRecorder:
    """A vLLM stat logger that keeps each step's scheduler details (front-end process)."""

    def __init__(self, sink: list[StepRecord]) -> None:
        self.sink = sink

    def __call__(self, vllm_config: Any, engine_index: int = 0) -> Any:
        from vllm.v1.metrics.loggers import StatLoggerBase

        sink = self.sink

        class Recorder(StatLoggerBase):
            def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
                pass

            def record(
                self,
                scheduler_stats: Any,
                iteration_stats: Any,
                mm_cache_stats: Any = None,
                engine_idx: int = 0,
            ) -> None:
                d = getattr(scheduler_stats, "iteration_details", None)
                if d is None or d.is_dummy:
                    return
                sink.append(
                    StepRecord(
                        time=time.time(),
                        prefill_requests=d.num_ctx_requests,
                        prefill_tokens=d.num_ctx_tokens,
                        decode_requests=d.num_generation_requests,
                        decode_tokens=d.num_generation_tokens,
                        encoder_inputs=d.num_encoder_inputs,
                    )
                )

            def log_engine_initialized(self) -> None:
                pass

        return Recorder(vllm_config, engine_index)


class VLLMEngine:
    """The Engine protocol on vLLM's ``AsyncLLM``; many ``generate`` calls run at once."""

    def __init__(self, config: VLLMConfig) -> None:
        from vllm import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        self.config = config
        self.family, engine_args = engine_model(config)
        self._gate = FrameCountGate(self.family)
        self.steps: list[StepRecord] = []
        loggers: Any = [_StepRecorder(self.steps)] if config.record_steps else None
        args = AsyncEngineArgs(**engine_args, disable_log_stats=True)
        t0 = time.time()
        # before vLLM starts its engine processes, so that the watchdog sees them start
        self._reaper = Reaper().start()
        try:
            self._engine: Any = AsyncLLM.from_engine_args(args, stat_loggers=loggers)
        except BaseException:
            self._reaper.stop()
            raise
        self.start_s = time.time() - t0
        self._tokenizer = self._engine.get_tokenizer()
        self._ids = itertools.count()

    @property
    def max_model_len(self) -> int | None:
        """The model's context in tokens as vLLM runs it (prompts must be shorter)."""
        return _max_model_len(self._engine)

    def prompt(self, request: Request) -> str:
        """The chat prompt this engine sends for ``request``."""
        return render_prompt(self._tokenizer, request, self.family)

    async def generate(self, request: Request) -> Completion:
        """Stream one request through the engine; records submit/first-token/finish times."""
        if self._engine is None:
            raise EvalkitError("VLLMEngine is closed")
        if self.family is not None:
            self.family.check_frames(request)
        timings = Timings(submitted=time.time())
        inputs = vllm_prompt(request, self.prompt(request), self.family)
        params = to_vllm_sampling(request.sampling)
        final = None
        # A streamed n>1 request yields each step only the completions that changed (vLLM's
        # parallel sampling): keep the latest of every index, not just the last message.
        latest: dict[int, Any] = {}
        try:
            async with self._gate.admit(request):
                async for out in self._engine.generate(
                    inputs, params, f"{request.id}#{next(self._ids)}"
                ):
                    if timings.first_token is None and any(o.token_ids for o in out.outputs):
                        timings.first_token = time.time()
                    latest.update((o.index, o) for o in out.outputs)
                    final = out
        except Exception as exc:
            # vLLM refuses bad input (prompt too long, malformed media) per request with a
            # ValueError or EngineGenerateError; the engine itself keeps running.
            if isinstance(exc, _request_errors()):
                raise EvalkitError(f"request {request.id}: vLLM refused it: {exc}") from exc
            raise
        if final is None:
            raise EvalkitError(f"request {request.id}: vLLM returned no output")
        timings.finished = time.time()
        if len(latest) != request.sampling.n:
            raise EvalkitError(
                f"request {request.id}: vLLM returned {len(latest)} of {request.sampling.n} "
                "completions"
            )
        outputs = [latest[i] for i in sorted(latest)]
        for o in outputs:  # an aborted or errored request is the engine's failure, never ""
            if o.finish_reason in ("abort", "error") or not o.token_ids:
                raise EvalkitError(
                    f"request {request.id}: vLLM ended completion {o.index} with finish_reason "
                    f"{o.finish_reason!r} after {len(o.token_ids)} token(s)"
                )
        return completion_from_output(request, final, timings, outputs)

    async def load_weights(self, path: str) -> None:
        """Load checkpoint folder ``path``'s weights into the running engine, in place
        (vLLM's ``reload_weights`` on every worker, from disk: the tensors never cross a
        process boundary), then drop the prefix cache, whose KV the old weights computed
        (the workers drop their encoder and multimodal caches themselves). No request may
        be in flight."""
        if self._engine is None:
            raise EvalkitError("VLLMEngine is closed")
        await self._engine.collective_rpc(
            "reload_weights", kwargs={"weights_path": str(path), "is_checkpoint_format": True}
        )
        await self._engine.reset_prefix_cache()
        await self._engine.reset_encoder_cache()

    async def close(self) -> None:
        """Shut the engine processes down (idempotent)."""
        engine, self._engine = self._engine, None
        if engine is None:
            return
        # Stop the output loop first, in its own event loop: otherwise it sees the engine
        # process go away during shutdown and logs a spurious EngineDeadError.
        handler = getattr(engine, "output_handler", None)
        if handler is not None and not handler.done():
            handler.cancel()
            await asyncio.gather(handler, return_exceptions=True)
        await _shutdown(lambda: engine.shutdown(timeout=self.config.close_grace_s), self._reaper)


class VLLMBatchEngine:
    """The vanilla baseline: ``LLM.generate`` on a whole batch, blocking until all finish."""

    def __init__(self, config: VLLMConfig) -> None:
        from vllm import LLM

        self.config = config
        self.family, engine_args = engine_model(config)
        t0 = time.time()
        self._reaper = Reaper().start()
        try:
            self._llm: Any = LLM(**engine_args, disable_log_stats=True)
        except BaseException:
            self._reaper.stop()
            raise
        self.start_s = time.time() - t0
        self._tokenizer = self._llm.get_tokenizer()
        self._lock = threading.Lock()  # LLM is not re-entrant

    @property
    def max_model_len(self) -> int | None:
        """The model's context in tokens as vLLM runs it (prompts must be shorter)."""
        return _max_model_len(self._llm.llm_engine if self._llm is not None else None)

    def generate_batch_sync(self, requests: list[Request]) -> list[Completion]:
        """Generate a batch in one ``LLM.generate`` call (all finish together)."""
        if self._llm is None:
            raise EvalkitError("VLLMBatchEngine is closed")
        if not requests:
            return []
        for r in requests:
            if self.family is not None:
                self.family.check_frames(r)
        fam = self.family
        inputs = [vllm_prompt(r, render_prompt(self._tokenizer, r, fam), fam) for r in requests]
        params = [to_vllm_sampling(r.sampling) for r in requests]
        # a family encoding one frame count per step gets one call per frame count
        groups: dict[Any, list[int]] = {}
        for i, r in enumerate(requests):
            key = frame_counts(r) if FrameCountGate(fam).on else ()
            groups.setdefault(key, []).append(i)
        outputs: list[Any] = [None] * len(requests)
        with self._lock:
            submitted = time.time()
            for idx in groups.values():
                got = self._llm.generate(
                    [inputs[i] for i in idx], [params[i] for i in idx], use_tqdm=False
                )
                for i, out in zip(idx, got, strict=True):
                    outputs[i] = out
            finished = time.time()
        # LLM.generate reports no per-request first-token time: the batch is one unit.
        timings = [Timings(submitted=submitted, finished=finished) for _ in requests]
        return [
            completion_from_output(r, o, t)
            for r, o, t in zip(requests, outputs, timings, strict=True)
        ]

    async def generate_batch(self, requests: list[Request]) -> list[Completion]:
        """Async wrapper (a worker thread) used by ``Pipeline.run_sync``."""
        return await asyncio.to_thread(self.generate_batch_sync, requests)

    async def generate(self, request: Request) -> Completion:
        """A batch of one (the protocol's single-request form)."""
        return (await self.generate_batch([request]))[0]

    async def close(self) -> None:
        """Shut the engine processes down (idempotent)."""
        llm, self._llm = self._llm, None
        if llm is not None:
            core = llm.llm_engine.engine_core
            await _shutdown(lambda: core.shutdown(timeout=self.config.close_grace_s), self._reaper)


def _max_model_len(engine: Any) -> int | None:
    value = getattr(getattr(engine, "model_config", None), "max_model_len", None)
    return int(value) if isinstance(value, int) else None


class _ExpectedKills(logging.Filter):
    """vLLM warns "force killing remaining process(es)" when its engine processes outlive
    the shutdown timeout: with ``close_grace_s`` that is how a close normally ends, so it
    is logged here once at debug level instead of as two warnings per close."""

    LOGGERS = ("vllm.v1.utils", "vllm.utils.system_utils")

    def __init__(self) -> None:
        super().__init__()
        self.killed = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if "force killing" in str(record.msg):
            self.killed += 1
            return False
        return True

    def __enter__(self) -> _ExpectedKills:
        for name in self.LOGGERS:
            logging.getLogger(name).addFilter(self)
        return self

    def __exit__(self, *exc: object) -> None:
        for name in self.LOGGERS:
            logging.getLogger(name).removeFilter(self)
        if self.killed:
            log.debug("vLLM's engine processes were stopped after the close grace period")


async def _shutdown(shutdown: Any, reaper: Reaper) -> None:
    """Run vLLM's shutdown off the event loop. By now every record is durable, so an error
    in it (a worker already gone: psutil.NoSuchProcess) is a warning, not a failed run."""
    held = engine_shm()  # while the engine processes still map their segments
    try:
        with _ExpectedKills():
            await asyncio.to_thread(shutdown)
    except Exception as exc:
        log.warning(
            "vLLM failed while shutting down (%s: %s); leftover engine processes are "
            "left to the watchdog",
            type(exc).__name__,
            exc,
        )
        return  # the watchdog stays until this process exits, then reaps what is left
    release_engine_shm(held)
    reaper.stop()
