"""How the judge is called: bounded concurrency, a timeout per attempt, bounded retries,
and a circuit breaker.

A judge that stops answering must not stall a run: every attempt is cut at ``timeout_s``,
a timed-out or transient failure is retried at most ``retries`` times, at most
``concurrency`` requests are in flight (they are awaited on the caller's event loop, never
one by one on a worker thread), and after ``max_failures`` consecutive failed calls the
judge is marked down for good: every later call fails at once with ``JudgeUnavailable``,
so the remaining judged samples are recorded "not scored: judge unavailable" instead of
each waiting out its own timeouts. There is no half-open probe: a judge that died during a
run is not trusted again in that run (resume it once the judge is back).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from evalkit.errors import EvalkitError, TransientError

_T = TypeVar("_T")
log = logging.getLogger(__name__)

JUDGE_UNAVAILABLE = "not scored: judge unavailable"
"""The explanation of a sample left unjudged because the judge was marked down."""

# Failures worth a second try; any other error (a 400, a bug) fails the call at once.
_RETRYABLE: tuple[type[BaseException], ...] = (TimeoutError, TransientError, ConnectionError)


class JudgeUnavailable(EvalkitError):
    """The judge was marked down by the circuit breaker; the call was not made."""


@dataclass
class JudgeGuard:
    """The calling policy of one judge (settings) and its breaker's state (counters)."""

    timeout_s: float = 60.0
    """Longest wait for one attempt, in seconds."""
    retries: int = 1
    """Extra attempts after a timeout or a transient error."""
    concurrency: int = 8
    """Judge requests in flight at once."""
    max_failures: int = 5
    """Consecutive failed calls after which the judge is marked down."""
    backoff_s: float = 0.5
    """Wait before the first retry; doubles each retry."""
    name: str = "judge"
    """Named in the log line when the breaker trips."""
    consecutive: int = 0
    calls: int = 0
    failed: int = 0
    refused: int = 0
    down_reason: str | None = None
    _slots: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = field(
        default=None, init=False, repr=False
    )

    @property
    def down(self) -> bool:
        """Whether the breaker has tripped."""
        return self.down_reason is not None

    def unavailable(self) -> JudgeUnavailable:
        """The error every call gets once the judge is down."""
        self.refused += 1
        return JudgeUnavailable(f"{JUDGE_UNAVAILABLE} ({self.down_reason})")

    async def call(self, attempt: Callable[[], Awaitable[_T]]) -> _T:
        """``await attempt()`` under the policy; raises ``JudgeUnavailable`` when down."""
        if self.down:
            raise self.unavailable()
        async with self._semaphore():
            for n in range(self.retries + 1):
                if self.down:  # tripped while this call waited for a slot or a retry
                    raise self.unavailable()
                self.calls += 1
                try:
                    result = await _within(attempt(), self.timeout_s)
                except Exception as exc:
                    if n < self.retries and isinstance(exc, _RETRYABLE):
                        await asyncio.sleep(self.backoff_s * 2**n)
                        continue
                    self._failure(exc)
                    raise
                self.consecutive = 0
                return result
        raise AssertionError("unreachable")

    def _failure(self, exc: BaseException) -> None:
        self.failed += 1
        self.consecutive += 1
        if self.consecutive >= self.max_failures and not self.down:
            self.down_reason = (
                f"{self.name} marked down after {self.consecutive} consecutive failed calls; "
                f"last: {type(exc).__name__}: {exc}"
            )
            log.warning("%s; the remaining judged samples are not scored", self.down_reason)

    def _semaphore(self) -> asyncio.Semaphore:
        # one per event loop: a semaphore is bound to the loop it first waits on
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots[0] is not loop:
            self._slots = (loop, asyncio.Semaphore(self.concurrency))
        return self._slots[1]


async def _within(coro: Awaitable[_T], timeout_s: float) -> _T:
    """``coro``'s result, or TimeoutError after ``timeout_s``; a late engine is abandoned.

    Unlike ``asyncio.wait_for`` this does not wait for the cancelled request to wind down,
    so an engine that is slow to honour cancellation cannot stretch the timeout.
    """
    task = asyncio.ensure_future(coro)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        task.cancel()
        task.add_done_callback(_retrieve)
        raise TimeoutError(f"no answer within {timeout_s:g} s")
    return task.result()


def _retrieve(task: asyncio.Future[Any]) -> None:
    # an abandoned request's late error is expected; reading it keeps asyncio quiet
    if not task.cancelled():
        task.exception()
