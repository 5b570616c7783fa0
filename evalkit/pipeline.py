"""The three-stage runner: IO (threads) -> engine (async, many in flight) -> score + store.

Each sample moves on the moment its previous stage is done: a request is handed to the
engine as soon as its frames are loaded, never at a batch boundary, so the engine's
scheduler can interleave the prefill of new requests with the decode of old ones. Memory
stays bounded: at most ``lookahead + max_in_flight`` samples are alive at once.
A sample whose score waits on an LLM judge (``AwaitingScorer``) leaves that count once
generated (only its text is left) and is judged on the event loop, many at once under
the judge's own bounds; the rest are scored on the sink thread, never behind the judge.

``run_sync`` is the vanilla baseline (load a batch, generate it, wait, repeat), kept only
to measure what the pipeline gains.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from evalkit.engines.base import BatchEngine, Completion, Engine, Request
from evalkit.errors import DataError, TransientError
from evalkit.records import failed_record, ok_record, scorer_failure
from evalkit.sample import Sample
from evalkit.scoring.bounded import BoundedScorer, PooledScorer, ScoringPool
from evalkit.scoring.types import Score, ScorerFailure
from evalkit.scoring.verdicts import Verdicts
from evalkit.store import Store

Prepare = Callable[[Sample], Request]
ScoreFn = Callable[[Sample, Completion], Score | Verdicts]
"""A plain ``Score``, or ``Verdicts`` (headline rule + every other rule) for a real run."""


@runtime_checkable
class AwaitingScorer(Protocol):
    """A ``ScoreFn`` some of whose samples wait on I/O (an LLM judge): those (``awaits``)
    are scored by ``ascore`` on the event loop, many at once, instead of one by one on
    the sink thread, so they never hold up the samples behind them."""

    def __call__(self, sample: Sample, completion: Completion) -> Score | Verdicts: ...

    def awaits(self, sample: Sample) -> bool: ...

    async def ascore(self, sample: Sample, completion: Completion) -> Score | Verdicts: ...


_TRANSIENT: tuple[type[BaseException], ...] = (TransientError, ConnectionError, TimeoutError)


class PipelineConfig(BaseModel):
    """Concurrency bounds of the pipeline."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    io_workers: int = 4
    """Threads loading cache files and rendering prompts in parallel."""
    max_in_flight: int = 32
    """Requests inside the engine at once (submitted, not finished)."""
    lookahead: int = 16
    """Prepared requests allowed to wait for an engine slot."""
    max_retries: int = 2
    """Retries of a request after a transient engine error."""
    retry_backoff_s: float = 0.5
    """First retry delay; doubles each retry."""
    batch_size: int = 32
    """Batch size of the vanilla synchronous mode (``run_sync``)."""
    score_budget_s: float = Field(default=60.0, ge=0, allow_inf_nan=False)
    """Seconds the sink may spend scoring one sample under all its rules (in a child
    process); past it the sample is "scorer failed: time budget". 0: no budget (scored on
    the sink thread itself)."""


@dataclass
class PipelineStats:
    """Live counters, read by the progress display."""

    started: float = field(default_factory=time.time)
    total: int = 0
    skipped: int = 0
    io_running: int = 0
    waiting: int = 0
    in_flight: int = 0
    completed: int = 0
    failed: int = 0
    output_tokens: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    finished: float | None = None
    """When the last sample was handed back (None: still running)."""
    media_missing: int = 0
    """Samples recorded failed before the run because their media are missing
    (``--allow-missing``); not part of ``total`` or the rate."""

    def samples_per_s(self) -> float:
        """Finished samples (ok or failed) per second of pipeline time: from the first
        sample handed to a ready engine to the last record (start-up and shutdown of
        Ray and the engines left out, the same for one engine or N replicas)."""
        end = self.finished if self.finished is not None else time.time()
        return (self.completed + self.failed) / max(end - self.started, 1e-9)


def prompt_hash(request: Request) -> str:
    """Short hash of what the model is asked (text + system + any pre-filled answer start),
    stored with each record."""
    h = hashlib.sha256((request.system or "").encode() + b"\0" + request.text.encode())
    if request.assistant_prefix:  # only then, so hashes of other requests stay as they were
        h.update(b"\0" + request.assistant_prefix.encode())
    return h.hexdigest()[:16]


def prompt_text(request: Request) -> dict[str, str]:
    """What the model is asked, for its record (``records.PromptText``: the parts set)."""
    out = {"text": request.text}
    if request.system:
        out["system"] = request.system
    if request.assistant_prefix:
        out["assistant_prefix"] = request.assistant_prefix
    return out


class Pipeline:
    """Runs samples through ``prepare`` -> ``engine.generate`` -> ``score`` -> ``store``."""

    def __init__(
        self,
        engine: Engine,
        prepare: Prepare,
        score: ScoreFn,
        store: Store,
        config: PipelineConfig | None = None,
        fingerprint: str = "",
        scoring: ScoringPool | None = None,
    ) -> None:
        self.engine = engine
        self.prepare = prepare
        self.score = score
        self.store = store
        self.config = config or PipelineConfig()
        self.fingerprint = fingerprint
        self.scoring = scoring
        """Scoring children shared with the pipelines beside it (a sweep's settings); None:
        the sink forks its own."""
        self.stats = PipelineStats()
        self._bounded: BoundedScorer | PooledScorer | None = None  # the sink's scorer

    # -- asynchronous mode -------------------------------------------------------------

    async def run(self, samples: Iterable[Sample], *, retry_failed: bool = False) -> PipelineStats:
        """Run every sample not yet in the store; returns the final counters."""
        cfg = self.config
        self.stats = stats = PipelineStats()
        done = self.store.done_ids(include_failed=not retry_failed)
        alive = asyncio.Semaphore(cfg.lookahead + cfg.max_in_flight)
        slots = asyncio.Semaphore(cfg.max_in_flight)
        io_pool = ThreadPoolExecutor(cfg.io_workers, thread_name_prefix="evalkit-io")
        sink_pool = ThreadPoolExecutor(1, thread_name_prefix="evalkit-sink")
        tasks: set[asyncio.Task[None]] = set()
        seen: set[str] = set()
        self._start_bounded()
        try:
            for sample in samples:
                if sample.id in seen:
                    raise DataError(f"sample id {sample.id!r} occurs twice in the input")
                seen.add(sample.id)
                stats.total += 1
                if sample.id in done:
                    stats.skipped += 1
                    continue
                await alive.acquire()
                free = _Once(alive.release)  # early for a sample that waits on the judge
                task = asyncio.create_task(self._one(sample, slots, io_pool, sink_pool, free))
                task.add_done_callback(free.on_done)
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            if tasks:
                await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            io_pool.shutdown(wait=True, cancel_futures=True)
            sink_pool.shutdown(wait=True)  # records being written are finished, not torn
            self._stop_bounded()
        stats.finished = time.time()
        return stats

    def _start_bounded(self) -> None:
        """The sink's scoring child, forked before the pools start (see scoring.bounded),
        or its place in the shared scoring pool."""
        budget = self.config.score_budget_s
        if budget > 0 and BoundedScorer.available():
            if self.scoring is not None:
                self._bounded = self.scoring.scorer(self.score)
                return
            own = BoundedScorer(self.score, budget)
            own.start()
            self._bounded = own

    def _stop_bounded(self) -> None:
        if self._bounded is not None:
            self._bounded.close()
            self._bounded = None

    async def _one(
        self,
        sample: Sample,
        slots: asyncio.Semaphore,
        io_pool: ThreadPoolExecutor,
        sink_pool: ThreadPoolExecutor,
        free: Callable[[], None] = lambda: None,
    ) -> None:
        loop = asyncio.get_running_loop()
        stats = self.stats
        timings: dict[str, float | None] = {"io_start": time.time()}
        stats.io_running += 1
        try:
            request = await loop.run_in_executor(io_pool, self.prepare, sample)
        except Exception as exc:  # bad input, or a bug in a loader: fail this sample only
            stats.io_running -= 1
            await loop.run_in_executor(sink_pool, self._fail, sample, "io", exc, timings)
            return
        stats.io_running -= 1
        timings["io_end"] = time.time()
        self._count_cache(request)
        asked = (prompt_hash(request), prompt_text(request))
        stats.waiting += 1
        async with slots:
            stats.waiting -= 1
            stats.in_flight += 1
            try:
                completion = await self._generate(request)
            except Exception as exc:
                fail = functools.partial(self._fail, prompt=asked[1])
                await loop.run_in_executor(sink_pool, fail, sample, "engine", exc, timings)
                return
            finally:
                stats.in_flight -= 1
        del request  # frames can go before scoring; only the text is needed now
        result = await self._judged(sample, completion, free)
        await loop.run_in_executor(
            sink_pool, self._finish, sample, completion, timings, asked, result
        )

    async def _generate(self, request: Request) -> Completion:
        delay = self.config.retry_backoff_s
        for attempt in range(self.config.max_retries + 1):
            try:
                completion = await self.engine.generate(request)
                completion.timings.submitted = completion.timings.submitted or time.time()
                request.metadata["attempts"] = attempt + 1
                return completion
            except _TRANSIENT:
                if attempt == self.config.max_retries:
                    raise
                await asyncio.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    def _count_cache(self, request: Request) -> None:
        hit = request.metadata.get("cache_hit")
        if hit is True:
            self.stats.cache_hits += 1
        elif hit is False:
            self.stats.cache_misses += 1

    # -- the sink: scoring and storing, off the event loop -----------------------------

    def _finish(
        self,
        sample: Sample,
        completion: Completion,
        timings: dict[str, Any],
        asked: tuple[str, dict[str, str]],
        result: Score | Verdicts | Exception | None = None,
    ) -> None:
        """Score (unless done on the loop) and record a generated sample; ``asked`` is its
        prompt's (hash, text)."""
        # A bug in a scorer must not lose the prediction, nor pass for a 0: the sample is
        # recorded as failed at stage "score" with the traceback (reports: "scorer failed").
        # ``result`` is given when the sample was already scored on the loop (the judge).
        phash, prompt = asked
        if isinstance(result, Exception):
            self._fail(sample, "score", ScorerFailure.of(result), timings, completion, prompt)
            return
        try:
            if result is None:
                scorer = self._bounded or self.score
                result = scorer(sample, completion)
        except Exception as exc:
            self._fail(sample, "score", ScorerFailure.of(exc), timings, completion, prompt)
            return
        if (failure := scorer_failure(result)) is not None:  # the router caught it
            self._fail(sample, "score", failure, timings, completion, prompt)
            return
        t = completion.timings
        timings.update(submitted=t.submitted, first_token=t.first_token, finished=t.finished)
        timings["scored"] = time.time()
        tokens = {"prompt": completion.prompt_tokens, "output": completion.output_tokens}
        self.store.append(
            ok_record(
                sample,
                result,
                completion.texts,
                fingerprint=self.fingerprint,
                timings=timings,
                prompt_hash=phash,
                tokens=tokens,
                prompt=prompt,
            )
        )
        self.stats.completed += 1
        self.stats.output_tokens += completion.output_tokens

    def _fail(
        self,
        sample: Sample,
        stage: str,
        exc: BaseException | ScorerFailure,
        timings: dict[str, Any],
        completion: Completion | None = None,
        prompt: dict[str, str] | None = None,
    ) -> None:
        failure = exc if isinstance(exc, ScorerFailure) else None
        self.store.append(
            failed_record(
                sample,
                stage,
                failure.error if failure else f"{type(exc).__name__}: {exc}",
                fingerprint=self.fingerprint,
                timings=timings,
                prediction=completion.text if completion else None,
                traceback=failure.traceback if failure else None,
                prompt=prompt,
            )
        )
        self.stats.failed += 1

    # -- vanilla synchronous baseline ---------------------------------------------------

    async def run_sync(self, samples: Iterable[Sample]) -> PipelineStats:
        """Load a batch inline, generate it, wait for all of it, repeat (the baseline)."""
        self.stats = stats = PipelineStats()
        done = self.store.done_ids()
        todo = [s for s in samples if s.id not in done]
        stats.total = len(todo)
        for i in range(0, len(todo), self.config.batch_size):
            batch, requests, timings = [], [], []
            for sample in todo[i : i + self.config.batch_size]:
                t: dict[str, Any] = {"io_start": time.time()}
                try:
                    request = self.prepare(sample)
                except Exception as exc:
                    self._fail(sample, "io", exc, t)
                    continue
                t["io_end"] = time.time()
                self._count_cache(request)
                batch.append(sample)
                requests.append(request)
                timings.append(t)
            if isinstance(self.engine, BatchEngine):
                completions = await self.engine.generate_batch(requests)
            else:
                completions = await asyncio.gather(*(self.engine.generate(r) for r in requests))
            pairs = zip(batch, completions, strict=True)
            judged = await asyncio.gather(*(self._judged(s, c) for s, c in pairs))
            rows = zip(batch, requests, completions, timings, judged, strict=True)
            for sample, request, completion, t, result in rows:
                asked = (prompt_hash(request), prompt_text(request))
                self._finish(sample, completion, t, asked, result)
        stats.finished = time.time()
        return stats

    async def _judged(
        self, sample: Sample, completion: Completion, free: Callable[[], None] | None = None
    ) -> Score | Verdicts | Exception | None:
        """A sample that waits on the judge, scored on the loop (or what it raised); None
        for the others, which the sink scores. ``free`` lets the next sample in first."""
        if not (isinstance(self.score, AwaitingScorer) and self.score.awaits(sample)):
            return None
        if free is not None:
            free()  # only the text is left: no reason to hold a place while the judge answers
        try:
            return await self.score.ascore(sample, completion)
        except Exception as exc:
            return exc


class _Once:
    """Calls ``fn`` the first time it is called, never again."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._fn: Callable[[], Any] | None = fn

    def __call__(self) -> None:
        fn, self._fn = self._fn, None
        if fn is not None:
            fn()

    def on_done(self, _: object) -> None:
        """The same, as a task's done callback."""
        self()
